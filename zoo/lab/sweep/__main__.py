"""`python -m zoo.lab.sweep [--surface NAME ...] [--record DIR]`: run the bad-input sweep,
print each case's class, and record them all (`bad-input-sweep`, docs/guides/bad-input.md).
Exit 1 when a case is neither clear nor right."""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
from collections import Counter
from pathlib import Path

from zoo.lab.sweep.harness import CLASSES, GOOD, Bench, Case, run_case

SURFACES = ("gguf", "hub", "experts", "streaming", "speculation", "generate", "media")
RECORD = "bad-input-sweep"


def cases_of(surface: str) -> list[Case]:
    return importlib.import_module(f"zoo.lab.sweep.{surface}").CASES


def sweep(surfaces: tuple[str, ...], root: Path) -> list[dict]:
    """Every case of `surfaces`, run in a folder of its own under `root`."""
    bench, rows = Bench(root / "bench"), []
    for surface in surfaces:
        parent = root / surface
        parent.mkdir(parents=True)
        for number, case in enumerate(cases_of(surface)):
            kind, line, seconds = run_case(case, bench, parent / f"{number:03d}")
            line = line.replace(str(root), "$SWEEP")  # no machine's folders in the record
            rows.append(
                {
                    "surface": surface,
                    "case": case.name,
                    "class": kind,
                    "line": line[:300],
                    "seconds": round(seconds, 2),
                }
            )
            print(f"{kind:15} {surface:12} {case.name}: {line[:150]}", flush=True)
    return rows


def counts(rows: list[dict]) -> list[dict]:
    """A row per surface (and the total): its cases, and how many of each class."""
    table = []
    for surface in [*dict.fromkeys(r["surface"] for r in rows), "all"]:
        chosen = [r for r in rows if surface in ("all", r["surface"])]
        found = Counter(r["class"] for r in chosen)
        table.append(
            {"surface": surface, "cases": len(chosen)}
            | {kind: found.get(kind, 0) for kind in CLASSES}
        )
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zoo.lab.sweep", description=__doc__)
    parser.add_argument("--surface", action="append", choices=SURFACES)
    parser.add_argument("--record", metavar="DIR", help=f"write the record {RECORD} into DIR")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="zoo-sweep-") as root:
        rows = sweep(tuple(args.surface or SURFACES), Path(root))
    table = counts(rows)
    for row in table:
        print("  ".join(f"{k}={v}" for k, v in row.items() if v or k in ("surface", "cases")))
    if args.record:
        from zoo.core.io.records import write_record

        print(write_record(args.record, RECORD, {"counts": table, "cases": rows}))
    return 0 if all(r["class"] in GOOD for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
