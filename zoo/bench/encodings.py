"""`python -m zoo.bench.encodings [--models NAME,...] [--steps N] [--record DIR]`: decode
ms a token of real weights per preset and encoding (`zoo export --encoding`), and the
asset's size.

Each row is one export of the real model (`zoo.fetch`) with a preset and an encoding, then,
in a process of its own, a 16-token prompt and `--steps` greedy decode steps on the
runtime: the median step in ms, the tokens (compared with fp32's), the asset's bytes. A
number of this machine's Linux CPU runtime, not a test.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from zoo.core.isolate import run_isolated

ROWS = [
    ("fp32", "coreai-opt"),
    ("int8", "coreai-opt"),
    ("int8", "plain"),
    ("int8", "plain-fp32"),
    ("int4-block32", "coreai-opt"),
    ("int4-block32", "plain"),
    ("int4-block32", "plain-fp32"),
]
MODELS = ("smollm2-135m-instruct", "gemma3-270m")
PROMPT = "The capital of France is Paris. The capital of Italy is"


def encoding_row(name: str, preset: str, encoding: str, workdir: str, steps: int) -> dict:
    """Export real model `name` as `preset` + `encoding`, decode `steps` greedy tokens after
    the prompt; the median step, the tokens, the asset's bytes (run it with `run_isolated`)."""
    from zoo.core.asset.tokenizer import load_tokenizer
    from zoo.core.export.plan import plan_export
    from zoo.core.export.run import run_plan
    from zoo.core.host.generator import Generator
    from zoo.fetch import fetch

    checkpoint = fetch(name)
    ids = load_tokenizer(checkpoint / "tokenizer.json").encode(PROMPT).ids[:16]
    output = Path(workdir) / f"{name}-{preset}-{encoding}.aimodel"
    started = time.perf_counter()
    plan = plan_export(
        checkpoint, output, capacity=128, compress=preset, encoding=encoding, overwrite=True
    )
    path = run_plan(plan)
    exported = time.perf_counter() - started
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    with Generator(path) as generator:
        logits = generator.feed(ids)
        tokens, seconds = [], []
        for _ in range(steps):
            tokens.append(int(logits.argmax()))
            started = time.perf_counter()
            logits = generator.feed([tokens[-1]])
            seconds.append(time.perf_counter() - started)
    shutil.rmtree(path)  # a few hundred MB each: the next row's room
    return {
        "model": name,
        "preset": preset,
        "encoding": encoding,
        "asset bytes": size,
        "export s": round(exported, 1),
        "decode ms a token (median)": round(1e3 * statistics.median(seconds), 1),
        "tokens": tokens,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS), help="real models (zoo.fetch)")
    parser.add_argument("--steps", type=int, default=4, help="greedy decode steps a row")
    parser.add_argument("--record", default=None, help="write bench-encodings.json here")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.models.split(","):
            first = None
            for preset, encoding in ROWS:
                got = run_isolated(
                    encoding_row, name, preset, encoding, workdir, args.steps, timeout=3600
                )
                row = (
                    got.result
                    if got.ok
                    else {
                        "model": name,
                        "preset": preset,
                        "encoding": encoding,
                        "outcome": got.summary(),
                    }
                )
                first = first or row.get("tokens")
                if "tokens" in row:  # how many of fp32's greedy tokens it kept, in order
                    same = next(
                        (
                            i
                            for i, (a, b) in enumerate(zip(row["tokens"], first, strict=True))
                            if a != b
                        ),
                        len(first),
                    )
                    row["tokens as fp32's"] = f"{same} of {len(first)}"
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    results = {"prompt": PROMPT, "capacity": 128, "steps": args.steps, "rows": rows}
    if args.record:
        from zoo.core.io.records import write_record

        print(f"wrote {write_record(args.record, 'bench-encodings', results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
