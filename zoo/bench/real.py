"""Real models (`zoo.fetch`) on the pages: the texts a recipe decoded as a record, and the
yardstick of their decode speed (transformers' fp32 model in torch eager, with its KV
cache). What each preset costs is `zoo.quality`'s record.
"""

from __future__ import annotations

from pathlib import Path


def write_real_record(name: str, rows: list[dict], directory: str | Path) -> Path:
    """The record of the texts a real model's recipe decoded (`real-NAME`): the same on
    every run, so the tests compare it; what each preset costs is `zoo.quality`'s record."""
    from zoo.core.io.records import write_record

    texts = [{k: v for k, v in row.items() if k != "tokens"} for row in rows]
    return write_record(directory, f"real-{name}", {"texts": texts})


def show(row: dict) -> None:
    """Print one `text_beside_transformers` row as a recipe shows it."""
    print(repr(row["prompt"]))
    for side in ("Core AI runtime", "transformers"):
        print(f"  {side + ':':17}{row[side]!r}")
    agree = next(v for k, v in row.items() if k.endswith("tokens agree"))
    print(f"  greedy tokens that agree before the first difference: {agree}")
