"""Each compression preset on a tiny checkpoint: size, peak memory, quality against the fp32
model, and the asset on the Core AI runtime against the compressed eager model.

`compression_row` runs in a child process (its peak RSS is the export's, and the runtime
may crash), shared within a test session by the zoo tests, the recipe and its record.
"""

from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
CAPACITY, CHUNK = 96, 8
PROMPT_LENGTH = 72  # quality over 72 positions


def prompt(vocab_size: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(0).integers(3, vocab_size, PROMPT_LENGTH)]


def tiny_checkpoint(model: str, directory: Path) -> Path:
    """The tiny checkpoint the zoo tests use for `model`."""
    if model == "gemma4":
        from zoo.gemma4.tiny import make_tiny_checkpoint

        return make_tiny_checkpoint(directory, "kv-sharing")
    from zoo.qwen3_5.tiny import make_tiny_checkpoint

    return make_tiny_checkpoint(directory)


def _entry(model: str):
    import importlib

    package = importlib.import_module(f"zoo.{model}")
    return getattr(package, f"load_{model}"), getattr(package, f"export_{model}")


def asset_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).iterdir() if f.is_file())


def check_preset(model: str, preset: str, strategy: str, workdir: str) -> dict:
    """Export the tiny `model` with `preset`; measure it against fp32 and on the runtime."""
    from zoo.core.compress import quality
    from zoo.core.decode import Generator, torch_logits
    from zoo.released import runtime_logits

    workdir = Path(tempfile.mkdtemp(dir=workdir))
    load, export = _entry(model)
    checkpoint = tiny_checkpoint(model, workdir / "checkpoint")
    reference = load(checkpoint, strategy, CAPACITY)
    ids = prompt(reference.config.vocab_size)
    fp32 = torch_logits(reference, ids)[0].numpy()
    del reference

    started = time.perf_counter()
    compressed = load(checkpoint, strategy, CAPACITY)
    asset = export(compressed, workdir / f"{preset}.aimodel", chunk=CHUNK, compress=preset)
    seconds = time.perf_counter() - started
    # The compressed model in torch eager (the fp16 cast happens on the exported program
    # only, so fp16's eager model is fp32 and only the runtime shows its rounding).
    eager = torch_logits(compressed, ids)[0].detach().numpy()
    on_runtime = np.array(runtime_logits(str(asset), ids))
    with Generator(asset) as generator:
        greedy = generator.generate(ids[:10], 8, stop_token_ids=[])
        generator.reset()
        generator.feed(ids[:16])
        steps = []
        for token in ids[16:32]:
            tick = time.perf_counter()
            generator.feed([token])
            steps.append(time.perf_counter() - tick)
    want = quality(fp32, on_runtime)
    return {
        "model": model,
        "preset": preset,
        "KV strategy": strategy,
        "asset bytes": asset_bytes(asset),
        "export s": round(seconds, 1),
        "peak RSS MB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "runtime vs compressed eager (max abs)": float(f"{np.abs(on_runtime - eager).max():.2g}"),
        **{key: float(f"{value:.4g}") for key, value in want.items()},
        "greedy tokens": greedy,
        "decode ms (Linux runtime)": round(1000 * float(np.median(steps)), 2),
    }


def compression_row(model: str, preset: str, strategy: str, workdir: str | Path) -> dict:
    """`check_preset` in a process of its own, computed once per test session."""
    from zoo.core.isolate import cached_call, run_isolated

    sources = sorted(ROOT.rglob("*.py"))
    outcome = cached_call(
        lambda: run_isolated(check_preset, model, preset, strategy, str(workdir), timeout=900),
        ["compression", *sources, model, preset, strategy],
    )
    if not outcome.ok:
        raise RuntimeError(f"{model} {preset} {strategy}: {outcome.summary()}\n{outcome.detail}")
    return outcome.result


