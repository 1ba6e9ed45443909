"""Export for the contract Apple's macOS engine reads (reported, not run by that engine here).

Apple's own Qwen3.5 recipe (apple/coreai-models, `models/macos/qwen3_5.py`,
`export/macos.py`, `export/bundle.py`, `_constants.py`; read 2026-12-01) exports a program
that its Swift runner (`llm-runner`, `CoreAILanguageModel(resourcesAt:)`) drives. What that
program looks like from outside is the contract this module follows:

- entry points `main` (logits for every query row) and `prefill` (same inputs and states,
  no outputs: it only fills the states);
- inputs `input_ids` `[1, T]` and `position_ids` `[1, offset + T]` (int32): the positions of
  the whole context so far, so the write offset is `len(position_ids) - T`; T is chosen by
  the runner (one token for decode, a chunk for prefill);
- states packed by kind, one row per layer of that kind: `keyCache` / `valueCache`
  `[full-attention layers, 1, kv_heads, context, head_dim]` with a dynamic context length,
  `convStates` `[GatedDeltaNet layers, 1, conv_kernel, conv_dim]` (the last `conv_kernel`
  inputs of the conv, channels last; a step reads the newest `conv_kernel - 1`) and
  `recurrentStates` `[GatedDeltaNet layers, 1, value_heads, key_dim, value_dim]`;
- a bundle folder: `NAME.aimodel`, `tokenizer/` and `metadata.json` (schema "0.2").

The zoo's decoder is reused as it is: a layer reads and writes its own state through views of
the packed rows, and its KV cache writes at the offset given by the length of
`position_ids` (`PackedPrefixWrite`). `EngineRunner` drives such an asset the way Apple's
runner is reported to, so the tests can hold it to transformers on the Linux runtime.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from zoo.core.asset.kv_writes import NEG_INF, KVStrategy
from zoo.core.asset.opened import read_metadata
from zoo.core.asset.tokenizer import generation_files
from zoo.core.export.convert import EntryPoint, check_output_place, export_entry_points
from zoo.core.host.generator import Generator
from zoo.core.io.files import read_json
from zoo.core.io.staging import replacing_directory
from zoo.core.model.layout import apply_layout

METADATA_VERSION = "0.2"  # the bundle schema Apple's export writes (export/bundle.py)
STATE_KINDS = {  # zoo per-layer state name prefix -> Apple's packed state
    "k_cache_": "keyCache",
    "v_cache_": "valueCache",
    "conv_state_": "convStates",
    "recurrent_state_": "recurrentStates",
}
TRACE_CONTEXT = 2048  # Apple traces the KV cache at 2,048 (TRACE_KV_CACHE_SEQ_LEN)
TRACE_QUERY, TRACE_OFFSET = 16, 8  # and a 16-token query after 8 cached positions


@dataclass(frozen=True)
class PackedPrefixWrite(KVStrategy):
    """Write a chunk at `step["offset"]` (a size from `position_ids`), attend over the
    prefix `[0, offset + T)`: the KV write of Apple's macOS engine contract."""

    name: ClassVar[str] = "engine-prefix"
    title: ClassVar[str] = "slice write at len(position_ids) - T, attend over the prefix"
    step_inputs: ClassVar[tuple[str, ...]] = ()
    dynamic_context: ClassVar[bool] = True
    chunks: ClassVar[bool] = True

    def write(self, cache, column, step, time_axis=2):
        if time_axis != 2:
            raise ValueError("the engine contract stores keys [B, H, T, D]: use keys 'bhtd'")
        offset, length = step["offset"], column.shape[2]
        cache[:, :, offset : offset + length, :] = column
        return cache[:, :, : offset + length, :]


def packed_states(model: nn.Module) -> dict[str, dict]:
    """Apple's four states from a zoo model's per-layer ones: for each, its shape (context
    length as traced) and the per-layer states it holds, one row each, in layer order."""
    packed: dict[str, dict] = {}
    for name, shape in model.state_shapes().items():
        prefix = next((p for p in STATE_KINDS if name.startswith(p)), None)
        if prefix is None:
            raise ValueError(f"state {name!r} has no place in Apple's engine contract")
        entry = packed.setdefault(STATE_KINDS[prefix], {"layers": [], "row": list(shape)})
        if list(shape) != entry["row"]:
            raise ValueError(
                f"{model.name} does not fit Apple's engine contract: {STATE_KINDS[prefix]} "
                f"packs one row per layer, but {entry['layers'][0]} is {entry['row']} and "
                f"{name} is {list(shape)}"
            )
        entry["layers"].append(name)
    conv = packed.get("convStates")
    if conv is not None:  # Apple keeps the last K inputs; the zoo's step reads K - 1 of them
        conv["row"][1] += 1
    for entry in packed.values():
        entry["shape"] = [len(entry["layers"]), *entry["row"]]
    return packed


