"""One bench cell (shape x KV strategy x layout) and one profile cell, each meant to run in a
process of its own (`zoo.core.isolate.run_isolated`): the runtime can crash."""

from __future__ import annotations

import gc
import os
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from zoo.bench.measure import cores_busy, measure_read_bandwidth, median_seconds
from zoo.bench.shapes import (
    ALL_SHAPES,
    DEFAULT_LAYOUT,
    LAYOUTS,
    Shape,
    build_decoder,
    decode_weight_bytes,
)

# What a cell's numbers depend on (the per-session result cache of the tests).
CODE_FILES = sorted(
    p for p in Path(__file__).resolve().parents[1].rglob("*.py") if "tests" not in p.parts
)


def _time_eager(model, spec, inputs_at, shape: Shape, repeats: int) -> tuple[float, float]:
    """Median seconds of a prefill chunk and of a decode step in torch eager (the prefill
    chunk computes the last row's logits only, as the exported one does)."""
    from zoo.core.export.functions import FlatDecoder
    from zoo.core.model.eager import zero_state

    states = [zero_state(spec, name) for name in spec.state_shapes]

    def eager_at(position: int, length: int):
        flat = FlatDecoder(model, spec, last_row_only=length > 1)
        tensors = [torch.from_numpy(v) for v in inputs_at(position, length).values()]
        return lambda: flat(*tensors, *states)

    with torch.no_grad():
        eager_at(shape.prompt, 1)()  # warm up
        return (
            median_seconds(eager_at(0, shape.chunk), repeats),
            median_seconds(eager_at(shape.prompt, 1), repeats),
        )


def _export(shape_name: str, strategy: str, layout: dict, asset: str, chunk: int | None):
    """Build the shape's decoder in `layout`, export it to `asset` (prefill `chunk` tokens,
    default the shape's): (shape, model, spec, s)."""
    from dataclasses import replace

    from zoo.core.export.functions import export_decoder
    from zoo.core.model.eager import decode_spec
    from zoo.core.model.layout import apply_layout

    shape = ALL_SHAPES[shape_name]
    shape = replace(shape, chunk=chunk) if chunk else shape
    model = build_decoder(shape, strategy)
    if layout.get("experts") == "chosen":  # stacked for GatherMM before the layout
        from zoo.core.model.experts import stack_experts

        stack_experts(model)
    apply_layout(model, layout["weights"], layout["keys"])
    spec = decode_spec(model, shape.chunk)
    started = time.perf_counter()
    export_decoder(model, spec, asset, overwrite=True)
    return shape, model, spec, time.perf_counter() - started


def _inputs(shape: Shape, spec):
    """A seeded prompt within the vocabularies, and the step inputs at a position."""
    vocab = min(shape.config["vocab_size"], shape.config.get("vocab_size_per_layer_input", 1e9))
    longest = max(shape.prompt, *shape.first_token_prompts)
    prompt = np.random.default_rng(0).integers(3, vocab, longest).tolist()

    def inputs_at(position: int, length: int) -> dict[str, np.ndarray]:
        # the prompt's own tokens where it has them (first tokens), any tokens past it
        ids = np.array([[prompt[(position + i) % len(prompt)] for i in range(length)]], np.int32)
        # a prefill chunk on the shortest attention span that holds it, as `Generator`
        span = spec.span_for(position + length) if length == spec.chunk else None
        return {"input_ids": ids, **spec.host_inputs(position, length, span)}

    return inputs_at, prompt


def _tries(prompt_tokens: int) -> int:
    """A long prompt takes a minute at real shapes: one try; short ones, the median of 3."""
    return 1 if prompt_tokens > 64 else 3


def _eager_first_token(model, spec, inputs_at, length: int) -> float:
    """Seconds torch eager takes to read a `length`-token prompt and pick the first token:
    whole chunks with the last row's logits only, then single steps, as `Generator`."""
    from zoo.core.export.functions import FlatDecoder

    prefill, decode = FlatDecoder(model, spec, last_row_only=True), FlatDecoder(model, spec)
    started = time.perf_counter()
    states = [torch.zeros(s) for s in spec.state_shapes.values()]
    position, logits = 0, None
    with torch.no_grad():
        while position < length:
            step = spec.chunk if length - position >= spec.chunk else 1
            tensors = [torch.from_numpy(v) for v in inputs_at(position, step).values()]
            logits = (prefill if step > 1 else decode)(*tensors, *states)
            position += step
    int(logits[0, -1].argmax())
    return time.perf_counter() - started


