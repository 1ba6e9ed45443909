"""Records: results measured by code in this repo, with where and when they were measured.

Pages render their tables from records committed under `docs/records/`, never from numbers
typed by hand. `python -m zoo.core.records regenerate` (`make records`) measures them again on
this platform.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from zoo.core.provenance import provenance

ROOT = Path(__file__).resolve().parents[2]
RECORDS_DIR = ROOT / "docs" / "records"

# name -> the command (relative to the repo root) that measures it and writes DIR/name.json
GENERATORS: dict[str, list[str]] = {
    "conversion-gotchas": ["snippets/conversion_gotchas.py", "--record", "{dir}"],
    "runtime-crash": ["snippets/runtime_crash.py", "--record", "{dir}"],
}


def write_record(
    directory: str | os.PathLike, name: str, results: dict, compute_unit: str | None = None
) -> Path:
    """Write `directory/name.json` with the results and the provenance of this run."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    record = {"name": name, "provenance": provenance(compute_unit), "results": results}
    path.write_text(json.dumps(record, indent=2, sort_keys=False) + "\n")
    return path


def load_record(name: str, directory: str | os.PathLike = RECORDS_DIR) -> dict:
    path = Path(directory) / f"{name}.json"
    if not path.exists():
        known = sorted(p.stem for p in Path(directory).glob("*.json"))
        raise FileNotFoundError(
            f"no record {name!r} in {directory} (have {known}); generate it with "
            f"`make records` or `python -m zoo.core.records regenerate {name}`"
        )
    return json.loads(path.read_text())


def regenerate(names: list[str], directory: Path = RECORDS_DIR) -> None:
    for name in names or list(GENERATORS):
        if name not in GENERATORS:
            raise SystemExit(f"unknown record {name!r}; known: {sorted(GENERATORS)}")
        command = [sys.executable, *(a.format(dir=directory) for a in GENERATORS[name])]
        print(f"== {name}: {' '.join(command[1:])}", flush=True)
        subprocess.run(command, cwd=ROOT, check=True)


if __name__ == "__main__":
    if sys.argv[1:2] != ["regenerate"]:
        raise SystemExit("usage: python -m zoo.core.records regenerate [NAME ...]")
    regenerate(sys.argv[2:])
