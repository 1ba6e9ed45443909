"""Export a decoder as `prefill` + `decode` functions sharing states, and the host loop.

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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from zoo.core.export import EntryPoint, check_destination, export_entry_points, read_metadata
from zoo.core.kv import causal_mask, chunk_rows, get_strategy
from zoo.core.layout import apply_layout, layout_of, resolve_layout
from zoo.core.runtime import Model
from zoo.core.text import generation_files

if TYPE_CHECKING:
    from zoo.core.compress import Preset


class ContextFullError(IndexError):
    """The decode would run past the context the asset was exported with."""


MAX_CAPACITY = 262_144  # the longest context of the zoo's models (Qwen3.5)


def check_capacity(capacity: int) -> None:
    """A KV cache length the export can hold: checked before anything is built."""
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 2:
        raise ValueError(
            f"the capacity (tokens the KV cache holds) must be a whole number >= 2, "
            f"got {capacity!r}"
        )
    if capacity > MAX_CAPACITY:
        raise ValueError(
            f"a capacity of {capacity} tokens is more than the zoo's models support "
            f"({MAX_CAPACITY}); choose a smaller --capacity"
        )


def check_spans(spans: Sequence[int] | None, chunk: int, capacity: int) -> None:
    """Attention spans an export can have: whole numbers, ascending, each holding a prefill
    chunk and shorter than the context (the context itself is always exported)."""
    if spans is None:
        return
    for span in spans:
        if isinstance(span, bool) or not isinstance(span, int) or not chunk <= span < capacity:
            raise ValueError(
                f"an attention span must be a whole number from the prefill chunk ({chunk}) "
                f"to below the capacity ({capacity}), got {span!r}"
            )
    if list(spans) != sorted(set(spans)):
        raise ValueError(f"attention spans must be ascending and distinct, got {list(spans)}")


@dataclass
class DecodeSpec:
    """What the host must know to drive an exported decoder; stored in its metadata."""

    model: str
    strategy: str
    capacity: int
    chunk: int
    vocab_size: int
    state_shapes: dict[str, list[int]]
    sliding_window: int | None = None
    stop_token_ids: list[int] = field(default_factory=list)
    # the checkpoint folder's name (provenance only; never a path: the asset holds its own
    # tokenizer and generation files); assets exported before 2026-12-03 hold a path
    checkpoint: str | None = None
    layout: dict[str, str] = field(default_factory=dict)  # zoo.core.layout: weights, keys
    compression: str = "fp32"  # zoo.core.compress preset the weights were stored with
    compression_detail: str | None = None  # what a mixed preset chose (zoo.core.compress)
    # tables kept out of the graph (zoo.core.sidecar): input name -> file, rows, width
    sidecars: dict[str, dict] = field(default_factory=dict)
    # a third function, `score`: this many tokens in, every row's logits out (zoo.quality)
    score_chunk: int | None = None
    # layer ranges [start, stop): each function kind exported once per range, `prefill_0`,
    # `prefill_1`, ... (None: one function a kind, `prefill`)
    ranges: list[list[int]] | None = None
    # attention spans shorter than the context: prefill exported once more per span,
    # attending over the cache's first `span` columns only (`prefill_s256`, ...); the host
    # calls the shortest span that holds the chunk (None: every call reads `capacity`).
    # Decode stays whole: on the Linux runtime a step's slice of the cache cost more than
    # the attention it saved (docs/performance.md#attention-spans)
    spans: list[int] | None = None

    def __post_init__(self) -> None:
        # a hand-edited or damaged metadata.json must not decode silently wrong: a stop id
        # `true` would act as id 1
        for token in self.stop_token_ids:
            if isinstance(token, bool) or not isinstance(token, int):
                raise ValueError(f"stop id {token!r} is not a token id")
            if not 0 <= token < self.vocab_size:
                raise ValueError(f"stop id {token} is outside the vocabulary")
        check_spans(self.spans, self.chunk, self.capacity)

    def function_names(self, kind: str, span: int | None = None) -> list[str]:
        """The asset's functions that make one `kind` call ("prefill", "decode", "score"),
        in the order the host calls them; `span` names those of an attention span (None or
        the capacity: the whole context)."""
        if span not in (None, self.capacity):
            kind = f"{kind}_s{span}"
        if not self.ranges:
            return [kind]
        return [f"{kind}_{index}" for index in range(len(self.ranges))]

    def span_for(self, end: int) -> int:
        """The shortest attention span that holds positions up to `end` (exclusive)."""
        return next((span for span in self.spans or [] if end <= span), self.capacity)

    @classmethod
    def of_asset(cls, asset: str | os.PathLike) -> DecodeSpec:
        """The spec an asset's metadata.json holds, refused whole if it was damaged."""
        decode = read_metadata(asset).get("decode")
        if decode is None:
            raise ValueError(f"{asset} was not exported by zoo.core.decode.export_decoder")
        try:
            return cls(**decode)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"{asset}/metadata.json: its decode spec is damaged ({error}); export again"
            ) from None

    def host_inputs(
        self, position: int, length: int, span: int | None = None
    ) -> dict[str, np.ndarray]:
        """Everything but `input_ids` for `length` tokens starting at `position`; the masks
        of a function attending over `span` columns (None: the whole context)."""
        span = self.capacity if span is None else span
        if position + length > self.capacity:
            raise ContextFullError(
                f"the context holds {self.capacity} tokens and this step needs positions "
                f"{position}..{position + length - 1}; export with a larger --capacity"
            )
        if position + length > span:
            raise ValueError(
                f"positions {position}..{position + length - 1} are past an attention span "
                f"of {span}: call a longer span's function (DecodeSpec.span_for)"
            )
        inputs = {"positions": np.arange(position, position + length, dtype=np.int32)[None]}
        inputs.update(get_strategy(self.strategy).host_inputs(position, self.capacity, length))
        if self.sliding_window is not None:
            rows = chunk_rows(position, self.capacity, length)
            recent = np.arange(self.capacity)[None, :] > (
                position + np.arange(length)[:, None] - self.sliding_window
            )
            inputs["sliding_mask"] = causal_mask(rows & recent)
        for name in ("attn_mask", "sliding_mask"):  # a span reads the first columns only
            if name in inputs:
                inputs[name] = np.ascontiguousarray(inputs[name][..., :span])
        return inputs

    def token_inputs(self, ids: np.ndarray, tables: dict) -> dict[str, np.ndarray]:
        """The inputs the host looks up per token: rows of each sidecar table (`tables`:
        input name -> `zoo.core.sidecar.SidecarTable`) for `ids` `[1, T]`."""
        return {name: tables[name].lookup(ids) for name in self.sidecars}

    def open_sidecars(self, asset: str | os.PathLike) -> dict:
        from zoo.core.sidecar import SidecarTable

        return {name: SidecarTable(Path(asset) / s["file"]) for name, s in self.sidecars.items()}