def bench_cell(
    shape_name: str,
    strategy: str,
    layout: str,
    workdir: str,
    repeats: int = 5,
    chunk: int | None = None,
) -> dict:
    """Export and time one cell (run it in its own process: `run_isolated(bench_cell, ...)`).
    `chunk` overrides the shape's prefill chunk (the chunk sweep: prefill and decode only)."""
    from zoo.core.host.generator import Generator
    from zoo.core.model.layout import default_layout

    choice = default_layout() if layout == DEFAULT_LAYOUT else LAYOUTS[layout]
    asset = os.path.join(workdir, f"{shape_name}-{strategy}-{layout.replace(' ', '-')}.aimodel")
    shape, model, spec, export_s = _export(shape_name, strategy, choice, asset, chunk)
    inputs_at, prompt = _inputs(shape, spec)

    # torch eager first, then free the model: the runtime holds its own copy of the weights.
    eager_prefill_s, eager_decode_s = _time_eager(model, spec, inputs_at, shape, repeats)
    # first tokens and latency for the default layout at the shape's chunk only
    whole = layout == DEFAULT_LAYOUT and not chunk
    eager_first = {
        n: median_seconds(lambda n=n, m=model: _eager_first_token(m, spec, inputs_at, n), _tries(n))
        for n in (shape.first_token_prompts if whole else ())
    }
    weight_bytes = decode_weight_bytes(model)
    del model
    gc.collect()

    started = time.perf_counter()
    generator = Generator(asset)
    load_s = time.perf_counter() - started
    # First token and latency against position for the default layout only: the other
    # layouts are there to compare a decode step and a prefill chunk.
    try:

        def call_at(position: int, length: int):
            function = generator.functions["prefill" if length > 1 else "decode"][0]
            inputs = inputs_at(position, length)
            return lambda: function(inputs, generator.states)

        call_at(0, shape.chunk)()  # warm up both functions
        call_at(shape.prompt, 1)()
        prefill_s = median_seconds(call_at(0, shape.chunk), repeats)
        decode_s = median_seconds(call_at(shape.prompt, 1), repeats)
        latency = [
            {
                "context position": position,
                "median ms per step": round(median_seconds(call_at(position, 1), repeats) * 1e3, 2),
            }
            for position in (shape.positions if whole else ())
        ]
        first_token_s = (
            median_seconds(
                lambda: generator.generate(prompt[: shape.prompt], 1, stop_token_ids=[]), 3
            )
            if whole
            else None
        )
        first_tokens = []
        for n in eager_first:
            runtime_s = median_seconds(
                lambda n=n: generator.generate(prompt[:n], 1, stop_token_ids=[]), _tries(n)
            )
            first_tokens += [
                {
                    "side": f"Core AI runtime ({strategy})",
                    "prompt tokens": n,
                    "first token ms": round(runtime_s * 1e3, 1),
                },
                {
                    "side": f"torch eager ({strategy})",
                    "prompt tokens": n,
                    "first token ms": round(eager_first[n] * 1e3, 1),
                },
            ]
    finally:
        generator.close()
        shutil.rmtree(asset, ignore_errors=True)  # GBs at real shapes: one cell at a time

    spread = [point["median ms per step"] for point in latency]
    return {
        "strategy": strategy,
        "layout": layout,
        "chunk": spec.chunk,
        "weights": spec.layout["weights"],
        "keys": spec.layout["keys"],
        "decode ms": round(decode_s * 1e3, 1),
        "decode tok/s": round(1 / decode_s, 2),
        "eager decode ms": round(eager_decode_s * 1e3, 1),
        "runtime / eager": round(decode_s / eager_decode_s, 2),
        "prefill tok/s": round(shape.chunk / prefill_s, 1),
        "eager prefill tok/s": round(shape.chunk / eager_prefill_s, 1),
        "first token ms": round(first_token_s * 1e3) if whole else None,
        "first tokens": first_tokens,
        "load s": round(load_s, 1),
        "export s": round(export_s),
        "weights MB/token": round(weight_bytes / 1e6),
        "latency spread": f"{max(spread) / min(spread) - 1:.0%}" if whole else None,
        "latency": latency,
    }


def _eager_cores(model, spec, inputs: dict[str, np.ndarray]) -> float:
    from zoo.core.export.functions import FlatDecoder

    flat = FlatDecoder(model, spec)
    tensors = [torch.from_numpy(v) for v in inputs.values()]
    states = [torch.zeros(s) for s in spec.state_shapes.values()]
    with torch.no_grad():
        flat(*tensors, *states)  # warm up
        return cores_busy(lambda: flat(*tensors, *states))


def profile_cell(shape_name: str, workdir: str) -> dict:
    """Where a decode step and a prefill chunk spend their time, per runtime op (default
    layout, first strategy), how many cores a decode step keeps busy on the runtime and in
    torch eager, and the read bandwidth with one and with all threads. Run it in its own
    process."""
    from zoo.core.host.generator import Generator
    from zoo.core.model.layout import default_layout
    from zoo.lab.profile import profile_call

    strategy = ALL_SHAPES[shape_name].strategies[0]
    asset = os.path.join(workdir, f"{shape_name}-profile.aimodel")
    shape, model, spec, _ = _export(shape_name, strategy, default_layout(), asset, None)
    inputs_at, _ = _inputs(shape, spec)
    eager_cores = _eager_cores(model, spec, inputs_at(shape.prompt, 1))
    del model
    gc.collect()
    profiles = {
        "strategy": strategy,
        "layout": spec.layout,
        "bandwidth": [
            {"torch threads": threads or torch.get_num_threads(), "read GB/s": round(gbs, 1)}
            for threads in (0, 1)
            for gbs in [measure_read_bandwidth(threads=threads)]
        ],
    }
    with Generator(asset) as generator:
        decode = generator.functions["decode"][0]
        step = inputs_at(shape.prompt, 1)
        runtime_cores = cores_busy(lambda: decode(step, generator.states))
        profiles["cores"] = [
            {"decode step on": "Core AI runtime", "cores busy": round(runtime_cores, 2)},
            {"decode step on": "torch eager", "cores busy": round(eager_cores, 2)},
        ]
        for name, position, length in (("decode", shape.prompt, 1), ("prefill", 0, shape.chunk)):
            inputs = inputs_at(position, length)
            profiles[name] = profile_call(generator.model, name, inputs, generator.states)
    shutil.rmtree(asset, ignore_errors=True)
    return profiles