class EngineDecoder(nn.Module):
    """`forward(input_ids, position_ids, keyCache, valueCache, convStates, recurrentStates)`
    over a zoo decoder built with `PackedPrefixWrite`: logits `[1, T, vocab]` (`main`), or
    nothing (`prefill`)."""

    def __init__(self, model: nn.Module, prefill: bool = False) -> None:
        super().__init__()
        if not isinstance(model.strategy, PackedPrefixWrite):
            raise ValueError(
                "build the model with zoo.core.export.apple_engine.PackedPrefixWrite()"
            )
        self.model, self.prefill = model, prefill
        self.packed = packed_states(model)
        self.state_names = list(self.packed)

    def forward(self, input_ids, position_ids, *states: torch.Tensor):
        length = input_ids.shape[1]
        offset = position_ids.shape[1] - length
        torch._check(offset >= 0)
        positions = position_ids[:, offset:]
        # The causal mask of the chunk over the prefix, from sizes only (no data-derived index).
        rows = torch.arange(length, dtype=torch.int32)[:, None] + offset
        visible = torch.arange(offset + length, dtype=torch.int32)[None, :] <= rows
        mask = torch.where(visible, 0.0, NEG_INF)[None, None]
        views = {}
        for packed_name, state in zip(self.state_names, states, strict=True):
            for row, name in enumerate(self.packed[packed_name]["layers"]):
                view = state[row]
                views[name] = view[:, 1:] if packed_name == "convStates" else view
        step = {"offset": offset, "attn_mask": mask}
        logits = self.model(input_ids, positions, step, views, last_row_only=self.prefill)
        return () if self.prefill else logits


def check_bundle_destination(bundle: Path, overwrite: bool, source: Path | None) -> Path:
    """Refuse, before loading anything, a bundle folder that must not be written."""
    bundle = Path(bundle)
    if bundle.suffix == ".aimodel":
        raise ValueError(
            f"{bundle}: an engine export writes a bundle folder (NAME.aimodel, tokenizer/, "
            "metadata.json inside); give a folder name without .aimodel"
        )
    check_output_place(bundle, source)
    if bundle.exists() and not overwrite:
        raise FileExistsError(
            f"{bundle} already exists; pass --overwrite to replace it, or choose another path"
        )
    if bundle.exists() and not (bundle / "metadata.json").is_file():
        raise FileExistsError(f"{bundle} exists and is not a bundle; nothing replaced")
    return bundle


def tokenizer_files(checkpoint: Path) -> list[Path]:
    """The checkpoint's tokenizer files; the bundle embeds them (`tokenizer/`)."""
    files = generation_files(checkpoint)
    if not any(f.name == "tokenizer.json" for f in files):
        raise FileNotFoundError(
            f"no tokenizer.json in {checkpoint}: Apple's engine reads the tokenizer from the "
            "bundle; put the model's tokenizer files beside its config.json"
        )
    return files


def bundle_metadata(name: str, model_id: str, model: nn.Module, compression: str) -> dict:
    """metadata.json as Apple's `export/bundle.py` writes it (schema "0.2"); the longest
    context is the export's (Apple's export also sets it from its --max-context-length)."""
    return {
        "metadata_version": METADATA_VERSION,
        "kind": "llm",
        "name": name,
        "assets": {"main": f"{name}.aimodel"},
        "language": {
            "tokenizer": model_id,
            "vocab_size": model.config.vocab_size,
            "max_context_length": model.capacity,
            "embedded_tokenizer": True,
            "function_map": {"main": ["main"]},
        },
        "source": {"model_definition": "torch", "hf_model_id": model_id},
        "compression": None if compression == "fp32" else compression,
        "compilation": {"date": datetime.now().astimezone().isoformat(), "targets": []},
    }


