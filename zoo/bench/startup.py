"""`python -m zoo.bench.startup [--before COMMIT] [--record DIR]`: how long `zoo generate`
takes from the command line to its answer on a tiny asset (4 new tokens), whole process
(wall seconds; peak RSS from GNU time, `/usr/bin/time`), and whether it imported torch.
`--before COMMIT` measures that commit of the zoo too (a git worktree of it, run with this
interpreter), in turn with this checkout.

Not a test: a number of this machine, recorded in `docs/records/bench-startup.json`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMAND = ["generate", "{asset}", "--prompt-ids", "2,17,33", "--max-new-tokens", "4"]


def one_run(source: Path, asset: Path) -> dict:
    """Run `python -m zoo generate` with the zoo of `source`: wall seconds, and the peak
    RSS that GNU time reports (this process's own rusage would count the pages a forked
    child shares with it before exec)."""
    command = [sys.executable, "-m", "zoo", *(a.format(asset=asset) for a in COMMAND)]
    env = {**os.environ, "PYTHONPATH": str(source)}
    with tempfile.NamedTemporaryFile("r") as peak:
        timed = ["/usr/bin/time", "-f", "%M", "-o", peak.name, *command]
        started = time.perf_counter()
        done = subprocess.run(timed, cwd=source, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {done.stderr[-800:]}")
        kilobytes = int(peak.read().split()[-1])
    return {"seconds": seconds, "peak MB": kilobytes / 1024}


def imports_torch(source: Path, asset: Path) -> bool:
    command = [sys.executable, "-X", "importtime", "-m", "zoo"]
    command += [a.format(asset=asset) for a in COMMAND]
    env = {**os.environ, "PYTHONPATH": str(source)}
    done = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True)
    return any(line.split("|")[-1].strip() == "torch" for line in done.stderr.splitlines())


def measure(sources: dict[str, Path], asset: Path, runs: int) -> list[dict]:
    """Each source's runs in turn (A B A B ...), after one warm-up each."""
    times: dict[str, list[dict]] = {name: [] for name in sources}
    for source in sources.values():
        one_run(source, asset)
    for _ in range(runs):
        for name, source in sources.items():
            times[name].append(one_run(source, asset))
    return [
        {
            "zoo": name,
            "median s": round(statistics.median(r["seconds"] for r in times[name]), 3),
            "min s": round(min(r["seconds"] for r in times[name]), 3),
            "max s": round(max(r["seconds"] for r in times[name]), 3),
            "peak MB": round(statistics.median(r["peak MB"] for r in times[name]), 1),
            "imports torch": "yes" if imports_torch(sources[name], asset) else "no",
            "runs": runs,
        }
        for name in sources
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zoo.bench.startup", description=__doc__)
    parser.add_argument("--before", metavar="COMMIT", help="also measure this commit")
    parser.add_argument("--runs", type=int, default=7, help="counted runs of each")
    parser.add_argument("--record", metavar="DIR", help="write bench-startup.json there")
    args = parser.parse_args(argv)
    from zoo.core.export.functions import export_model
    from zoo.core.model.entry import get_entry
    from zoo.reference import make_tiny_checkpoint

    with tempfile.TemporaryDirectory(prefix="zoo-startup-") as work:
        work = Path(work)
        checkpoint = make_tiny_checkpoint("llama", work / "tiny-llama")
        asset = export_model(
            get_entry("llama").load(checkpoint, capacity=64), work / "tiny.aimodel", chunk=4
        )
        sources = {"this checkout": ROOT}
        if args.before:
            before = work / "before"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(before), args.before],
                check=True,
                capture_output=True,
            )
            sources = {f"before ({args.before})": before, **sources}
        try:
            rows = measure(sources, asset, args.runs)
        finally:
            if args.before:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)],
                    capture_output=True,
                )
    for row in rows:
        print(row)
    if args.record:
        from zoo.core.io.records import write_record

        results = {"command": "zoo " + " ".join(COMMAND), "rows": rows}
        print(write_record(args.record, "bench-startup", results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
