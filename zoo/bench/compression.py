"""`python -m zoo.bench.compression SHAPE`: compression presets at a bench shape (random
weights at the published widths): export time, peak RSS, asset size, quality against fp32
and decode speed on the runtime. A benchmark (minutes, GBs), never a test; the tiny rows the
tests and the guide use are `zoo.lab.compression`."""

from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from zoo.lab.compression import asset_bytes, prompt


def full_size_cell(shape_name: str, preset: str, workdir: str) -> dict:
    """A bench shape (`zoo.bench`, random weights at the published widths) exported with
    `preset`: export time, peak RSS of this process, asset bytes against the fp32 weights,
    quality of the compressed model against fp32 over 64 positions (torch eager: the tiny
    tests show the runtime adds nothing), and decode ms on the runtime. Run it in a process
    of its own; it is a benchmark (minutes, GBs), never a test."""
    import torch

    from zoo.bench.shapes import ALL_SHAPES, build_decoder
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
    """`python -m zoo.bench.compression SHAPE --presets int8,int4-block32 [--record DIR]`."""
    import argparse

    from zoo.lab.isolate import run_isolated

    parser = argparse.ArgumentParser(prog="python -m zoo.bench.compression")
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
        from zoo.site.records import write_record

        path = write_record(args.record, f"bench-compression-{args.shape}", {"rows": rows})
        print(f"recorded {path}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
