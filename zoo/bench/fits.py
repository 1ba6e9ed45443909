"""What fits your Mac: every released size the zoo loads, at the presets people run, planned
at full size on torch's meta device, and the smallest Mac memory each asset runs in.

No weights are read: each released config.json becomes a checkpoint of headers only (the
tensor names and shapes transformers gives that config, no data), which is all the plan
reads. The plan's own estimates are recorded: the asset on disk, and what it holds while
it runs (the weights and the KV cache at `CAPACITY` tokens; the runtime adds its own).
A Mac "runs" an asset here when that leaves a quarter of its memory to macOS and the
apps beside it: the zoo's rule of thumb, not measured on a Mac.

`python -m zoo.bench.fits [--record DIR]` (record `fits-your-mac`, `make records`).
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import tempfile
from pathlib import Path

PRESETS = ("fp16", "int8", "int4-block32")
CAPACITY = 4096
MAC_MEMORY_GB = (8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 512)
LEFT_TO_MACOS = 0.25
RECORD = "fits-your-mac"
COLUMNS = ("parameters (B)", "asset GB", f"running GB ({CAPACITY:,} tokens)")


def headers_only(config: dict, directory: Path) -> Path:
    """`directory` as a checkpoint of `config` whose model.safetensors holds the headers of
    every tensor transformers' model of that config has (bf16, shapes only, no data)."""
    import torch
    import transformers

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    hf_config = transformers.AutoConfig.from_pretrained(directory)
    with torch.device("meta"):
        model = getattr(transformers, config["architectures"][0])._from_config(hf_config)
    header, offset = {}, 0
    for name, tensor in model.state_dict().items():
        size = 2 * tensor.numel()
        header[name] = {
            "dtype": "BF16",
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    (directory / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text)
    return directory


def smallest_mac(running_bytes: int) -> str:
    for memory in MAC_MEMORY_GB:
        if running_bytes <= (1 - LEFT_TO_MACOS) * memory * 2**30:
            return f"{memory} GB"
    return f"more than {MAC_MEMORY_GB[-1]} GB"


def rows_of(model: str, name: str, config_path: Path, work: Path) -> list[dict]:
    """One row a preset for the released config `name` of entry `model`."""
    from zoo.core.export.plan import plan_export

    config = json.loads(config_path.read_text())
    config.pop("quantization_config", None)  # MXFP4 experts planned as the bf16 they load as
    checkpoint = headers_only(config, work / name)
    rows = []
    for preset in PRESETS:
        row = {"entry": f"zoo.{model}", "released": name, "preset": preset}
        try:
            plan = plan_export(
                checkpoint,
                work / f"{name}.aimodel",
                compress=preset,
                capacity=CAPACITY,
                room=False,  # sizes only: a 200 GB asset is planned on a disk of 80
                text_only=True,
            )
        except ValueError as refused:  # a preset this entry cannot export: why, no sizes
            why = str(refused).split(": ", 1)[-1].split(" (")[0]
            rows.append(row | dict.fromkeys(COLUMNS) | {"smallest Mac": f"not exported: {why}"})
            continue
        running = plan.estimated_bytes + plan.state_bytes
        sizes = (plan.parameters, plan.estimated_bytes, running)
        rows.append(
            row
            | {column: round(size / 1e9, 2) for column, size in zip(COLUMNS, sizes, strict=True)}
            | {"smallest Mac": smallest_mac(running)}
        )
    return rows


def fits(models: list[str] | None = None) -> list[dict]:
    from zoo.core.model.entry import all_entries
    from zoo.released import released_configs

    rows = []
    with tempfile.TemporaryDirectory(prefix="zoo-fits-") as work:
        for model in models or list(all_entries()):
            for name, path in released_configs(model).items():
                rows += rows_of(model, name, path, Path(work))
                print(f"{model} {name}: {rows[-1]}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zoo.bench.fits", description=__doc__)
    parser.add_argument("--model", action="append", help="an entry (default: every entry)")
    parser.add_argument("--record", metavar="DIR", help=f"write the record {RECORD} into DIR")
    args = parser.parse_args(argv)
    rows = fits(args.model)
    if args.record:
        from zoo.core.io.records import write_record

        rule = f"weights + KV cache at {CAPACITY:,} tokens <= {1 - LEFT_TO_MACOS:.0%} of memory"
        print(write_record(args.record, RECORD, {"rows": rows, "rule": rule}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
