"""`python -m zoo.bench.ranges`: prefill with the decoder exported as layer ranges.

For each shape, prefill chunk (16, 64) and number of ranges (1, 2, 4), one cell in a
process of its own (`run_isolated`): the decoder at the shape's widths (random weights:
speed does not depend on them) exported with `zoo.core.export.ranges`, then on the Core AI
runtime through `Generator.feed` (two calls in flight during prefill) and, in the same
process, the one-function decoder in torch eager:

- prefill tok/s: a 512-token prompt read in whole chunks (runtime; eager the same chunks),
- first token ms at 16 / 64 / 512 prompt tokens (chunks, then single steps, then the pick),
- the median decode step after the prompt (decode stays sequential: one sequence's steps
  depend on each other),
- the CPU cores the prefill kept busy.

`--spans 128,512` times every cell twice, as exported and with those attention spans
(`zoo.core.asset.decode_spec.DecodeSpec.spans`; eager reads the same spans), and records
`bench-ranges-spans.json`. `--record DIR` writes `bench-ranges.json`. Not a test: minutes
of exports, timings.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace

import numpy as np

RANGES = (1, 2, 4)
CHUNKS = (16, 64)
PROMPTS = (16, 64, 512)
SHAPE_NAMES = ("smollm2-135m", "gemma3-270m")


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ranges_cell(
    shape_name: str,
    ranges: int,
    chunk: int,
    workdir: str,
    prompts: tuple[int, ...] = PROMPTS,
    weights: str = "auto",
    spans: list[int] | None = None,
) -> dict:
    """Export and time one cell (run it with `run_isolated`); the longest of `prompts`
    gives prefill tok/s. `weights`: a weights layout (`zoo.core.model.layout`; "auto": this
    platform's default); `spans`: attention spans, in the runtime's calls and eager's."""
    from zoo.bench.cells import _eager_first_token, _inputs
    from zoo.bench.measure import cores_busy, median_seconds
    from zoo.bench.shapes import ALL_SHAPES, build_decoder
    from zoo.core.export.functions import export_decoder
    from zoo.core.export.ranges import split_layers
    from zoo.core.host.generator import Generator
    from zoo.core.model.eager import decode_spec
    from zoo.core.model.layout import apply_layout, default_layout

    shape = replace(ALL_SHAPES[shape_name], chunk=chunk, first_token_prompts=tuple(prompts))
    strategy = shape.strategies[0]
    model = build_decoder(shape, strategy)
    layout = apply_layout(model, weights=weights, keys=default_layout()["keys"])
    spec = decode_spec(model, chunk)
    spec.spans = spans
    layers = len(model.layers)
    if ranges > 1:
        spec.ranges = split_layers(layers, math.ceil(layers / ranges))
    asset = os.path.join(workdir, f"{shape_name}-{ranges}-{chunk}-{len(spans or [])}.aimodel")
    started = time.perf_counter()
    export_decoder(model, spec, asset, overwrite=True)
    export_s = time.perf_counter() - started
    inputs_at, prompt = _inputs(shape, spec)
    eager = {n: _eager_first_token(model, spec, inputs_at, n) for n in prompts}
    del model
    gc.collect()
    try:
        with Generator(asset) as generator:

            def first_token(n: int) -> float:
                generator.reset()
                started = time.perf_counter()
                int(np.argmax(generator.feed(prompt[:n])))
                return time.perf_counter() - started

            longest = max(prompts)
            first_token(chunk)  # warm up every function
            runtime = {
                n: median_seconds(lambda n=n: first_token(n), 1 if n > 64 else 3) for n in prompts
            }
            generator.reset()
            cores = cores_busy(
                lambda: (generator.reset(), generator.feed(prompt[:longest])), repeats=1
            )
            steps = []
            for token in prompt[:8]:
                started = time.perf_counter()
                generator.feed([token])
                steps.append(time.perf_counter() - started)
    finally:
        shutil.rmtree(asset, ignore_errors=True)
    return {
        "shape": shape_name,
        "chunk": chunk,
        "ranges": ranges,
        "layers per range": ", ".join(str(b - a) for a, b in spec.ranges or [[0, layers]]),
        "weights": layout["weights"],
        "capacity": spec.capacity,
        "spans": ", ".join(map(str, spans)) if spans else "none",
        "prefill tok/s": round(longest / runtime[longest], 1),
        "eager prefill tok/s": round(longest / eager[longest], 1),
        "prefill runtime / eager": round(eager[longest] / runtime[longest], 2),
        **{f"first token ms ({n})": round(runtime[n] * 1e3, 1) for n in prompts},
        **{f"eager first token ms ({n})": round(eager[n] * 1e3, 1) for n in prompts},
        **{f"first token runtime / eager ({n})": round(runtime[n] / eager[n], 2) for n in prompts},
        "decode ms": round(float(np.median(steps)) * 1e3, 1),
        # the spread of the 8 steps: whether two rows' decode differ beyond noise
        "decode ms (min-max)": f"{min(steps) * 1e3:.1f}-{max(steps) * 1e3:.1f}",
        "cores busy (prefill)": round(cores, 2),
        "export s": round(export_s),
        "series": f"{shape_name}, chunk {chunk}",
    }


def main(argv: list[str] | None = None) -> int:
    from zoo.core.isolate import run_isolated

    parser = argparse.ArgumentParser(prog="python -m zoo.bench.ranges", description=__doc__)
    parser.add_argument("--shapes", default=",".join(SHAPE_NAMES))
    parser.add_argument("--ranges", default=",".join(map(str, RANGES)))
    parser.add_argument("--chunks", default=",".join(map(str, CHUNKS)))
    parser.add_argument(
        "--weights-layout",
        default="auto",
        help="weights layout of every cell (zoo.core.model.layout; default: this platform's); "
        "another than the default records bench-ranges-<layout>.json",
    )
    parser.add_argument(
        "--spans",
        type=lambda text: [int(n) for n in text.split(",")],
        default=None,
        metavar="N,M",
        help="time each cell without and with these attention spans (bench-ranges-spans.json)",
    )
    parser.add_argument("--record", metavar="DIR", help="write bench-ranges.json there")
    args = parser.parse_args(argv)
    rows = []
    spans_tried = [None, args.spans] if args.spans else [None]
    with tempfile.TemporaryDirectory(prefix="zoo-bench-ranges-") as workdir:
        for shape in args.shapes.split(","):
            for chunk in map(int, args.chunks.split(",")):
                cells = [(r, s) for r in map(int, args.ranges.split(",")) for s in spans_tried]
                for ranges, spans in cells:
                    say(f"{shape}: chunk {chunk}, {ranges} range(s), spans {spans} ...")
                    outcome = run_isolated(
                        ranges_cell,
                        shape,
                        ranges,
                        chunk,
                        workdir,
                        PROMPTS,
                        args.weights_layout,
                        spans,
                        timeout=1800,
                    )
                    if not outcome.ok:
                        say(f"  {outcome.summary()}")
                        rows.append(
                            {
                                "shape": shape,
                                "chunk": chunk,
                                "ranges": ranges,
                                "spans": ", ".join(map(str, spans)) if spans else "none",
                                "outcome": outcome.summary(),
                            }
                        )
                        continue
                    rows.append({**outcome.result, "outcome": "ran"})
                    say(f"  {rows[-1]}")
    if args.record:
        from zoo.core.io.records import write_record
        from zoo.core.model.layout import default_layout

        name = "bench-ranges"
        if args.weights_layout not in ("auto", default_layout()["weights"]):
            name += f"-{args.weights_layout}"
        if args.spans:
            name += "-spans"
        print(write_record(args.record, name, {"rows": rows}))
    return 0 if all(row["outcome"] == "ran" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
