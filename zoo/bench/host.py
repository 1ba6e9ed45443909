"""`python -m zoo.bench.host`: what the host loop costs around the runtime's calls.

For a shape (random weights: speed does not depend on them), the one-function asset on the
Core AI runtime, in a process of its own:

- a decode step through `Generator.feed([token])` against the same decode call with its
  inputs built beforehand (the runtime's share: what no host change can remove), the
  difference being the host's Python (masks, input checks, output copies, the asyncio hop);
- a prefill (`Generator.feed` of a 512-token prompt) the same way;
- the cyclic garbage collector: collections and seconds spent in them during those steps
  (`gc.callbacks`: measured directly, not as the difference of two timed runs, which the
  machine's drift between runs would swamp).

`--record DIR` writes `bench-host.json`. Not a test: minutes of exports, timings.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

SHAPE_NAMES = ("smollm2-135m", "gemma3-270m")
STEPS, PROMPT = 48, 512


class CollectorClock:
    """Counts the cyclic collector's runs and the seconds they take (`gc.callbacks`)."""

    def __init__(self) -> None:
        self.runs, self.seconds, self._started = 0, 0.0, None

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.runs += 1
            self.seconds += time.perf_counter() - self._started

    def __enter__(self) -> CollectorClock:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self)


def host_cell(
    shape_name: str, workdir: str, chunk: int = 16, prompt_tokens: int = PROMPT, count: int = STEPS
) -> dict:
    """Export and time one shape (run it with `run_isolated`)."""
    from dataclasses import replace

    from zoo.bench.cells import _inputs
    from zoo.bench.shapes import ALL_SHAPES, build_decoder
    from zoo.core.export.functions import export_decoder
    from zoo.core.host.generator import Generator
    from zoo.core.host.runtime import NDArray
    from zoo.core.model.eager import decode_spec
    from zoo.core.model.layout import apply_layout, default_layout

    shape = replace(ALL_SHAPES[shape_name], chunk=chunk)
    model = build_decoder(shape, shape.strategies[0])
    apply_layout(model, **default_layout())
    spec = decode_spec(model, chunk)
    asset = os.path.join(workdir, f"{shape_name}-host.aimodel")
    export_decoder(model, spec, asset, overwrite=True)
    del model
    gc.collect()
    _, prompt = _inputs(replace(shape, first_token_prompts=(prompt_tokens,)), spec)
    try:
        with Generator(asset) as generator:

            def prefill() -> tuple[float, CollectorClock]:
                generator.reset()
                with CollectorClock() as clock:
                    started = time.perf_counter()
                    generator.feed(prompt[:prompt_tokens])
                    return time.perf_counter() - started, clock

            prefill()  # warm up
            prefill_s, prefill_clock = prefill()

            # the runtime's share: the decode call with inputs built once, states reused,
            # interleaved with `Generator.feed` steps (the machine's drift hits both alike)
            decode = generator.functions["decode"][0]
            generator.reset()
            generator.feed(prompt[:chunk])
            ids = np.array([[prompt[0]]], np.int32)
            host = {"input_ids": ids, **generator.spec.host_inputs(chunk + 2 * count, 1)}
            arrays = {n: NDArray(np.ascontiguousarray(v)) for n, v in host.items()}
            arrays = {n: v for n, v in arrays.items() if n in decode.inputs}
            states = {n: generator.states[n] for n in decode.state_names}
            loop = generator.model._loop
            steps, bare = [], []
            with CollectorClock() as clock:
                for token in prompt[chunk : chunk + count]:
                    started = time.perf_counter()
                    generator.feed([token])
                    steps.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    loop.run(decode._function(inputs=arrays, state=states))
                    bare.append(time.perf_counter() - started)
    finally:
        shutil.rmtree(asset, ignore_errors=True)
    step, floor = statistics.median(steps), statistics.median(bare)
    return {
        "shape": shape_name,
        "chunk": chunk,
        "decode step ms (Generator.feed)": round(step * 1e3, 2),
        "decode call ms (inputs built beforehand)": round(floor * 1e3, 2),
        "host ms per step": round((step - floor) * 1e3, 2),
        "host share of a step": f"{(step - floor) / step:.1%}",
        "collector runs in steps": clock.runs,
        "collector ms in steps": round(clock.seconds * 1e3, 2),
        "collector share of steps": f"{clock.seconds / (sum(steps) + sum(bare)):.2%}",
        f"prefill s ({prompt_tokens} tokens)": round(prefill_s, 2),
        "collector runs in prefill": prefill_clock.runs,
        "collector share of prefill": f"{prefill_clock.seconds / prefill_s:.2%}",
    }


def main(argv: list[str] | None = None) -> int:
    from zoo.core.isolate import run_isolated

    parser = argparse.ArgumentParser(prog="python -m zoo.bench.host", description=__doc__)
    parser.add_argument("--shapes", default=",".join(SHAPE_NAMES))
    parser.add_argument("--record", metavar="DIR", help="write bench-host.json there")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="zoo-bench-host-") as workdir:
        for shape in args.shapes.split(","):
            print(f"{shape} ...", file=sys.stderr, flush=True)
            outcome = run_isolated(host_cell, shape, workdir, timeout=1800)
            row = outcome.result if outcome.ok else {"shape": shape}
            rows.append({**row, "outcome": "ran" if outcome.ok else outcome.summary()})
            print(rows[-1], file=sys.stderr, flush=True)
    if args.record:
        from zoo.core.io.records import write_record

        print(write_record(args.record, "bench-host", {"rows": rows}))
    return 0 if all(row["outcome"] == "ran" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
