"""Full-size random-weight checkpoints of released sizes, written as the model repositories
publish them: config.json the released fixture (`zoo/<model>/released/`,
every field spelled as published), bf16 tensors under the multimodal layout's names
(`model.language_model.…`), in shards of about 2 GB with a `model.safetensors.index.json`.

Written tensor by tensor (one shard in memory at a time): a Gemma-4-E2B checkpoint is
10 GB of bf16, more than the machine could hold twice. The vision and audio towers are not
written (the loader skips them by name, `ModelEntry.towers`), nor the key/value projections
of Gemma 4's KV-sharing layers (unused, `ModelEntry.unused_weights`). A benchmark input,
never a test fixture: the tests build tiny checkpoints with transformers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

SHARD_BYTES = 2_000_000_000
SMALL = 1 << 20  # parameters below this many values keep the model's own init (norms, gates)
STD = 0.02  # transformers' initializer_range for both families


def released_config(model: str, released: str) -> dict:
    """The released config.json of `released` (e.g. "gemma-4-E2B-it"), as published."""
    from zoo.released import released_configs

    configs = released_configs(model)
    if released not in configs:
        raise ValueError(f"no released {model} config {released!r}: {list(configs)}")
    return json.loads(configs[released].read_text())


def checkpoint_tensors(model: str, config: dict) -> dict[str, torch.Tensor]:
    """Our decoder of `config` with every table in the graph (what a checkpoint holds),
    parameters on the meta device except the small ones: name -> tensor."""
    from zoo.core.asset.kv_writes import get_strategy
    from zoo.core.checkpoint.weights import parameters_on_meta
    from zoo.core.model.entry import get_entry

    entry = get_entry(model)
    config = entry.config.from_dict(config)
    with parameters_on_meta(keep_below=SMALL):
        decoder = entry.model(config, get_strategy("runtime-index"), 64)
    return {name: p.detach() for name, p in decoder.named_parameters()} | {
        name: b for name, b in decoder.named_buffers() if name in decoder.state_dict()
    }


def write_random_checkpoint(
    model: str, config: dict, directory: str | Path, seed: int = 0, shard_bytes: int = SHARD_BYTES
) -> Path:
    """A bf16 random-weight checkpoint of a config.json object (`released_config(...)`, or
    a scaled-down one in the tests) in `directory`, config.json written as given; returns
    the directory. Reuses a complete one already there."""
    directory = Path(directory)
    done = directory / ".complete"
    if done.exists():
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    generator = torch.Generator().manual_seed(seed)
    from zoo.core.model.entry import get_entry

    # as published: text-only families under `model.`, the others the multimodal layout's
    prefix = "model." if get_entry(model).text_only else "model.language_model."
    shard: dict[str, torch.Tensor] = {}
    shards = size = 0
    for name, like in checkpoint_tensors(model, config).items():
        if like.device.type == "meta":
            value = torch.empty(like.shape, dtype=torch.bfloat16)
            value.normal_(0.0, STD, generator=generator)
        else:
            value = like.to(torch.bfloat16).contiguous()
        nbytes = value.numel() * value.element_size()
        if size + nbytes > shard_bytes and shard:
            shards += 1
            save_file(shard, str(directory / _shard_name(shards, None)), {"format": "pt"})
            shard, size = {}, 0  # free the written tensors
        shard[name if name.startswith("lm_head.") else f"{prefix}{name}"] = value
        size += nbytes
    shards += 1
    save_file(shard, str(directory / _shard_name(shards, None)), {"format": "pt"})
    _write_index(directory, shards)
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    done.touch()
    return directory


def _shard_name(index: int, total: int | None) -> str:
    return f"model-{index:05d}-of-{total:05d}.safetensors" if total else f"part-{index:05d}"


def _write_index(directory: Path, total: int) -> None:
    """Rename the shards as published (`model-00001-of-00005.safetensors`) and index them."""
    weight_map = {}
    for index in range(1, total + 1):
        final = _shard_name(index, total)
        (directory / _shard_name(index, None)).rename(directory / final)
        with safe_open(str(directory / final), framework="pt") as tensors:
            weight_map.update({key: final for key in tensors.keys()})  # noqa: SIM118
    (directory / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map}, indent=2)
    )
