"""`python -m zoo.bench`: prefill and decode speed of the zoo models, at real shapes.

Each cell (model shape x KV strategy x layout) runs in its own process (the runtime can
crash): it builds the decoder with random weights at the shape's widths, exports it, loads
it on the Core AI runtime (this platform, the chosen compute unit) and times, in the same
process and on the same inputs:

- load time, first-token latency (prefill of the prompt + the first decode step),
- prefill tokens/s (whole `chunk`-token calls) and decode tokens/s (median step),
- the same prefill chunk and decode step in torch eager (the ratio runtime / eager),
- decode step latency at positions 1 .. capacity-1, to show whether a strategy stays flat.

The roofline is the decode step's weight bytes (every projection and the head, one row of
each embedding table) over this machine's memory read bandwidth, measured here too.
`--record DIR` writes one record per shape (`bench-<shape>.json`) with provenance.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
from dataclasses import asdict

from zoo.bench.cells import CODE_FILES, bench_cell, profile_cell
from zoo.bench.measure import measure_read_bandwidth
from zoo.bench.shapes import ALL_SHAPES, DEFAULT_LAYOUT, LAYOUTS, SHAPES, TINY, Shape
from zoo.core.cli.arguments import whole_number
from zoo.core.host.runtime import COMPUTE_UNITS, default_compute_unit


def run_profiles(shape_names: list[str], workdir: str, record_dir: str | None) -> dict:
    """Profile each shape in its own process; records `bench-profile-<shape>.json`."""
    from zoo.core.io.records import write_record
    from zoo.core.isolate import run_isolated

    results = {}
    for name in shape_names:
        say(f"{name}: profiling a decode step and a prefill chunk ...")
        outcome = run_isolated(profile_cell, name, workdir, timeout=1800)
        if not outcome.ok:
            raise SystemExit(f"{name}: {outcome.summary()}\n{outcome.detail[-800:]}")
        results[name] = outcome.result
        for function in ("decode", "prefill"):
            top = ", ".join(f"{r['op']} {r['share']}" for r in outcome.result[function][:4])
            say(f"  {function}: {top}")
        if record_dir:
            write_record(record_dir, f"bench-profile-{name}", results[name], default_compute_unit())
    return results


def run_chunks(
    shape_names: list[str], chunks: list[int], workdir: str, repeats: int, record_dir: str | None
) -> dict:
    """Prefill at each chunk size (first strategy, default layout), runtime beside eager in
    the same process; records `bench-chunks-<shape>.json`. What it finds is the platform's
    default chunk (`zoo.core.model.layout.DEFAULT_CHUNK`)."""
    from zoo.bench.chunks import PROMPTS, chunk_choice, first_token_s
    from zoo.core.io.records import write_record
    from zoo.core.isolate import run_isolated

    results = {}
    for name in shape_names:
        shape, rows = ALL_SHAPES[name], []
        for chunk in chunks:
            say(f"{name}: prefill chunk {chunk}: export, load, time ...")
            outcome = run_isolated(
                bench_cell,
                name,
                shape.strategies[0],
                DEFAULT_LAYOUT,
                workdir,
                repeats,
                chunk,
                timeout=1800,
            )
            if not outcome.ok:
                raise SystemExit(
                    f"{name} chunk {chunk}: {outcome.summary()}\n{outcome.detail[-800:]}"
                )
            cell = outcome.result
            row = {
                "chunk": chunk,
                "prefill tok/s": cell["prefill tok/s"],
                "eager prefill tok/s": cell["eager prefill tok/s"],
                "runtime / eager (prefill tok/s)": round(
                    cell["prefill tok/s"] / cell["eager prefill tok/s"], 2
                ),
                "decode ms": cell["decode ms"],
                "export s": cell["export s"],
            }
            say(f"  {row}")
            rows.append(row)
        for row in rows:
            for prompt in PROMPTS:
                row[f"first token s, {prompt} tokens (estimated)"] = round(
                    first_token_s(row, prompt), 1
                )
        chosen = chunk_choice(rows)
        say(f"  chosen: chunk {chosen} (zoo.bench.chunks.chunk_choice)")
        results[name] = {
            "strategy": shape.strategies[0],
            "layout": DEFAULT_LAYOUT,
            "rows": rows,
            "chosen chunk": chosen,
        }
        if record_dir:
            path = write_record(
                record_dir, f"bench-chunks-{name}", results[name], default_compute_unit()
            )
            say(f"  recorded {path}")
    return results


def run_matmul(repeats: int, record_dir: str | None, **sizes) -> list[dict]:
    """`zoo.bench.matmul` rows; records `bench-matmul.json`."""
    from zoo.bench.matmul import matmul_rows
    from zoo.core.io.records import write_record

    say("one projection per formulation, timed at several prefill row counts ...")
    rows = matmul_rows(repeats=repeats, **sizes)
    for row in rows:
        say(f"  {row}")
    if record_dir:
        path = write_record(record_dir, "bench-matmul", {"rows": rows}, default_compute_unit())
        say(f"  recorded {path}")
    return rows


def cells_for(shape: Shape, quick: bool) -> list[tuple[str, str]]:
    """(strategy, layout) cells: each strategy in the default layout, then the layout steps
    for the first strategy, but the one the default cell measured (quick: defaults only)."""
    from zoo.core.model.layout import default_layout

    cells = [(strategy, DEFAULT_LAYOUT) for strategy in shape.strategies]
    if not quick and shape.layouts is not None:
        cells += [(shape.strategies[0], layout) for layout in shape.layouts]
    elif not quick:
        steps = [
            name
            for name, layout in LAYOUTS.items()
            if layout != default_layout() and "experts" not in layout
        ]
        cells += [(shape.strategies[0], layout) for layout in steps]
    return cells


def run_bench(
    shape_names: list[str],
    workdir: str,
    *,
    quick: bool = False,
    repeats: int = 5,
    record_dir: str | None = None,
    timeout: float = 1800,
) -> dict[str, dict]:
    """Bench every cell of every shape, each in its own process; returns results by shape."""
    from zoo.core.io.records import write_record
    from zoo.core.isolate import cached_call, run_isolated

    say(f"measuring memory read bandwidth (compute unit {default_compute_unit()}) ...")
    bandwidth = measure_read_bandwidth()
    say(f"  {bandwidth:.1f} GB/s")
    results = {}
    for name in shape_names:
        shape = ALL_SHAPES[name]
        rows, latency, outcomes, first_tokens = [], [], [], []
        for strategy, layout in cells_for(shape, quick):
            say(f"{name}: {strategy}, layout {layout}: export, load, time ...")
            cell_args = (name, strategy, layout, workdir, repeats)
            outcome = cached_call(  # in a test session, pages, snippets and tests share it
                functools.partial(run_isolated, bench_cell, *cell_args, timeout=timeout),
                [*CODE_FILES, *cell_args[:3], repeats],
            )
            outcomes.append({"strategy": strategy, "layout": layout, "outcome": outcome.summary()})
            if not outcome.ok:
                say(f"  {outcome.summary()}\n{outcome.detail[-800:]}")
                continue
            cell = outcome.result
            roofline_ms = cell["weights MB/token"] / bandwidth  # MB / (GB/s) = ms
            row = {k: v for k, v in cell.items() if k not in ("latency", "first tokens")}
            row["roofline ms"] = round(roofline_ms, 1)
            row["of roofline"] = f"{roofline_ms / cell['decode ms']:.0%}"
            rows.append(row)
            latency += [
                {"strategy": f"{strategy} ({layout})", **point} for point in cell["latency"]
            ]
            first_tokens += cell["first tokens"]
            say(
                f"  decode {cell['decode ms']} ms ({cell['decode tok/s']} tok/s), eager "
                f"{cell['eager decode ms']} ms, runtime / eager {cell['runtime / eager']}, "
                f"{row['of roofline']} of the roofline, latency spread {cell['latency spread']}; "
                f"prefill {cell['prefill tok/s']} tok/s"
            )
        results[name] = {
            "shape": asdict(shape),
            "about": [
                {
                    "model": shape.model,
                    "layers": shape.config["num_hidden_layers"],
                    "hidden": shape.config["hidden_size"],
                    "vocab": shape.config["vocab_size"],
                    "context": shape.capacity,
                    "prefill chunk": shape.chunk,
                    "prompt": shape.prompt,
                    "reduced": shape.note or "nothing",
                }
            ],
            "bandwidth_gb_s": round(bandwidth, 1),
            "cells": rows,
            "outcomes": outcomes,
            "latency": latency,
            "first tokens": first_tokens,  # time to first token against prompt length
        }
        if record_dir:
            path = write_record(record_dir, f"bench-{name}", results[name], default_compute_unit())
            say(f"  recorded {path}")
    failed = [o for r in results.values() for o in r["outcomes"] if o["outcome"] != "ok"]
    if failed:
        raise SystemExit(f"{len(failed)} bench cell(s) did not run: {failed}")
    return results


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zoo.bench", description=__doc__.split("\n")[0])
    parser.add_argument(
        "shapes",
        nargs="*",
        help=f"shapes to bench (default: all real shapes): {', '.join([*SHAPES, *TINY])}",
    )
    parser.add_argument("--quick", action="store_true", help="default layout cells only")
    parser.add_argument(
        "--profile", action="store_true", help="per-op profile of a decode step and a prefill"
    )
    parser.add_argument(
        "--chunks",
        metavar="N,N,...",
        help="prefill chunk sizes to sweep (e.g. 8,16,32,64) instead of the bench cells",
    )
    parser.add_argument(
        "--matmul",
        action="store_true",
        help="how the runtime's matmul scales with prefill rows, per formulation (bench-matmul)",
    )
    parser.add_argument("--repeats", type=whole_number(1), default=5, help="timed calls per median")
    parser.add_argument("--record", metavar="DIR", help="write bench-<shape>.json records")
    parser.add_argument("--workdir", default=None, help="where assets go (default: a temp dir)")
    parser.add_argument(
        "--compute-unit", choices=COMPUTE_UNITS, default=None, help="default: $ZOO_COMPUTE_UNIT"
    )
    args = parser.parse_args(argv)
    unknown = [s for s in args.shapes if s not in ALL_SHAPES]
    if unknown:
        parser.error(f"unknown shape(s) {unknown}; known: {[*SHAPES, *TINY]}")
    if args.compute_unit:
        os.environ["ZOO_COMPUTE_UNIT"] = args.compute_unit  # the cells' processes inherit it

    with tempfile.TemporaryDirectory(prefix="zoo-bench-") as tmp:
        if args.matmul:
            run_matmul(args.repeats, args.record)
            return 0
        if args.chunks:
            chunks = [whole_number(2)(c) for c in args.chunks.split(",")]
            run_chunks(
                args.shapes or list(SHAPES), chunks, args.workdir or tmp, args.repeats, args.record
            )
            return 0
        if args.profile:
            run_profiles(args.shapes or list(SHAPES), args.workdir or tmp, args.record)
            return 0
        run_bench(
            args.shapes or list(SHAPES),
            args.workdir or tmp,
            quick=args.quick,
            repeats=args.repeats,
            record_dir=args.record,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
