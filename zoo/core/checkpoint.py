"""Read a Hugging Face checkpoint directory's tensors with safetensors (never pickle)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

import torch
from safetensors import safe_open


class CheckpointError(ValueError):
    """The checkpoint's tensors do not fit the model: the message lists what and where."""


def read_text_config(
    directory: str | Path, text_type: str, multimodal_type: str, family: str
) -> dict:
    """config.json of a checkpoint, the text decoder's part (nested in multimodal ones)."""
    path = Path(directory) / "config.json"
    if not path.exists():
        raise FileNotFoundError(f"no config.json in {directory}: is it a checkpoint directory?")
    return text_config(json.loads(path.read_text()), text_type, multimodal_type, family)


def text_config(raw: dict, text_type: str, multimodal_type: str, family: str) -> dict:
    model_type = raw.get("model_type")
    if model_type == multimodal_type:
        raw = raw.get("text_config") or {}
        model_type = raw.get("model_type", text_type)
    if model_type != text_type:
        raise ValueError(
            f"config.json has model_type {model_type!r}; this entry loads {family} "
            f"checkpoints ({text_type!r}, or {multimodal_type!r} with a text_config)"
        )
    return raw


def safetensors_files(directory: str | Path) -> list[Path]:
    directory = Path(directory)
    index = directory / "model.safetensors.index.json"
    if index.exists():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [directory / shard for shard in shards]
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        pickles = sorted(p.name for p in directory.glob("*.bin")) + sorted(
            p.name for p in directory.glob("*.pt")
        )
        hint = (
            f" (found {pickles}: pickle checkpoints are not loaded, convert them to safetensors)"
            if pickles
            else ""
        )
        raise FileNotFoundError(f"no *.safetensors in {directory}{hint}")
    return files


def load_into(
    module: torch.nn.Module,
    directory: str | Path,
    rename: Callable[[str], str | None],
    ignore: Iterable[str] = (),
) -> None:
    """Copy the checkpoint's tensors into `module`'s parameters and buffers.

    `rename` maps a checkpoint name to the module's name, or None for a tensor to skip
    (e.g. a vision tower). Missing, unexpected and misshaped tensors are all reported at
    once, by name.
    """
    targets = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    targets = {name: t for name, t in targets.items() if name in module.state_dict()}
    ignore = tuple(ignore)
    loaded, unexpected, misshaped, wrong_shape = set(), [], [], set()
    for path in safetensors_files(directory):
        with safe_open(str(path), framework="pt") as tensors:
            for key in tensors.keys():  # noqa: SIM118 - safe_open is not a Mapping
                name = rename(key)
                if name is None or any(name.startswith(prefix) for prefix in ignore):
                    continue
                if name not in targets:
                    unexpected.append(key)
                    continue
                value = tensors.get_tensor(key)
                if tuple(value.shape) != tuple(targets[name].shape):
                    misshaped.append(
                        f"{key}: {tuple(value.shape)}, expected {tuple(targets[name].shape)}"
                    )
                    wrong_shape.add(name)
                    continue
                with torch.no_grad():
                    targets[name].copy_(value.to(targets[name].dtype))
                loaded.add(name)
    missing = sorted(set(targets) - loaded - wrong_shape)
    problems = []
    if missing:
        problems.append(f"missing tensors: {missing}")
    if misshaped:
        problems.append(f"tensors of the wrong shape: {misshaped}")
    if unexpected:
        problems.append(f"tensors this model has no place for: {sorted(unexpected)}")
    if problems:
        raise CheckpointError(f"{directory}: " + "; ".join(problems))
