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
import gc
import os
import shutil
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from zoo.core.cli import whole_number
from zoo.core.runtime import COMPUTE_UNITS, default_compute_unit

# What a cell's numbers depend on (the per-session result cache of the tests).
CODE_FILES = sorted(p for p in Path(__file__).parent.rglob("*.py") if "tests" not in p.parts)


@dataclass(frozen=True)
class Shape:
    """A decoder shape to bench: the model entry, its config, and what was reduced (why)."""

    model: str  # "gemma4" | "qwen3_5"
    config: dict
    note: str = ""
    capacity: int = 2048
    chunk: int = 8
    prompt: int = 64
    strategies: tuple[str, ...] = ("runtime-index", "input-mask-blend")
    positions: tuple[int, ...] = (1, 2, 16, 128, 512, 1024, 1536, 2047)


# Widths as in the published config.json files (this machine has no hub access to re-read
# them); layer counts as published unless memory forces fewer, said in `note`.
SHAPES: dict[str, Shape] = {
    "qwen3_5-0.8b": Shape(
        "qwen3_5",
        dict(
            vocab_size=248_320,
            hidden_size=1024,
            intermediate_size=3584,
            num_hidden_layers=24,
            num_attention_heads=8,
            num_key_value_heads=2,
            head_dim=256,
            linear_num_key_heads=16,
            linear_num_value_heads=16,
            linear_key_head_dim=128,
            linear_value_head_dim=128,
            tie_word_embeddings=True,
        ),
        note="",  # all 24 layers (18 GatedDeltaNet, 6 attention), tied head
    ),
    "gemma4-e2b": Shape(
        "gemma4",
        dict(
            vocab_size=262_144,
            hidden_size=1536,
            intermediate_size=6144,
            num_hidden_layers=15,
            num_attention_heads=8,
            num_key_value_heads=1,
            head_dim=256,
            per_layer_config={i: {"head_dim": 512} for i in (4, 9, 14)},
            layer_types=(["sliding_attention"] * 4 + ["full_attention"]) * 3,
            sliding_window=512,
            num_kv_shared_layers=9,
            use_double_wide_mlp=True,
            hidden_size_per_layer_input=256,
            vocab_size_per_layer_input=32_768,
            final_logit_softcapping=30.0,
            tie_word_embeddings=True,
        ),
        note=(
            "15 of 35 layers (9 of them reuse KV, as 20 of 35 do), and a per-layer-embedding "
            "table of 32,768 rows instead of 262,144: at fp32 the full model is ~20 GB and "
            "export needs a multiple of that (this machine has 24 GB). The PLE table is a "
            "row lookup, so its row count changes the asset size, not the work per token"
        ),
    ),
}

# Tiny shapes: the same code path in seconds (the tests run them).
TINY: dict[str, Shape] = {
    "qwen3_5-tiny": Shape(
        "qwen3_5",
        dict(
            vocab_size=256,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            linear_key_head_dim=8,
            linear_value_head_dim=8,
            tie_word_embeddings=True,
        ),
        capacity=64,
        chunk=4,
        prompt=8,
        strategies=("runtime-index",),
        positions=(1, 2, 32, 63),
    ),
    "gemma4-tiny": Shape(
        "gemma4",
        dict(
            vocab_size=256,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=5,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=16,
            per_layer_config={1: {"head_dim": 32}, 4: {"head_dim": 32}},
            layer_types=["sliding_attention", "full_attention", *["sliding_attention"] * 2]
            + ["full_attention"],
            sliding_window=8,
            num_kv_shared_layers=2,
            use_double_wide_mlp=True,
            hidden_size_per_layer_input=8,
            vocab_size_per_layer_input=256,
            final_logit_softcapping=30.0,
        ),
        capacity=64,
        chunk=4,
        prompt=8,
        strategies=("runtime-index",),
        positions=(1, 2, 32, 63),
    ),
}

ALL_SHAPES: dict[str, Shape] = {**SHAPES, **TINY}

# The layouts a bench compares (zoo.core.layout): as authored, then one change at a time.
LAYOUTS = {
    "as authored": {"weights": "linear", "keys": "bhtd"},
    "transposed weights": {"weights": "transposed", "keys": "bhtd"},
    "transposed weights + keys": {"weights": "transposed", "keys": "bhdt"},
    "blocked MLP + keys": {"weights": "blocked", "keys": "bhdt"},
}
DEFAULT_LAYOUT = "default"  # this platform's `zoo.core.layout.default_layout()`