def export_engine_bundle(
    model: nn.Module,
    bundle: str | os.PathLike,
    checkpoint: str | os.PathLike,
    *,
    model_id: str | None = None,
    weights: str = "linear",
    compress: str = "fp32",
    trace_context: int = TRACE_CONTEXT,
    overwrite: bool = False,
) -> Path:
    """Export a zoo decoder loaded with `PackedPrefixWrite` into a bundle folder for Apple's
    macOS engine: `NAME.aimodel` (`main` + `prefill`), `tokenizer/`, `metadata.json`.

    The bundle is assembled in a staging folder beside it and renamed into place; an
    existing bundle is replaced only with `overwrite`. `model_id` is the model's name on the
    hub, recorded as its source (default: the checkpoint folder's name). `weights` is the
    stored layout (`zoo.core.model.layout`; default as authored, the macOS layout: the bundle is
    for a Mac); keys stay `[B, H, T, D]` as the contract says. `compress` must be the
    preset the model was loaded with (`ModelEntry.load(..., compress=...)`)."""
    from zoo.core.compression.presets import get_preset

    bundle, checkpoint = Path(bundle), Path(checkpoint)
    check_bundle_destination(bundle, overwrite, checkpoint)
    tokenizer = tokenizer_files(checkpoint)
    preset = get_preset(compress)
    loaded_with = getattr(model, "compression", "fp32")
    if loaded_with != preset.name:
        raise ValueError(
            f"the model was loaded with {loaded_with!r} weights: load it with "
            f"compress={compress!r} to export it so"
        )
    apply_layout(model, preset.layout({"weights": weights, "keys": "bhtd"})["weights"], "bhtd")
    name = bundle.name
    model_id = model_id or checkpoint.resolve().name
    context = min(trace_context, model.capacity)
    query = min(TRACE_QUERY, context - 2)
    offset = min(TRACE_OFFSET, context - query - 1)
    packed = packed_states(model)
    arguments = (
        torch.zeros(1, query, dtype=torch.int32),
        torch.arange(offset + query, dtype=torch.int32)[None],
        *(torch.zeros(_with_context(p["shape"], s, context)) for s, p in packed.items()),
    )
    dynamic = {
        "input_ids": {1: torch.export.Dim("seq_ids", min=1, max=model.capacity - 2)},
        "position_ids": {1: torch.export.Dim("seq_pos", min=query, max=model.capacity - 1)},
    }
    for state in packed:
        dynamic[state] = (
            {3: torch.export.Dim(f"{state}_context", min=context, max=model.capacity)}
            if state in ("keyCache", "valueCache") and context < model.capacity
            else None
        )
    inputs, states = ["input_ids", "position_ids"], list(packed)
    entries = [
        EntryPoint(
            entry,
            EngineDecoder(model, prefill=entry == "prefill"),
            arguments,
            inputs,
            outputs,
            states,
            dynamic_shapes=_by_argument(dynamic),
        )
        for entry, outputs in (("main", ["logits"]), ("prefill", []))
    ]
    for entry in entries:
        entry.program_pass = preset.program_pass
    engine = {
        "contract": "apple-macos-llm",
        "capacity": model.capacity,
        "compression": preset.name,
        "states": {n: {"shape": p["shape"], "layers": p["layers"]} for n, p in packed.items()},
        "vocab_size": model.config.vocab_size,
        "stop_token_ids": [int(t) for t in model.config.stop_token_ids],
    }
    with replacing_directory(bundle, overwrite) as fresh:
        (fresh / "tokenizer").mkdir(parents=True)
        export_entry_points(entries, fresh / f"{name}.aimodel", extra_metadata={"engine": engine})
        for file in tokenizer:
            shutil.copy2(file, fresh / "tokenizer" / file.name)
        metadata = bundle_metadata(name, model_id, model, preset.name)
        (fresh / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    return bundle


def _by_argument(dynamic: dict) -> list:
    """`dynamic_shapes` as torch.export matches them to `forward(ids, positions, *states)`."""
    shapes = list(dynamic.values())
    return [*shapes[:2], tuple(shapes[2:])]


def _with_context(shape: Sequence[int], state: str, context: int) -> list[int]:
    """A packed state's shape with the KV caches' context length set to `context`."""
    shape = list(shape)
    if state in ("keyCache", "valueCache"):
        shape[3] = context
    return shape


@dataclass
class EngineSpec:
    """What `Generator.generate` and the CLI read of a bundle (from its asset's metadata)."""

    capacity: int
    vocab_size: int
    stop_token_ids: list[int]
    compression: str
    states: dict


class EngineRunner(Generator):
    """Drives a bundle's asset the way Apple's runner is reported to: states allocated for
    a context of `context` tokens, the prompt through `prefill` in chunks of `chunk`, the
    rest (at least the last token) through `main`, with `position_ids` spanning everything
    so far. `generate` is `Generator`'s (greedy or sampled, stop ids, `on_token`)."""

    def __init__(
        self,
        bundle: str | os.PathLike,
        context: int | None = None,
        chunk: int = 16,
        compute_unit: str | None = None,
    ) -> None:
        from zoo.core.host.runtime import Model

        bundle = Path(bundle)
        metadata = read_json(bundle / "metadata.json", f": {bundle} is not a bundle")
        self.asset = bundle / metadata["assets"]["main"]
        engine = read_metadata(self.asset).get("engine")
        if engine is None:
            raise ValueError(f"{self.asset} was not exported for Apple's engine contract")
        self.spec = EngineSpec(
            engine["capacity"],
            engine["vocab_size"],
            engine["stop_token_ids"],
            engine["compression"],
            engine["states"],
        )
        self.model = Model.load(self.asset, compute_unit)
        self.main, self.prefill = self.model.function("main"), self.model.function("prefill")
        # A KV cache traced at the full context is static (as in Apple's export): one length.
        traced = self.main.states["keyCache"][0][3] if "keyCache" in self.main.states else None
        longest = traced or self.spec.capacity
        context = longest if context is None else context
        if not 2 <= context <= longest or (traced and context != traced):
            self.model.close()
            allowed = f"exactly {traced}" if traced else f"2 to {longest}"
            raise ValueError(f"context {context}: this bundle's states hold {allowed} tokens")
        self.context, self.chunk = context, chunk
        self.reset()

    def reset(self) -> None:
        """Fresh zeroed states for `context` tokens."""
        self.states = self.main.new_states(
            **{
                name: np.zeros(_with_context(s["shape"], name, self.context), np.float32)
                for name, s in self.spec.states.items()
            }
        )
        self.position = 0

    def _call(self, function, ids: Sequence[int]) -> dict:
        end = self.position + len(ids)
        inputs = {
            "input_ids": np.array([ids], np.int32),
            "position_ids": np.arange(end, dtype=np.int32)[None],
        }
        outputs = function(inputs, self.states)
        self.position = end
        return outputs

    def feed(self, ids: Sequence[int], images: Sequence = (), audio: Sequence = ()) -> np.ndarray:
        """Append tokens to the context; returns the logits `[vocab]` after the last one."""
        if images or audio:
            raise ValueError("a bundle for Apple's engine reads text only: no images or audio")
        ids = self._fitting(ids, self.context, "run with a larger context")
        whole = (len(ids) - 1) // self.chunk * self.chunk
        for start in range(0, whole, self.chunk):
            self._call(self.prefill, ids[start : start + self.chunk])
        return self._call(self.main, ids[whole:])["logits"][0, -1]


def engine_options(options: dict, output: Path, checkpoint: Path) -> dict:
    """`--target apple-engine`: what the bundle takes (Apple's contract: prefix writes,
    keys [B, H, T, D], fp32 caches, its own functions), the rest refused by name."""
    if options["keys"] == "bhdt":
        raise ValueError("--target apple-engine stores keys [B, H, T, D]: drop --keys-layout")
    if options["kv_cache"] != "fp32" or options["first_layers"]:
        raise ValueError(
            "--target apple-engine exports the whole model with fp32 caches: drop --kv-cache "
            "and --first-layers"
        )
    if (
        options["spans"]
        or options["layers_per_function"] is not None
        or options["stream"] == "on"
        or options["score_chunk"]
    ):
        raise ValueError(
            "--target apple-engine has its own functions: drop --spans, "
            "--layers-per-function, --stream and --verify"
        )
    check_bundle_destination(output, options["overwrite"], checkpoint)
    weights = "linear" if options["weights"] == "auto" else options["weights"]
    return {
        **options,
        "strategy": PackedPrefixWrite.name,
        "weights": weights,
        "keys": "bhtd",
        "stream": "off",
    }