def fp16_cast_on_gated_delta(workdir: str | Path) -> str:
    """Export a tiny Qwen3.5 with coreai-opt's fp16 cast applied anyway (the `fp16` preset
    refuses it) and return how the conversion fails."""
    from zoo.core.compress import PRESETS
    from zoo.core.decode import decode_spec, export_decoder
    from zoo.core.export import ExportError
    from zoo.qwen3_5 import load_qwen3_5

    checkpoint = tiny_checkpoint("qwen3_5", Path(workdir) / "qwen-checkpoint")
    model = load_qwen3_5(checkpoint, "input-mask-blend", 32)
    spec = decode_spec(model, chunk=4)
    try:
        export_decoder(
            model, spec, Path(workdir) / "fp16.aimodel", program_pass=PRESETS["fp16"].program_pass
        )
    except ExportError as error:
        return str(error)
    return "exported"


def full_size_cell(shape_name: str, preset: str, workdir: str) -> dict:
    """A bench shape (`zoo.bench`, random weights at the published widths) exported with
    `preset`: export time, peak RSS of this process, asset bytes against the fp32 weights,
    quality of the compressed model against fp32 over 64 positions (torch eager: the tiny
    tests show the runtime adds nothing), and decode ms on the runtime. Run it in a process
    of its own; it is a benchmark (minutes, GBs), never a test."""
    import torch

    from zoo.bench import ALL_SHAPES, build_decoder
    from zoo.core.compress import get_preset, quality
    from zoo.core.decode import Generator, decode_spec, export_decoder, torch_logits
    from zoo.core.layout import apply_layout, resolve_layout

    shape = ALL_SHAPES[shape_name]
    model = build_decoder(shape, shape.strategies[0])
    fp32_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    ids = prompt(model.config.vocab_size)[:64]
    with torch.no_grad():
        reference = torch_logits(model, ids)[0].numpy()
    chosen = get_preset(preset)
    started = time.perf_counter()
    layout = chosen.layout(resolve_layout())
    apply_layout(model, layout["weights"], layout["keys"])
    spec = decode_spec(model, shape.chunk)
    spec.compression = preset
    compressed = chosen.apply(model, spec)
    asset = Path(workdir) / f"{shape_name}-{preset}.aimodel"
    export_decoder(compressed, spec, asset, overwrite=True, program_pass=chosen.program_pass)
    export_s = time.perf_counter() - started
    with torch.no_grad():
        logits = torch_logits(compressed, ids)[0].numpy()
    del model, compressed
    with Generator(asset) as generator:
        generator.feed(ids[:8])
        steps = []
        for token in ids[8:11]:
            tick = time.perf_counter()
            generator.feed([token])
            steps.append(time.perf_counter() - tick)
    row = {
        "shape": shape_name,
        "preset": preset,
        "fp32 weights MB": round(fp32_bytes / 1e6),
        "asset MB": round(asset_bytes(asset) / 1e6),
        "asset / fp32": round(asset_bytes(asset) / fp32_bytes, 3),
        "export s": round(export_s),
        "peak RSS GB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 1),
        "decode ms (Linux runtime)": round(1000 * float(np.median(steps))),
        **{key: float(f"{value:.4g}") for key, value in quality(reference, logits).items()},
    }
    import shutil

    shutil.rmtree(asset, ignore_errors=True)
    return row


def main(argv: list[str] | None = None) -> int:
    """`python -m zoo.compression SHAPE --presets int8,int4-block32 [--record DIR]`."""
    import argparse

    from zoo.core.isolate import run_isolated

    parser = argparse.ArgumentParser(prog="python -m zoo.compression")
    parser.add_argument("shape", help="a zoo.bench shape, e.g. qwen3_5-0.8b")
    parser.add_argument("--presets", default="int8,int4-block32")
    parser.add_argument("--record", metavar="DIR")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="zoo-compress-") as workdir:
        for preset in args.presets.split(","):
            print(f"{args.shape}: {preset} ...", flush=True)
            outcome = run_isolated(full_size_cell, args.shape, preset, workdir, timeout=3600)
            row = (
                outcome.result
                if outcome.ok
                else {"shape": args.shape, "preset": preset, "outcome": outcome.summary()}
            )
            print(f"  {row}", flush=True)
            rows.append(row)
    if args.record:
        from zoo.core.records import write_record

        path = write_record(args.record, f"bench-compression-{args.shape}", {"rows": rows})
        print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