class FlatDecoder(torch.nn.Module):
    """A zoo decoder as torch.export and the runtime call it: flat tensors, in the order of
    `input_names` then `state_names`. The decoder itself takes them named:
    `forward(input_ids, positions, step, states, last_row_only)`.

    `last_row_only` is the prefill function: logits `[1, 1, vocab]` after the chunk's last
    token only. The host reads nothing else, and the LM head is the widest matmul of a
    decoder (Qwen3.5-0.8B's is 248,320 x 1,024): computing it for every row of a chunk cost
    as much as the rest of the step (docs/performance.md).

    `layers` (start, stop) makes it one range of the decoder (`zoo.core.ranges`): the first
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
            from zoo.core.ranges import carried_shapes, check_splittable

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
            from zoo.core.ranges import carried_shapes

            width = self.model.config.hidden_size
            shapes = {"hidden": (1, length, width), **carried_shapes(self.model, length)}
            inputs = {n: np.zeros(s, np.float32) for n, s in shapes.items()} | inputs
        inputs = {name: inputs[name] for name in self.input_names}
        states = (torch.zeros(self.spec.state_shapes[name]) for name in self.state_names)
        return inputs, (*(torch.from_numpy(v) for v in inputs.values()), *states)

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        named = dict(zip(self.input_names + self.state_names, tensors, strict=True))
        states = {name: named.pop(name) for name in self.state_names}
        positions = named.pop("positions")
        if self.layers is None:
            input_ids = named.pop("input_ids")
            return self.model(input_ids, positions, named, states, last_row_only=self.last_row_only)
        from zoo.core.ranges import run_layers

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
) -> Path:
    """Export a zoo decoder (`forward(input_ids, positions, step, states)`) as prefill +
    decode (+ score if `spec.score_chunk`), each a `FlatDecoder` over the same states, with
    its sidecar tables (int8 files beside the program, `zoo.core.sidecar`) written from
    `model.sidecars`.

    `program_pass`, if given, rewrites each function's `torch.export` program before the
    conversion (e.g. an fp16 cast). `extra_files` (name -> write(path)) adds files to the
    asset, listed in its manifest like the program."""
    if not 2 <= spec.chunk <= spec.capacity:
        raise ValueError(
            f"the prefill chunk must hold 2 to {spec.capacity} tokens (the context), "
            f"got {spec.chunk}"
        )
    check_destination(path, overwrite)
    if spec.score_chunk is not None and not 1 <= spec.score_chunk <= spec.capacity:
        raise ValueError(
            f"the score chunk must hold 1 to {spec.capacity} tokens, got {spec.score_chunk}"
        )
    check_spans(spec.spans, spec.chunk, spec.capacity)
    spans = [*(spec.spans or []), None]
    functions = [("prefill", spec.chunk, s) for s in spans] + [("decode", 1, None)]
    if spec.score_chunk is not None:  # scoring reads long texts: the whole context only
        functions.append(("score", spec.score_chunk, None))
    entries = []
    for kind, length, span in functions:
        names = spec.function_names(kind, span)
        for name, layers in zip(names, spec.ranges or [None], strict=True):
            module = FlatDecoder(model, spec, kind == "prefill", layers, span)
            inputs, arguments = module.example_inputs(length)
            entry = EntryPoint(
                name, module, arguments, list(inputs), module.outputs, module.state_names
            )
            entry.program_pass = program_pass
            entries.append(entry)
    sources = getattr(model, "sidecars", {})
    files = {spec.sidecars[name]["file"]: sources[name].write for name in spec.sidecars}
    files.update(extra_files or {})
    return export_entry_points(
        entries,
        path,
        overwrite=overwrite,
        extra_metadata={"decode": asdict(spec)},
        extra_files=files,
    )


def decode_spec(
    model: torch.nn.Module, chunk: int = 8, checkpoint: str | None = None
) -> DecodeSpec:
    """The spec of a zoo decoder: `model` has `name`, `strategy`, `capacity`, `config` and
    `state_shapes()` (and `sliding_window` if it has sliding-window layers)."""
    return DecodeSpec(
        model=model.name,
        strategy=model.strategy.name,
        capacity=model.capacity,
        chunk=chunk,
        vocab_size=model.config.vocab_size,
        state_shapes={n: list(shape) for n, shape in model.state_shapes().items()},
        sliding_window=getattr(model, "sliding_window", None),
        stop_token_ids=[int(token) for token in model.config.stop_token_ids],
        checkpoint=checkpoint,
        layout=layout_of(model),
        sidecars={
            name: {"file": f"{name}.int8.safetensors", "rows": rows, "width": width}
            for name, (rows, width) in _sidecar_shapes(model).items()
        },
    )


def _sidecar_shapes(model: torch.nn.Module) -> dict[str, tuple[int, int]]:
    widths = getattr(model, "sidecar_inputs", {})
    sources = getattr(model, "sidecars", {})
    missing = sorted(set(widths) - set(sources))
    if missing:
        raise ValueError(
            f"{missing} stay out of the graph but have no source table: load the model from "
            "a checkpoint (zoo.<model>.load_<model>) to export it"
        )
    return {name: sources[name].shape for name in widths}


def export_model(
    model: torch.nn.Module,
    path: str | os.PathLike,
    *,
    chunk: int = 8,
    overwrite: bool = False,
    checkpoint: str | os.PathLike | None = None,
    weights: str = "auto",
    keys: str = "auto",
    compress: str | Preset = "fp32",
    score_chunk: int | None = None,
    layers_per_function: int | None = None,
    spans: Sequence[int] | None = None,
) -> Path:
    """Export a loaded zoo decoder (`zoo.<model>.load_<model>`) as prefill + decode.

    `checkpoint` (the directory it was loaded from) gives the asset its tokenizer and
    generation files (`zoo.core.text.GENERATION_FILES`, copied in and listed in the
    manifest), so the asset generates text on its own; only the folder's name is recorded.
    `weights` and `keys` choose the stored layout (`zoo.core.layout`; "auto": this
    platform's default); the model is re-stored in place and computes the same logits.
    `compress` names a `zoo.core.compress` preset for the stored weights. `score_chunk`
    adds a `score` function returning every row's logits (`Generator.score`, `zoo.quality`).
    `layers_per_function` exports each function as consecutive layer ranges of at most that
    many layers (`zoo.core.ranges`: prefill with two calls in flight; the Neural Engine's
    chunks). `spans` (ascending, each below the capacity) adds prefill functions that
    attend over the cache's first `span` columns only: the host calls the shortest one that
    holds the chunk (docs/performance.md#attention-spans).
    """
    from zoo.core.compress import get_preset

    preset = get_preset(compress)
    preset.check(model.name)
    loaded_with = getattr(model, "compression", "fp32")
    if loaded_with not in ("fp32", preset.name):
        raise ValueError(
            f"the model was loaded compressed with {loaded_with!r}: export it with "
            f"compress={loaded_with!r} (or load it again without compression)"
        )
    source = Path(checkpoint).resolve() if checkpoint is not None else None
    check_destination(path, overwrite, source)
    copied = {
        file.name: functools.partial(shutil.copyfile, file)
        for file in (generation_files(source) if source is not None else [])
    }
    layout = preset.layout(resolve_layout(weights, keys))
    apply_layout(model, layout["weights"], layout["keys"])
    spec = decode_spec(model, chunk, source.name if source is not None else None)
    spec.compression, spec.compression_detail = preset.name, preset.detail
    spec.score_chunk = score_chunk
    check_spans(spans, chunk, spec.capacity)
    spec.spans = list(spans) if spans else None
    if layers_per_function is not None:
        from zoo.core.ranges import check_splittable, split_layers

        check_splittable(model)
        spec.ranges = split_layers(len(model.layers), layers_per_function)
    return export_decoder(
        preset.apply(model),
        spec,
        path,
        overwrite=overwrite,
        program_pass=preset.program_pass,
        extra_files=copied,
    )


def torch_logits(model: torch.nn.Module, ids: list[int]) -> torch.Tensor:
    """Logits `[1, T, vocab]` of a zoo decoder in torch eager: `ids` as one chunk from 0."""
    spec = decode_spec(model, chunk=len(ids))
    step = {n: torch.from_numpy(v) for n, v in spec.host_inputs(0, len(ids)).items()}
    for name, source in getattr(model, "sidecars", {}).items():  # the same int8 rows
        step[name] = source.rows(torch.tensor([ids]))
    states = {name: torch.zeros(shape) for name, shape in spec.state_shapes.items()}
    with torch.no_grad():
        return model(torch.tensor([ids], dtype=torch.int32), step.pop("positions"), step, states)


def example_inputs(
    spec: DecodeSpec, length: int, span: int | None = None
) -> tuple[dict, tuple[torch.Tensor, ...]]:
    """Zero inputs (named) and the forward arguments of one call of `length` tokens
    (masks `span` columns wide: None, the whole context)."""
    inputs = {"input_ids": np.zeros((1, length), np.int32), **spec.host_inputs(0, length, span)}
    for name, sidecar in spec.sidecars.items():
        inputs[name] = np.zeros((1, length, sidecar["width"]), np.float32)
    states = tuple(torch.zeros(shape) for shape in spec.state_shapes.values())
    return inputs, (*(torch.from_numpy(v) for v in inputs.values()), *states)


def check_token_ids(ids: Sequence[int], vocab_size: int) -> None:
    """Token ids must be whole numbers in the vocabulary: a negative id would wrap around
    (-1 reads the last embedding row) and a float be truncated, silently."""
    for token in ids:
        if isinstance(token, bool) or not isinstance(token, int | np.integer):
            raise ValueError(f"token ids must be whole numbers, got {token!r}")
        if not 0 <= token < vocab_size:
            raise ValueError(f"token id {token} is outside the vocabulary (0..{vocab_size - 1})")


def sample(
    logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator
) -> int:
    """Greedy when `temperature` is 0; else softmax sampling over the top-k logits."""
    if temperature <= 0:
        return int(np.argmax(logits))
    scaled = logits.astype(np.float64) / temperature
    if top_k is not None and top_k < scaled.size:
        cutoff = np.partition(scaled, -top_k)[-top_k]
        scaled = np.where(scaled >= cutoff, scaled, -np.inf)
    probabilities = np.exp(scaled - scaled.max())
    probabilities /= probabilities.sum()
    return int(rng.choice(scaled.size, p=probabilities))


def passed_on(carried: dict, outputs: dict) -> dict:
    """What a layer range's call leaves for the next: its NAME_out outputs as inputs NAME
    (beside what earlier ranges passed on), and the logits of the last."""
    fresh = {name[: -len("_out")]: v for name, v in outputs.items() if name.endswith("_out")}
    return {**carried, **fresh, **({"logits": outputs["logits"]} if "logits" in outputs else {})}


class Generator:
    """Prompt ids in, new token ids out, on the Core AI runtime.

    >>> with Generator("gemma4.aimodel") as generator:            # doctest: +SKIP
    ...     ids = generator.generate([2, 651, 6037], max_new_tokens=8)
    """

    def __init__(self, asset: str | os.PathLike, compute_unit: str | None = None) -> None:
        self.spec = DecodeSpec.of_asset(asset)
        self.model = Model.load(asset, compute_unit)
        # each kind of call: one function, or one per layer range (zoo.core.ranges)
        self.functions = {
            kind: [self.model.function(name) for name in self.spec.function_names(kind)]
            for kind in ("prefill", "decode", "score")
            if kind != "score" or self.spec.score_chunk
        }
        # prefill over the first `span` columns of the caches (DecodeSpec.spans)
        self.spanned = {
            span: [self.model.function(n) for n in self.spec.function_names("prefill", span)]
            for span in self.spec.spans or []
        }
        self.sidecars = self.spec.open_sidecars(asset)  # rows looked up per token
        self.ran: list[str] = []  # the functions the last feed() or score() called, in order
        self.reset()

    def reset(self) -> None:
        """Forget the context: fresh zeroed states."""
        self.states = {}
        for function in self.functions["prefill"]:
            self.states.update(function.new_states())
        self.position = 0

    def _fitting(self, ids: Sequence[int], context: int, advice: str) -> list[int]:
        """`ids` as a list, refused if empty, out of the vocabulary, or past `context`."""
        ids = list(ids)
        if not ids:
            raise ValueError("feed() needs at least one token")
        check_token_ids(ids, self.spec.vocab_size)
        if self.position + len(ids) > context:
            raise ContextFullError(
                f"the context holds {context} tokens: {self.position} are used and "
                f"{len(ids)} more do not fit; {advice}"
            )
        return ids

    def feed(self, ids: Sequence[int]) -> np.ndarray:
        """Append tokens to the context; returns the logits after the last one. Whole chunks
        go through prefill (pipelined over layer ranges), the rest one token at a time."""
        ids = self._fitting(ids, self.spec.capacity, "export with a larger --capacity")
        self.ran = []
        chunk = self.spec.chunk
        whole = min(len(ids), self.spec.capacity - self.position) // chunk
        pieces = [ids[i * chunk : (i + 1) * chunk] for i in range(whole)]
        logits = self._prefill(pieces) if pieces else None
        for token in ids[whole * chunk :]:  # the rest, and anything past the end
            logits = self._call("decode", [token])
        return logits[0, -1].astype(np.float32)

    def _functions(self, kind: str, end: int) -> tuple[list, int | None]:
        """The functions of one `kind` call ending before position `end`: the shortest
        attention span's that holds it (prefill only), and that span (None: the whole
        context)."""
        span = self.spec.span_for(end)
        functions, span = (
            (self.spanned[span], span)
            if kind == "prefill" and span in self.spanned
            else (self.functions[kind], None)
        )
        self.ran.extend(function.name for function in functions)
        return functions, span

    def _inputs(self, function, piece: list[int], position: int, carried=None, span=None) -> dict:
        """What `function` declares, for `piece` at `position` (`carried`: what the earlier
        ranges passed on to a later one, by input name; `span`: its attention span)."""
        ids_array = np.array([piece], np.int32)
        inputs = {
            "input_ids": ids_array,
            **self.spec.host_inputs(position, len(piece), span),
            **self.spec.token_inputs(ids_array, self.sidecars),
        }
        inputs.update(carried or {})
        # Masks go in the dtype the function declares (fp16 for an fp16 export).
        return {
            name: value.astype(function.inputs[name][1]) if value.dtype.kind == "f" else value
            for name, value in inputs.items()
            if name in function.inputs
        }

    def _start(self, function, piece: list[int], position: int, carried=None, span=None):
        states = {name: self.states[name] for name in function.state_names}
        return function.start(self._inputs(function, piece, position, carried, span), states)

    def _call(self, kind: str, piece: list[int]) -> np.ndarray:
        """One `kind` call on `piece` at the current position, range after range: logits."""
        carried: dict = {}
        functions, span = self._functions(kind, self.position + len(piece))
        for function in functions:
            outputs = self._start(function, piece, self.position, carried, span).result()
            carried = passed_on(carried, outputs)
        self.position += len(piece)
        return outputs["logits"]

    def _prefill(self, pieces: list[list[int]]) -> np.ndarray:
        """Whole chunks through prefill: the logits after the last. With layer ranges, the
        calls of one wave run together: range r of chunk k beside range r + 1 of chunk
        k - 1. Each state sees one call at a time, in chunk order: a call whose states a
        running call also holds (Gemma 4's KV-shared layers read an earlier range's cache)
        waits for it."""
        chunk = self.spec.chunk
        # each chunk's functions: the shortest attention span that holds it
        calls = [
            self._functions("prefill", self.position + (k + 1) * chunk) for k in range(len(pieces))
        ]
        ranges = len(self.functions["prefill"])
        carried: list[dict] = [{} for _ in pieces]  # what each chunk's next range reads
        for wave in range(len(pieces) + ranges - 1):
            first = max(0, wave - ranges + 1)
            running: list = []  # (chunk, call, its states), oldest chunk first
            for k in range(first, min(wave, len(pieces) - 1) + 1):
                functions, span = calls[k]
                function = functions[wave - k]
                held = set(function.state_names)
                for other in [r for r in running if r[2] & held]:
                    self._finish(other, carried)
                    running.remove(other)
                position = self.position + k * chunk
                call = self._start(function, pieces[k], position, carried[k], span)
                running.append((k, call, held))
            for entry in running:
                self._finish(entry, carried)
        self.position += chunk * len(pieces)
        return carried[-1]["logits"]

    @staticmethod
    def _finish(running: tuple, carried: list[dict]) -> None:
        k, call, _ = running
        carried[k] = passed_on(carried[k], call.result())

    def score(self, ids: Sequence[int]) -> np.ndarray:
        """Append tokens to the context; returns the logits after each of them `[T, vocab]`
        (row i scores the token after ids[i]). Needs an asset exported with `score_chunk`."""
        if "score" not in self.functions:
            raise ValueError(
                "this asset has no score function: export it with score_chunk=N "
                "(zoo.core.decode.export_model) to read every row's logits"
            )
        ids = self._fitting(ids, self.spec.capacity, "score fewer tokens or export longer")
        self.ran, rows = [], []
        chunk = self.spec.score_chunk
        while ids:
            piece = ids[:chunk] if len(ids) >= chunk else ids[:1]
            rows.append(self._call("score" if len(piece) == chunk else "decode", piece)[0])
            ids = ids[len(piece) :]
        return np.concatenate(rows).astype(np.float32)

    def generate(
        self,
        prompt_ids: Sequence[int],
        max_new_tokens: int,
        *,
        stop_token_ids: Sequence[int] | None = None,
        temperature: float = 0.0,
        top_k: int | None = None,
        seed: int | None = None,
        on_token: Callable[[int], None] | None = None,
    ) -> list[int]:
        """Greedy (or seeded sampled) continuation of `prompt_ids`, from a fresh context.

        Stops after `max_new_tokens`, at a stop token (included in the result), or raises
        `ContextFullError` when the next token would not fit.
        """
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
            raise ValueError(f"max_new_tokens must be a whole number, got {max_new_tokens!r}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        if not (isinstance(temperature, int | float) and 0 <= temperature < float("inf")):
            raise ValueError(f"temperature must be >= 0 (0: greedy), got {temperature!r}")
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int)):
            raise ValueError(f"top_k must be a whole number >= 1, got {top_k!r}")
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k must be at least 1 (or None: all tokens), got {top_k}")
        stops = set(self.spec.stop_token_ids if stop_token_ids is None else stop_token_ids)
        rng = np.random.default_rng(seed)
        self.reset()
        logits = self.feed(prompt_ids)
        new: list[int] = []
        while len(new) < max_new_tokens:
            token = sample(logits, temperature, top_k, rng)
            new.append(token)
            if on_token is not None:
                on_token(token)
            if token in stops or len(new) == max_new_tokens:
                break
            logits = self.feed([token])
        return new

    def close(self) -> None:
        self.model.close()

    def __enter__(self) -> Generator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
