"""Export a decoder as `prefill` + `decode` functions sharing states.

A zoo model exports two functions into one asset: `prefill` takes a chunk of `chunk` tokens,
`decode` takes one; both name the same states (KV caches, and for hybrids the recurrent and
conv states), so decode continues where prefill left off. What the host passes per step is
derived from the `DecodeSpec` stored in the asset's metadata: the positions, the KV
strategy's inputs (write index or mask, `attn_mask`) and, for models with sliding-window
layers, a `sliding_mask`. The loop needs no torch and no model code.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from zoo.core.asset.decode_spec import DecodeSpec
from zoo.core.asset.opened import component_of
from zoo.core.asset.tokenizer import generation_files
from zoo.core.export.convert import EntryPoint, export_entry_points
from zoo.core.export.options import keywords_doc
from zoo.core.model.eager import decode_spec, zero_state
from zoo.core.model.kv_cache import set_kv_cache
from zoo.core.model.layout import apply_layout

if TYPE_CHECKING:
    pass


class FlatDecoder(torch.nn.Module):
    """A zoo decoder as torch.export and the runtime call it: flat tensors, in the order of
    `input_names` then `state_names`. The decoder itself takes them named:
    `forward(input_ids, positions, step, states, last_row_only)`.

    `last_row_only` is the prefill function: logits `[1, 1, vocab]` after the chunk's last
    token only. The host reads nothing else, and the LM head is the widest matmul of a
    decoder (Qwen3.5-0.8B's is 248,320 x 1,024): computing it for every row of a chunk cost
    as much as the rest of the step (docs/performance.md).

    `layers` (start, stop) makes it one range of the decoder (`zoo.core.export.ranges`): the first
    range embeds `input_ids`, the others take the previous range's `hidden` `[1, T, width]`
    and what the first computed for all of them (`carried`: Gemma 4's per-layer inputs);
    the last ends with the head (`logits`), the others return `hidden_out` (the first, its
    `carried` too, each as NAME_out); each holds the states its layers write or read."""

    def __init__(
        self,
        model: torch.nn.Module,
        spec: DecodeSpec,
        last_row_only: bool = False,
        layers: Sequence[int] | None = None,
        span: int | None = None,
    ) -> None:
        super().__init__()
        self.model, self.spec, self.last_row_only = model, spec, last_row_only
        self.span = span  # attention span: masks this many columns wide (None: capacity)
        self.input_names = list(example_inputs(spec, 1)[0])
        self.state_names = list(spec.state_shapes)
        self.outputs = ["logits"]
        self.layers, self.carried = None, []
        if layers is not None:
            from zoo.core.export.ranges import carried_shapes, check_splittable

            check_splittable(model)
            start, stop = self.layers = tuple(layers)
            self.state_names = list(model.layer_state_shapes(start, stop))
            self.carried = list(carried_shapes(model, 1))
            # states this range only reads (another range writes them)
            self.read_only = list(getattr(model, "read_only_states", lambda *_: [])(start, stop))
            if start > 0:
                self.input_names = ["hidden", *self.carried, *self.input_names[1:]]
            if stop < len(model.layers):  # names used once per function
                self.outputs = ["hidden_out", *(f"{n}_out" for n in self.carried if not start)]

    def example_inputs(self, length: int) -> tuple[dict, tuple[torch.Tensor, ...]]:
        """Zero inputs (named) and the forward arguments of one call of `length` tokens."""
        inputs = example_inputs(self.spec, length, self.span)[0]
        if "hidden" in self.input_names:
            from zoo.core.export.ranges import carried_shapes

            width = self.model.config.hidden_size
            shapes = {"hidden": (1, length, width), **carried_shapes(self.model, length)}
            inputs = {n: np.zeros(s, np.float32) for n, s in shapes.items()} | inputs
        inputs = {name: inputs[name] for name in self.input_names}
        states = (zero_state(self.spec, name) for name in self.state_names)
        return inputs, (*(torch.from_numpy(v) for v in inputs.values()), *states)

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        named = dict(zip(self.input_names + self.state_names, tensors, strict=True))
        states = {name: named.pop(name) for name in self.state_names}
        positions = named.pop("positions")
        if self.layers is None:
            input_ids = named.pop("input_ids")
            return self.model(input_ids, positions, named, states, last_row_only=self.last_row_only)
        from zoo.core.export.ranges import run_layers

        start, stop = self.layers
        if start == 0:
            input_ids = named.pop("input_ids")
            h = self.model.embed(input_ids)
            carried = self.model.carried(input_ids, h, named) if self.carried else {}
        else:
            h = named.pop("hidden")
            carried = {name: named.pop(name) for name in self.carried}
        h = run_layers(self.model, h, start, stop, positions, named, states, carried)
        for name in self.read_only:  # a state the converter sees as one: a write of itself
            corner = states[name][(0,) * (states[name].dim() - 1)].narrow(-1, 0, 1)
            corner.copy_(corner.clone())
        if stop == len(self.model.layers):
            return self.model.head(h, self.last_row_only)
        return (h, *carried.values()) if start == 0 and carried else h


def export_decoder(
    model: torch.nn.Module,
    spec: DecodeSpec,
    path: str | os.PathLike,
    *,
    overwrite: bool = False,
    program_pass=None,
    extra_files: dict | None = None,
    part: int | None = None,
    components: dict | None = None,
) -> Path:
    """Export a zoo decoder (`forward(input_ids, positions, step, states)`) as prefill +
    decode (+ score if `spec.score_chunk`), each a `FlatDecoder` over the same states, with
    its sidecar tables (int8 files beside the program, `zoo.core.asset.sidecar`) written from
    `model.sidecars`. The spec checked itself when it was made (`DecodeSpec`); the
    destination is checked where the asset is written (`zoo.core.export.convert`).

    `program_pass`, if given, rewrites each function's `torch.export` program before the
    conversion (e.g. an fp16 cast). `extra_files` (name -> write(path)) adds files to the
    asset, listed in its manifest like the program. `part` (a layer range's number) writes
    only that range's functions: one part of an export range by range (`zoo.core.export.stream`).
    `components` (name -> (EntryPoint, its metadata)) adds functions of other components
    beside the decoder's (a vision encoder, `zoo.core.export.components`)."""
    spec.check_exportable()
    spans = [*(spec.spans or []), None]
    functions = [("prefill", spec.chunk, s) for s in spans] + [("decode", 1, None)]
    if spec.media_chunk:  # one image's tokens in one call (`DecodeSpec.media_chunk`)
        functions.append(("prefill_media", spec.media_chunk, None))
    if spec.score_chunk is not None:  # scoring reads long texts: the whole context only
        functions += [(spec.verify_kind(width), width, None) for width in spec.widths]
    entries = []
    for kind, length, span in functions:
        names = spec.function_names(kind, span)
        for number, (name, layers) in enumerate(zip(names, spec.ranges or [None], strict=True)):
            if part is not None and number != part:
                continue
            module = FlatDecoder(model, spec, kind.startswith("prefill"), layers, span)
            inputs, arguments = module.example_inputs(length)
            entry = EntryPoint(
                name, module, arguments, list(inputs), module.outputs, module.state_names
            )
            entry.program_pass = program_pass
            entries.append(entry)
    sources = getattr(model, "sidecars", {})
    files = {spec.sidecars[name]["file"]: sources[name].write for name in spec.sidecars}
    files.update(extra_files or {})
    described = decoder_component(entries, spec)
    for name, (entry, component) in (components or {}).items():
        entries.append(entry)
        described[name] = component
    return export_entry_points(
        entries,
        path,
        overwrite=overwrite,
        extra_metadata={"decode": asdict(spec), "components": described},
        extra_files=files,
    )


def export_model(
    model: torch.nn.Module,
    path: str | os.PathLike,
    *,
    checkpoint: str | os.PathLike | None = None,
    **options,
) -> Path:
    """Export a loaded zoo decoder (`zoo.<model>.load_<model>`) as prefill + decode: the
    options are planned and checked once (`zoo.core.export.plan.plan_for_model`), then written.

    `checkpoint` (the directory it was loaded from) gives the asset its tokenizer and
    generation files (`zoo.core.asset.tokenizer.GENERATION_FILES`, copied in and listed in the
    manifest), so the asset generates text on its own; only the folder's name is recorded.
    The strategy and capacity are the model's; `chunk` is 8 unless given (None: this
    platform's default, `zoo export`'s); `kv_cache` None: as the model's caches are now
    (fp32 unless `set_kv_cache` said otherwise). The layout is re-stored in place and
    computes the same logits.
    """
    from zoo.core.export.plan import plan_for_model

    options.setdefault("chunk", 8)
    return write_asset(model, plan_for_model(model, path, checkpoint=checkpoint, **options))


def write_asset(
    model: torch.nn.Module, plan, output: Path | None = None, part: int | None = None
) -> Path:
    """Write the asset of a checked `zoo.core.export.plan.ExportPlan` from its loaded `model`:
    the layout applied, the weights compressed, every function converted, then saved.
    With `part`, only that layer range's functions, from the tensors read for it, into
    `output` (one part of an export range by range, `zoo.core.export.stream`)."""
    from zoo.core.checkpoint.weights import drop_unread
    from zoo.core.compression.presets import get_preset

    preset = get_preset(plan.compress)
    source = plan.checkpoint.resolve() if plan.checkpoint is not None else None
    copied = {
        file.name: functools.partial(shutil.copyfile, file)
        for file in (generation_files(source) if source is not None else [])
    }
    if plan.experts == "chosen":  # the experts stacked for GatherMM (zoo.core.model.experts)
        from zoo.core.model.experts import stack_experts

        stack_experts(model)
    preset.check_range(model)
    set_kv_cache(model, plan.kv_cache)
    apply_layout(model, plan.weights, plan.keys)  # the projections left as nn.Linear
    spec = decode_spec(model, plan.chunk, source.name if source is not None else None)
    spec = replace(
        spec,
        compression=preset.name,
        compression_detail=preset.detail,
        encoding=plan.encoding,
        score_chunk=plan.score_chunk,
        verify_widths=list(plan.verify_widths) if plan.verify_widths else None,
        spans=list(plan.spans) if plan.spans else None,
        ranges=[list(r) for r in plan.ranges] if plan.ranges else None,
    )
    components = {}
    for name in plan.components[1:] if part is None else ():  # before the decoder compresses
        from zoo.core.export.components import encoder_entry_point
        from zoo.core.model.entry import get_entry

        width = model.config.hidden_size
        entry, component = components[name] = encoder_entry_point(plan, name, width)
        spec = replace(spec, soft_tokens=width)
        processor = component["processor"]
        if processor.get("bidirectional"):  # image tokens see each other
            tokens = get_entry(plan.entry).encoders[name].tokens(processor)
            spec = replace(spec, media_chunk=tokens)
        if processor.get("mrope_section"):  # images placed by three axes
            spec = replace(spec, mrope_section=processor["mrope_section"])
    model = preset.apply(model)
    if plan.encoding != "coreai-opt":  # the same codes, expanded by ordinary ops
        from zoo.core.compression.encoding import encode_plain

        encode_plain(model, plan.encoding)
    drop_unread(model)  # (a part: the other ranges' weights were never read)
    return export_decoder(
        model,
        spec,
        output or plan.output,
        overwrite=plan.overwrite and output is None,
        program_pass=preset.program_pass,
        extra_files=copied if part is None else {},
        part=part,
        components=components,
    )


def example_inputs(
    spec: DecodeSpec, length: int, span: int | None = None
) -> tuple[dict, tuple[torch.Tensor, ...]]:
    """Zero inputs (named) and the forward arguments of one call of `length` tokens
    (masks `span` columns wide: None, the whole context)."""
    inputs = {"input_ids": np.zeros((1, length), np.int32), **spec.host_inputs(0, length, span)}
    for name, sidecar in spec.sidecars.items():
        inputs[name] = np.zeros((1, length, sidecar["width"]), np.float32)
    if spec.soft_tokens:  # images: soft tokens in place of some tokens' embeddings
        inputs["soft_tokens"] = np.zeros((1, length, spec.soft_tokens), np.float32)
        inputs["soft_mask"] = np.zeros((1, length, 1), np.float32)
    if spec.mrope_section:  # three position axes (zoo.core.host.media.mrope_inputs)
        inputs["mrope_positions"] = np.zeros((3, length), np.int32)
    states = tuple(zero_state(spec, name) for name in spec.state_shapes)
    return inputs, (*(torch.from_numpy(v) for v in inputs.values()), *states)


def decoder_component(entries: list[EntryPoint], spec: DecodeSpec) -> dict:
    """metadata.json's `components` of a decoder asset: one component, the text decoder,
    with its functions, states and sidecars (`zoo.core.asset.opened.OpenedAsset.components`; the
    encoders and drafters of multimodal checkpoints are components beside it)."""
    held = {e.name: {"states": list(e.state_names)} for e in entries}
    return {"decoder": component_of({"entry_points": held, "decode": asdict(spec)})}


export_model.__doc__ += keywords_doc(model=True)
