"""Run the zoo's tests and the bench with records; merge them into the site.

The commands of docs/guides/run-on-your-mac.md, run the way the page runs
them: on this machine, with the compute unit it has, into a temporary
directory. On a Mac, add `--compute-unit gpu` (or cpu, ane), keep `out/`.
"""

# --8<-- [start:setup]
import json
import tempfile
from pathlib import Path

import zoo
from zoo.core.cli.arguments import run_command

# The commands run from the repository root.
repo = Path(zoo.__file__).resolve().parents[1]
out = Path(tempfile.mkdtemp(prefix="zoo-records-"))  # on your Mac: out/
# --8<-- [end:setup]

# --8<-- [start:suite]
# The KV-write matrix part of the suite: every cell exported and run in
# its own process. `pytest zoo/` runs all of it.
suite = f"python -m pytest zoo/lab/tests/test_kv.py -q --record {out}"
print(run_command(suite, cwd=repo)[-200:])
# --8<-- [end:suite]

# --8<-- [start:bench]
bench = f"python -m zoo.bench qwen3_5-tiny --quick --record {out}"
run_command(bench, cwd=repo)
# --8<-- [end:bench]

# --8<-- [start:records]
for path in sorted(out.glob("*.json")):
    where = json.loads(path.read_text())["provenance"]
    print(f"{path.name:<26} {where['platform']:<8} {where['compute_unit']}")
# --8<-- [end:records]
written = {path.name for path in out.iterdir()}
assert {"kv-write-matrix.json", "bench-qwen3_5-tiny.json"} <= written

# --8<-- [start:merge]
print(run_command(f"python -m zoo.core.io.records merge {out}", cwd=repo))
# --8<-- [end:merge]
