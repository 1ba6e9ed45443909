"""`python -m zoo.bench.compression MODEL`: compression presets at full size, from a bf16
random-weight checkpoint whose config.json is the released one (`zoo.bench.checkpoints`).

Each preset's export runs in a process of its own, as `python -m zoo.<model> export
--compress` does it (tensors read module by module, each compressed as it is read): its
peak RSS is the export's. Recorded per preset: export time, peak RSS, asset and sidecar
bytes against the fp32 bytes of what the graph stores, quality of the compressed model
against the fp32 model on the same weights over 64 positions (torch eager: the tiny tests
show the runtime adds nothing), and a few decode steps on the runtime. A benchmark
(minutes, GBs), never a test; the tiny rows the tests and the guide use are
`zoo.lab.compression`.
"""

from __future__ import annotations

import resource
import shutil
import time
from pathlib import Path

import numpy as np

from zoo.lab.compression import asset_bytes, prompt

# model -> (released config, recommended preset, options of the load)
FULL_SIZE = {
    "qwen3_5": ("Qwen3.5-0.8B", "int4-block32", {}),
    "gemma4": ("gemma-4-E2B-it", "palettize4", {"ple_sidecar": True}),
}
CAPACITY, CHUNK, POSITIONS, DECODE_STEPS = 2048, 8, 64, 2


def peak_rss_gb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 1)


def reference_cell(model: str, checkpoint: str, out: str) -> dict:
    """fp32 logits of the checkpoint over `POSITIONS` tokens, saved to `out` (.npy)."""
    import torch

    from zoo.core.model.eager import torch_logits
    from zoo.core.model.entry import get_entry

    options = FULL_SIZE[model][2]
    decoder = get_entry(model).load(checkpoint, "runtime-index", CAPACITY, **options)
    fp32_bytes = sum(p.numel() * 4 for p in decoder.parameters())
    with torch.no_grad():
        logits = torch_logits(decoder, prompt(decoder.config.vocab_size)[:POSITIONS])
    np.save(out, logits[0].numpy())
    return {"fp32 bytes": fp32_bytes, "peak RSS GB": peak_rss_gb()}


def export_cell(model: str, checkpoint: str, preset: str, asset: str, reference: str) -> dict:
    """Load compressed, export, then measure (peak RSS read right after the export)."""
    import torch

    from zoo.core.compression.presets import quality
    from zoo.core.export.functions import export_model
    from zoo.core.host.generator import Generator
    from zoo.core.model.eager import torch_logits
    from zoo.core.model.entry import get_entry

    options = FULL_SIZE[model][2]
    started = time.perf_counter()
    decoder = get_entry(model).load(
        checkpoint, "runtime-index", CAPACITY, compress=preset, **options
    )
    loaded_s = time.perf_counter() - started
    export_model(decoder, asset, chunk=CHUNK, checkpoint=checkpoint, compress=preset)
    export_s, export_rss = time.perf_counter() - started, peak_rss_gb()
    ids = prompt(decoder.config.vocab_size)[:POSITIONS]
    with torch.no_grad():
        logits = torch_logits(decoder, ids)[0].numpy()
    del decoder
    with Generator(asset) as generator:
        generator.feed(ids[:CHUNK])
        steps = []
        for token in ids[CHUNK : CHUNK + DECODE_STEPS]:
            tick = time.perf_counter()
            generator.feed([token])
            steps.append(time.perf_counter() - tick)
    sidecars = sum(f.stat().st_size for f in Path(asset).glob("*.int8.safetensors"))
    return {
        "preset": preset,
        "load + compress s": round(loaded_s),
        "export s": round(export_s),
        "peak RSS GB": export_rss,
        "asset bytes": asset_bytes(Path(asset)) - sidecars,
        "sidecar bytes": sidecars,
        "decode ms (Linux runtime)": round(1000 * float(np.median(steps))),
        **{
            key: float(f"{value:.4g}") for key, value in quality(np.load(reference), logits).items()
        },
    }


def full_size_rows(model: str, presets: list[str], workdir: Path) -> dict:
    """Write (or reuse) the checkpoint, the fp32 reference, then one export per preset."""
    from zoo.bench.checkpoints import released_config, write_random_checkpoint
    from zoo.core.isolate import run_isolated

    released = FULL_SIZE[model][0]
    say(f"{released}: bf16 random-weight checkpoint in {workdir} ...")
    started = time.perf_counter()
    config = released_config(model, released)
    checkpoint = write_random_checkpoint(model, config, workdir / released)
    checkpoint_bytes = sum(f.stat().st_size for f in checkpoint.glob("*.safetensors"))
    say(f"  {checkpoint_bytes / 1e9:.1f} GB in {time.perf_counter() - started:.0f} s")
    reference = workdir / f"{released}-fp32-logits.npy"
    say(f"{released}: fp32 reference logits over {POSITIONS} positions ...")
    outcome = run_isolated(reference_cell, model, str(checkpoint), str(reference), timeout=3600)
    if not outcome.ok:
        raise SystemExit(f"fp32 reference: {outcome.summary()}\n{outcome.detail[-800:]}")
    fp32_bytes = outcome.result["fp32 bytes"]
    say(f"  peak RSS {outcome.result['peak RSS GB']} GB")
    rows = []
    for preset in presets:
        say(f"{released}: export --compress {preset} ...")
        asset = workdir / f"{released}-{preset}.aimodel"
        outcome = run_isolated(
            export_cell, model, str(checkpoint), preset, str(asset), str(reference), timeout=7200
        )
        if outcome.ok:
            row = outcome.result
            row["asset / fp32"] = round(row["asset bytes"] / fp32_bytes, 3)
        else:
            row = {"preset": preset, "outcome": outcome.summary()}
        say(f"  {row}")
        rows.append(row)
        shutil.rmtree(asset, ignore_errors=True)
    return {
        "released": released,
        "checkpoint": f"bf16 random weights, config.json as released ({checkpoint_bytes} bytes)",
        "fp32 bytes of the graph's weights": fp32_bytes,
        "rows": rows,
    }


def say(message: str) -> None:
    print(message, flush=True)


def main(argv: list[str] | None = None) -> int:
    """`python -m zoo.bench.compression MODEL [--presets P,Q] [--workdir DIR] [--record DIR]`."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m zoo.bench.compression")
    parser.add_argument("model", choices=list(FULL_SIZE))
    parser.add_argument("--presets", help="default: the model's recommended preset, int8")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(".cache/bench"),
        help="where the checkpoint (kept and reused: 1.5 GB Qwen3.5-0.8B, 10 GB "
        "Gemma-4-E2B) and the assets go (default: %(default)s)",
    )
    parser.add_argument("--record", metavar="DIR")
    args = parser.parse_args(argv)
    released, recommended, _ = FULL_SIZE[args.model]
    presets = args.presets.split(",") if args.presets else [recommended, "int8"]
    args.workdir.mkdir(parents=True, exist_ok=True)
    result = full_size_rows(args.model, presets, args.workdir)
    if args.record:
        from zoo.core.io.records import write_record

        path = write_record(args.record, f"bench-compression-{released}", result)
        say(f"recorded {path}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