def build_decoder(shape: Shape, strategy: str, seed: int = 0) -> torch.nn.Module:
    """The shape's decoder with random weights (std 0.02), as loaded: layout as authored."""
    from zoo.core.kv import get_strategy

    torch.manual_seed(seed)
    if shape.model == "qwen3_5":
        from zoo.qwen3_5.config import Qwen3_5Config
        from zoo.qwen3_5.model import Qwen3_5

        model = Qwen3_5(Qwen3_5Config(**shape.config), get_strategy(strategy), shape.capacity)
    elif shape.model == "gemma4":
        from zoo.gemma4.config import Gemma4Config
        from zoo.gemma4.model import Gemma4

        model = Gemma4(Gemma4Config(**shape.config), get_strategy(strategy), shape.capacity)
    else:
        raise ValueError(f"no zoo model {shape.model!r}")
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() >= 2:
                parameter.normal_(0.0, 0.02)
    return model.eval()


def decode_weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of weights one decode step reads: all of them, but one row per embedding table.

    A head tied to the embedding (`lm_head is None`) reads the whole table.
    """
    total = 0
    for module in model.modules():
        for parameter in module.parameters(recurse=False):
            if isinstance(module, torch.nn.Embedding):
                total += parameter[0].nbytes
            else:
                total += parameter.nbytes
    if getattr(model, "lm_head", False) is None:
        total += model.embed_tokens.weight.nbytes
    return total


def measure_read_bandwidth(megabytes: int = 1024, repeats: int = 7, threads: int = 0) -> float:
    """GB/s of reading a buffer much larger than the caches (a sum over it), with `threads`
    torch threads (0: all of torch's)."""
    buffer = torch.ones(megabytes * 2**20 // 4)
    buffer.sum()  # fault the pages in
    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        seconds = []
        for _ in range(repeats):
            started = time.perf_counter()
            buffer.sum()
            seconds.append(time.perf_counter() - started)
    finally:
        torch.set_num_threads(before)
    return buffer.nbytes / statistics.median(seconds) / 1e9


def cores_busy(call, repeats: int = 5) -> float:
    """CPU seconds per wall second while `call` runs: how many cores it keeps busy."""
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(repeats):
        call()
    return (time.process_time() - cpu) / (time.perf_counter() - started)


def _median_seconds(call, repeats: int) -> float:
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def _time_eager(model, spec, inputs_at, shape: Shape, repeats: int) -> tuple[float, float]:
    """Median seconds of a prefill chunk and of a decode step in torch eager."""
    states = [torch.zeros(s) for s in spec.state_shapes.values()]

    def eager_at(position: int, length: int):
        tensors = [torch.from_numpy(v) for v in inputs_at(position, length).values()]
        return lambda: model(*tensors, *states)

    with torch.no_grad():
        eager_at(shape.prompt, 1)()  # warm up
        return (
            _median_seconds(eager_at(0, shape.chunk), repeats),
            _median_seconds(eager_at(shape.prompt, 1), repeats),
        )


def _export(shape_name: str, strategy: str, layout: dict, asset: str):
    """Build the shape's decoder in `layout`, export it to `asset`: (shape, model, spec, s)."""
    from zoo.core.decode import decode_spec, export_decoder
    from zoo.core.layout import apply_layout

    shape = ALL_SHAPES[shape_name]
    model = build_decoder(shape, strategy)
    apply_layout(model, **layout)
    spec = decode_spec(model, shape.chunk)
    started = time.perf_counter()
    export_decoder(model, spec, asset, overwrite=True)
    return shape, model, spec, time.perf_counter() - started


def _inputs(shape: Shape, spec):
    """A seeded prompt within the vocabularies, and the step inputs at a position."""
    vocab = min(shape.config["vocab_size"], shape.config.get("vocab_size_per_layer_input", 1e9))
    prompt = np.random.default_rng(0).integers(3, vocab, shape.prompt).tolist()

    def inputs_at(position: int, length: int) -> dict[str, np.ndarray]:
        ids = np.array([prompt[:length]], np.int32)
        return {"input_ids": ids, **spec.host_inputs(position, length)}

    return inputs_at, prompt


def bench_cell(shape_name: str, strategy: str, layout: str, workdir: str, repeats: int = 5) -> dict:
    """Export and time one cell (run it in its own process: `run_isolated(bench_cell, ...)`)."""
    from zoo.core.decode import Generator
    from zoo.core.layout import default_layout

    choice = default_layout() if layout == DEFAULT_LAYOUT else LAYOUTS[layout]
    asset = os.path.join(workdir, f"{shape_name}-{strategy}-{layout.replace(' ', '-')}.aimodel")
    shape, model, spec, export_s = _export(shape_name, strategy, choice, asset)
    inputs_at, prompt = _inputs(shape, spec)

    # torch eager first, then free the model: the runtime holds its own copy of the weights.
    eager_prefill_s, eager_decode_s = _time_eager(model, spec, inputs_at, shape, repeats)
    weight_bytes = decode_weight_bytes(model)
    del model
    gc.collect()

    started = time.perf_counter()
    generator = Generator(asset)
    load_s = time.perf_counter() - started
    # First token and latency against position for the default layout only: the other
    # layouts are there to compare a decode step and a prefill chunk.
    whole = layout == DEFAULT_LAYOUT
    try:

        def call_at(position: int, length: int):
            function = generator.prefill_fn if length > 1 else generator.decode_fn
            inputs = inputs_at(position, length)
            return lambda: function(inputs, generator.states)

        call_at(0, shape.chunk)()  # warm up both functions
        call_at(shape.prompt, 1)()
        prefill_s = _median_seconds(call_at(0, shape.chunk), repeats)
        decode_s = _median_seconds(call_at(shape.prompt, 1), repeats)
        latency = [
            {
                "context position": position,
                "median ms per step": round(
                    _median_seconds(call_at(position, 1), repeats) * 1e3, 2
                ),
            }
            for position in (shape.positions if whole else ())
        ]
        first_token_s = (
            _median_seconds(lambda: generator.generate(prompt, 1, stop_token_ids=[]), 3)
            if whole
            else None
        )
    finally:
        generator.close()
        shutil.rmtree(asset, ignore_errors=True)  # GBs at real shapes: one cell at a time

    spread = [point["median ms per step"] for point in latency]
    return {
        "strategy": strategy,
        "layout": layout,
        "weights": spec.layout["weights"],
        "keys": spec.layout["keys"],
        "decode ms": round(decode_s * 1e3, 1),
        "decode tok/s": round(1 / decode_s, 2),
        "eager decode ms": round(eager_decode_s * 1e3, 1),
        "runtime / eager": round(decode_s / eager_decode_s, 2),
        "prefill tok/s": round(shape.chunk / prefill_s, 1),
        "eager prefill tok/s": round(shape.chunk / eager_prefill_s, 1),
        "first token ms": round(first_token_s * 1e3) if whole else None,
        "load s": round(load_s, 1),
        "export s": round(export_s),
        "weights MB/token": round(weight_bytes / 1e6),
        "latency spread": f"{max(spread) / min(spread) - 1:.0%}" if whole else None,
        "latency": latency,
    }


def _eager_cores(model, spec, inputs: dict[str, np.ndarray]) -> float:
    tensors = [torch.from_numpy(v) for v in inputs.values()]
    states = [torch.zeros(s) for s in spec.state_shapes.values()]
    with torch.no_grad():
        model(*tensors, *states)  # warm up
        return cores_busy(lambda: model(*tensors, *states))


def profile_cell(shape_name: str, workdir: str) -> dict:
    """Where a decode step and a prefill chunk spend their time, per runtime op (default
    layout, first strategy), how many cores a decode step keeps busy on the runtime and in
    torch eager, and the read bandwidth with one and with all threads. Run it in its own
    process."""
    from zoo.core.decode import Generator
    from zoo.core.layout import default_layout
    from zoo.core.profile import profile_call

    strategy = ALL_SHAPES[shape_name].strategies[0]
    asset = os.path.join(workdir, f"{shape_name}-profile.aimodel")
    shape, model, spec, _ = _export(shape_name, strategy, default_layout(), asset)
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
        decode = generator.decode_fn
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


def run_profiles(shape_names: list[str], workdir: str, record_dir: str | None) -> dict:
    """Profile each shape in its own process; records `bench-profile-<shape>.json`."""
    from zoo.core.isolate import run_isolated
    from zoo.core.records import write_record

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


def cells_for(shape: Shape, quick: bool) -> list[tuple[str, str]]:
    """(strategy, layout) cells: each strategy in the default layout, then the layout steps
    for the first strategy, but the one the default cell measured (quick: defaults only)."""
    from zoo.core.layout import default_layout

    cells = [(strategy, DEFAULT_LAYOUT) for strategy in shape.strategies]
    if not quick:
        steps = [name for name, layout in LAYOUTS.items() if layout != default_layout()]
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
    from zoo.core.isolate import cached_call, run_isolated
    from zoo.core.records import write_record

    say(f"measuring memory read bandwidth (compute unit {default_compute_unit()}) ...")
    bandwidth = measure_read_bandwidth()
    say(f"  {bandwidth:.1f} GB/s")
    results = {}
    for name in shape_names:
        shape = ALL_SHAPES[name]
        rows, latency, outcomes = [], [], []
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
            row = {key: value for key, value in cell.items() if key != "latency"}
            row["roofline ms"] = round(roofline_ms, 1)
            row["of roofline"] = f"{roofline_ms / cell['decode ms']:.0%}"
            rows.append(row)
            latency += [
                {"strategy": f"{strategy} ({layout})", **point} for point in cell["latency"]
            ]
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
    import tempfile

    with tempfile.TemporaryDirectory(prefix="zoo-bench-") as tmp:
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
