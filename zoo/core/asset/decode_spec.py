"""The asset contract: what the host must know to drive an exported decoder (`DecodeSpec`,
stored in the asset's metadata), and the inputs it derives from it for every call.

A zoo model exports `prefill` (a chunk of `chunk` tokens) and `decode` (one token) into one
asset; both name the same states (KV caches, and for hybrids the recurrent and conv states),
so decode continues where prefill left off. What the host passes per step is derived from
the spec: the positions, the KV strategy's inputs (write index or mask, `attn_mask`) and,
for models with sliding-window layers, a `sliding_mask`. No torch: `zoo generate` and the
host loop (`zoo.core.host.generator`) run with numpy and the runtime only.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from zoo.core.asset.kv_writes import causal_mask, chunk_rows, get_strategy
from zoo.core.asset.opened import OpenedAsset, open_asset, read_metadata, zoo_section
from zoo.core.io.files import inside


class ContextFullError(IndexError):
    """The decode would run past the context the asset was exported with."""


# the states of a KV cache, by name prefix: rewound by position (zoo.core.host.speculative)
KV_STATES = ("k_cache_", "v_cache_", "k_scale_", "v_scale_")
# how a KV cache can be stored (zoo.core.model.kv_cache), as `zoo export --dry-run` describes it
KV_CACHES = {
    "fp32": "fp32",
    "int8": "int8 codes and a float32 scale a head and position (about a quarter of fp32)",
}
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


def check_verify_widths(widths: Sequence[int] | None, score_chunk: int | None) -> None:
    """Narrower verify widths beside the widest (`score_chunk`): each 2 or more, below it."""
    for width in widths or []:
        if not score_chunk or not 2 <= width < score_chunk:
            raise ValueError(
                f"--verify {width}: each narrower verify width takes 2 tokens or more, fewer "
                f"than the widest ({score_chunk})"
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
    layout: dict[str, str] = field(default_factory=dict)  # zoo.core.model.layout: weights, keys
    compression: str = "fp32"  # zoo.core.compression.presets preset the weights were stored with
    compression_detail: str | None = (
        None  # what a mixed preset chose (zoo.core.compression.presets)
    )
    encoding: str = (
        "coreai-opt"  # how its compressed weights are written (zoo.core.compression.encoding)
    )
    # tables kept out of the graph (zoo.core.asset.sidecar): input name -> file, rows, width
    sidecars: dict[str, dict] = field(default_factory=dict)
    # a third function, `score`: this many tokens in, every row's logits out (zoo.quality)
    score_chunk: int | None = None
    # narrower verify calls beside `score` (speculative decoding checks few guesses in a
    # cheaper call): `score_w{k}` takes k tokens, each k in 2..score_chunk - 1
    verify_widths: list[int] | None = None
    # layer ranges [start, stop): each function kind exported once per range, `prefill_0`,
    # `prefill_1`, ... (None: one function a kind, `prefill`)
    ranges: list[list[int]] | None = None
    # attention spans shorter than the context: prefill exported once more per span,
    # attending over the cache's first `span` columns only (`prefill_s256`, ...); the host
    # calls the shortest span that holds the chunk (None: every call reads `capacity`).
    # Decode stays whole: on the Linux runtime a step's slice of the cache cost more than
    # the attention it saved (docs/performance.md#attention-spans)
    spans: list[int] | None = None
    # states not stored float32, by name: an int8 KV cache's codes (zoo.core.model.kv_cache)
    state_dtypes: dict[str, str] = field(default_factory=dict)
    # images: every function also takes `soft_tokens` `[1, T, width]` (a vision component's
    # output) and `soft_mask` `[1, T, 1]` (1 where a soft token replaces the token's
    # embedding); the width, or None for a text-only asset
    soft_tokens: int | None = None
    # images whose tokens attend to each other both ways (Gemma 4 31B's sliding layers): a
    # `prefill_media` function of this many tokens reads one image's tokens in one call,
    # the host's sliding mask opening the block to itself (None: images read causally)
    media_chunk: int | None = None
    # images placed in space by multimodal RoPE (Qwen3.5): every function also takes
    # `mrope_positions` `[3, T]` (time, height, width of each token; text: its position
    # plus the shift the images before it left), the frequencies' sections (None: text)
    mrope_section: list[int] | None = None

    def __post_init__(self) -> None:
        # a hand-edited or damaged metadata.json must not decode silently wrong: a stop id
        # `true` would act as id 1
        for token in self.stop_token_ids:
            if isinstance(token, bool) or not isinstance(token, int):
                raise ValueError(f"stop id {token!r} is not a token id")
            if not 0 <= token < self.vocab_size:
                raise ValueError(f"stop id {token} is outside the vocabulary")
        check_spans(self.spans, self.chunk, self.capacity)
        check_verify_widths(self.verify_widths, self.score_chunk)

    @property
    def kv_cache(self) -> str:
        """How the KV cache is stored: "int8" (codes and scales) or "fp32"."""
        return "int8" if "int8" in self.state_dtypes.values() else "fp32"

    def kv_bytes_per_token(self) -> int:
        """The bytes the KV cache holds a position: keys and values of every layer with a
        cache of its own, codes and scales (recurrent states do not grow with the text)."""
        itemsize = {"int8": 1}
        return (
            sum(
                int(np.prod(shape)) * itemsize.get(self.state_dtypes.get(name, ""), 4)
                for name, shape in self.state_shapes.items()
                if name.startswith(KV_STATES)
            )
            // self.capacity
        )

    def check_exportable(self) -> None:
        """The functions this spec names can be exported: a prefill chunk of 2 tokens or
        more within the context, a score chunk within it."""
        if not 2 <= self.chunk <= self.capacity:
            raise ValueError(
                f"the prefill chunk must hold 2 to {self.capacity} tokens (the context), "
                f"got {self.chunk}"
            )
        if self.score_chunk is not None and not 1 <= self.score_chunk <= self.capacity:
            raise ValueError(
                f"the score chunk must hold 1 to {self.capacity} tokens, got {self.score_chunk}"
            )

    @property
    def widths(self) -> list[int]:
        """The token counts a verify call takes, narrowest first (none: no score function)."""
        return sorted({*(self.verify_widths or []), self.score_chunk} - {None})

    def verify_kind(self, width: int) -> str:
        """The function kind of a verify call of `width` tokens (`score`, `score_w4`)."""
        if width not in self.widths:
            raise ValueError(f"verify takes {' or '.join(map(str, self.widths))} ids, got {width}")
        return "score" if width == self.score_chunk else f"score_w{width}"

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
    def of_asset(cls, asset: str | os.PathLike | OpenedAsset) -> DecodeSpec:
        """The spec an asset's metadata.json holds (a path is opened without hashing its
        files: `open_asset`), refused whole if it was damaged; one part of an asset exported
        range by range is named as such (it runs only with the others)."""
        opened = open_asset(asset, verify=False)
        whole = opened.path.absolute().parent
        if whole.suffix == ".aimodel" and _is_part_of(whole, opened.path.name):
            raise ValueError(
                f"{asset} is one layer range of the asset {whole}, exported range by range: "
                f"it runs with the others, so load {whole}"
            )
        decode = zoo_section(opened).get("decode")
        if decode is None:
            raise ValueError(
                f"{opened.path} was not exported by zoo.core.export.functions.export_decoder"
            )
        try:
            return cls(**decode)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"{opened.path}/metadata.json: its decode spec is damaged ({error}); export again"
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
        input name -> `zoo.core.asset.sidecar.SidecarTable`) for `ids` `[1, T]`."""
        return {name: tables[name].lookup(ids) for name in self.sidecars}

    def open_sidecars(self, asset: str | os.PathLike) -> dict:
        from zoo.core.asset.sidecar import SidecarTable

        return {
            name: SidecarTable(inside(asset, s.get("file"), "metadata.json's sidecar"))
            for name, s in self.sidecars.items()
        }


def _is_part_of(whole: Path, name: str) -> bool:
    """Whether the asset `whole` lists `name` among its parts (`zoo.core.export.stream`)."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
        return name in read_metadata(whole).get("parts", {})
    return False
