"""KV cache write strategies: how a decode step stores its new key/value column.

Which formulation a decode graph uses decides whether it runs at all on a given Core AI
backend, and how fast. Each strategy here has two halves that belong together:

- the graph side, `write(cache, column, step)`, called by an attention layer inside the
  exported module: stores `column` and returns the keys (or values) to attend over;
- the host side, `host_inputs(position, capacity)`: the small per-step inputs the decode loop
  passes (`in_step`, `write_mask`, `position_ids`, `attn_mask`), so the loop itself does not
  care which strategy the asset was exported with.

Cache layout, the same for every strategy: `[1, kv_heads, capacity, head_dim]` float32, one
state per layer for keys and one for values; column `p` holds the token at position `p`
(shift-append keeps the newest token in the last column instead, and packed strategies add a
leading slot dimension). Attention masks are additive `[1, 1, 1, keys]` arrays (0 or -inf),
built on the host from positions: deriving them in-graph from a runtime index is one of the
formulations reported to crash MPSGraph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

NEG_INF = float("-inf")


def causal_mask(valid: np.ndarray) -> np.ndarray:
    """An additive `[1, 1, rows, n]` mask from booleans `[n]` or `[rows, n]` (True: attend)."""
    valid = np.atleast_2d(valid)
    return np.where(valid, 0.0, NEG_INF).astype(np.float32).reshape(1, 1, *valid.shape)


def chunk_rows(position: int, capacity: int, length: int) -> np.ndarray:
    """`[length, capacity]` booleans: query i (at position + i) sees columns <= position + i."""
    return np.arange(capacity)[None, :] <= (position + np.arange(length))[:, None]


def column_mask(capacity: int, column: int) -> np.ndarray:
    """A one-hot float32 `[capacity]` vector: 1.0 at the column to write."""
    mask = np.zeros(capacity, np.float32)
    mask[column] = 1.0
    return mask


@dataclass(frozen=True)
class KVStrategy:
    """The base of every strategy. Subclasses set the class variables and `write`."""

    name: ClassVar[str]
    title: ClassVar[str]
    step_inputs: ClassVar[tuple[str, ...]]  # per-step inputs, in forward() order
    stateful: ClassVar[bool] = True  # False: the caches are plain inputs and outputs
    dynamic_context: ClassVar[bool] = False  # True: `position_ids` length is dynamic
    isolation_only: ClassVar[bool] = False  # True: a repro, not a way to decode
    chunks: ClassVar[bool] = False  # True: can write several columns at once (prefill)

    def write(
        self, cache: torch.Tensor, column: torch.Tensor, step: dict, time_axis: int = 2
    ) -> torch.Tensor:
        """Store `column` in `cache`; `time_axis` 3 is a key cache stored `[B, H, D, T]`
        (`zoo.core.layout`), which only the chunk strategies support."""
        raise NotImplementedError

    def write_keys(
        self, cache: torch.Tensor, keys: torch.Tensor, step: dict, transposed: bool
    ) -> torch.Tensor:
        """`write` for a key cache, stored `[B, H, D, T]` when `transposed`
        (`zoo.core.layout`); `keys` come as `[B, H, T, D]` either way."""
        if transposed:
            return self.write(cache, keys.transpose(2, 3), step, time_axis=3)
        return self.write(cache, keys, step)

    def read(self, cache: torch.Tensor) -> torch.Tensor:
        """The keys (or values) a layer that shares another layer's cache attends over."""
        return cache

    def host_inputs(self, position: int, capacity: int) -> dict[str, np.ndarray]:
        """The per-step inputs for a one-token decode step at `position`.

        Strategies with `chunks = True` also take `length`: the inputs of a step that
        writes `length` columns from `position` on (a prefill chunk).
        """
        self.check_position(position, capacity)
        return {
            "in_step": np.array([position], np.int32),
            "attn_mask": causal_mask(np.arange(capacity) <= position),
        }

    def max_positions(self, capacity: int) -> int:
        return capacity

    def check_position(self, position: int, capacity: int) -> None:
        if not 0 <= position < self.max_positions(capacity):
            raise IndexError(
                f"position {position} is past the context: the {self.name} cache holds "
                f"{self.max_positions(capacity)} positions; export with a longer context"
            )

    def example_step(self, capacity: int, position: int = 1) -> dict[str, torch.Tensor]:
        """Example step tensors for torch.export (the host inputs of one step)."""
        return {k: torch.from_numpy(v) for k, v in self.host_inputs(position, capacity).items()}

    def cache_shape(self, kv_heads: int, capacity: int, head_dim: int) -> tuple[int, ...]:
        return (1, kv_heads, capacity, head_dim)

    def dynamic_shapes(self, capacity: int) -> dict[str, dict] | None:
        return None


def _slice_write(cache: torch.Tensor, column: torch.Tensor, position) -> None:
    cache[:, :, position : position + 1, :] = column


# --8<-- [start:runtime-index]
@dataclass(frozen=True)
class RuntimeIndexSliceWrite(KVStrategy):
    """`cache[:, :, p:p+1] = column` at `p = in_step.item()`: Apple's fixed-shape recipe."""

    name: ClassVar[str] = "runtime-index"
    title: ClassVar[str] = "slice_update at a runtime index (in_step input)"
    step_inputs: ClassVar[tuple[str, ...]] = ("in_step", "attn_mask")

    chunks: ClassVar[bool] = True

    def write(self, cache, column, step, time_axis=2):
        position, length = step["in_step"].item(), column.shape[time_axis]
        torch._check(position >= 0)
        torch._check(position + length <= cache.shape[time_axis])
        if time_axis == 2:
            cache[:, :, position : position + length, :] = column
        else:  # keys stored transposed: [B, H, D, T]
            cache[:, :, :, position : position + length] = column
        return cache

    def host_inputs(self, position, capacity, length=1):
        self.check_position(position + length - 1, capacity)
        return {
            "in_step": np.array([position], np.int32),
            "attn_mask": causal_mask(chunk_rows(position, capacity, length)),
        }


# --8<-- [end:runtime-index]


# --8<-- [start:ring-buffer]
@dataclass(frozen=True)
class RingBufferWrite(RuntimeIndexSliceWrite):
    """A sliding window of `window` slots: write at `p % window`, attend to filled slots.

    Exact for one-token decode: attention is a sum over keys, so their order in the cache
    does not matter, and every filled slot holds one of the last `window` positions.
    """

    name: ClassVar[str] = "ring-buffer"
    title: ClassVar[str] = "sliding-window ring buffer (runtime index p % W)"
    chunks: ClassVar[bool] = False  # a chunk longer than W would overwrite what it needs
    window: int = 0  # 0: the cache capacity

    def host_inputs(self, position, capacity):
        window = self.window or capacity
        if window > capacity:
            raise ValueError(f"window {window} is larger than the cache ({capacity})")
        filled = np.arange(capacity) < min(position + 1, window)
        return {
            "in_step": np.array([position % window], np.int32),
            "attn_mask": causal_mask(filled),
        }

    def max_positions(self, capacity):
        return 2**31 - 1  # a ring never fills up


# --8<-- [end:ring-buffer]


# --8<-- [start:shape-symint]
@dataclass(frozen=True)
class ShapeSymintWrite(KVStrategy):
    """The write position comes from a shape: `position_ids.shape[-1] - 1` (dynamic).

    One dynamic graph serves every length; attention reads only the filled prefix, so no
    mask is needed. torch.export guards against the full-length slice, so a cache of
    capacity C holds C - 1 positions.
    """

    name: ClassVar[str] = "shape-symint"
    title: ClassVar[str] = "slice_update at a shape symint (dynamic context)"
    step_inputs: ClassVar[tuple[str, ...]] = ("position_ids",)
    dynamic_context: ClassVar[bool] = True

    def write(self, cache, column, step):
        length = step["position_ids"].shape[-1]
        torch._check(length <= cache.shape[2])
        _slice_write(cache, column, length - 1)
        return cache.narrow(2, 0, length)

    def host_inputs(self, position, capacity):
        self.check_position(position, capacity)
        return {"position_ids": np.arange(position + 1, dtype=np.int32).reshape(1, -1)}

    def max_positions(self, capacity):
        return capacity - 1

    def dynamic_shapes(self, capacity):
        return {"position_ids": {1: torch.export.Dim("context", min=1, max=capacity - 1)}}


# --8<-- [end:shape-symint]


# --8<-- [start:host-cache]
@dataclass(frozen=True)
class HostCache(KVStrategy):
    """No state: past K/V come in as inputs, the new column goes out, the host stores it.

    In-graph there is only `torch.cat` and a masked attention over past + current; no
    indexed write at all. Costs a host round-trip of the whole cache every step.
    """

    name: ClassVar[str] = "host-cache"
    title: ClassVar[str] = "host cache (cat + masked attention, no state)"
    step_inputs: ClassVar[tuple[str, ...]] = ("attn_mask",)
    stateful: ClassVar[bool] = False

    def write(self, cache, column, step):
        return torch.cat([cache, column], dim=2)

    def host_inputs(self, position, capacity):
        self.check_position(position, capacity)
        past = np.arange(capacity) < position  # the current token is the extra last key
        return {"attn_mask": causal_mask(np.append(past, True))}

    @staticmethod
    def store(cache: np.ndarray, column: np.ndarray, position: int) -> None:
        """The host's half of the write: put the step's new column at its position."""
        cache[:, :, position : position + 1, :] = column


# --8<-- [end:host-cache]


# --8<-- [start:input-mask-blend]
@dataclass(frozen=True)
class InputMaskBlend(KVStrategy):
    """`cache = cache * (1 - m) + column * m` with a one-hot `write_mask` from the host.

    The reported escape from the MPSGraph crash: no index derived from data in-graph.
    """

    name: ClassVar[str] = "input-mask-blend"
    title: ClassVar[str] = "blend with a one-hot write_mask input"
    step_inputs: ClassVar[tuple[str, ...]] = ("write_mask", "attn_mask")

    chunks: ClassVar[bool] = True

    def write(self, cache, column, step, time_axis=2):
        capacity, length = cache.shape[time_axis], column.shape[time_axis]
        along_time = [1, 1, 1, 1]
        along_time[time_axis] = capacity  # broadcast a [capacity] mask along the time axis
        if length == 1:  # the formulation reported to run on the beta GPU
            mask = step["write_mask"].reshape(along_time)
            cache.copy_(cache * (1 - mask) + column * mask)
        else:  # a prefill chunk: one one-hot row per column written
            rows = step["write_mask"].reshape(length, capacity)
            written = rows.sum(0).reshape(along_time)
            scatter = "tc,bhtd->bhcd" if time_axis == 2 else "tc,bhdt->bhdc"
            cache.copy_(cache * (1 - written) + torch.einsum(scatter, rows, column))
        return cache

    def host_inputs(self, position, capacity, length=1):
        self.check_position(position + length - 1, capacity)
        rows = np.stack([column_mask(capacity, position + i) for i in range(length)])
        return {
            "write_mask": rows[0] if length == 1 else rows,
            "attn_mask": causal_mask(chunk_rows(position, capacity, length)),
        }


# --8<-- [end:input-mask-blend]


# --8<-- [start:in-graph-one-hot]
@dataclass(frozen=True)
class InGraphOneHotBlend(KVStrategy):
    """The same blend, with the one-hot built in-graph: `arange(C) == in_step`."""

    name: ClassVar[str] = "in-graph-one-hot"
    title: ClassVar[str] = "blend with a one-hot built in-graph (arange == in_step)"
    step_inputs: ClassVar[tuple[str, ...]] = ("in_step", "attn_mask")

    def write(self, cache, column, step):
        columns = torch.arange(cache.shape[2], dtype=torch.int32)
        mask = (columns == step["in_step"]).to(cache.dtype).reshape(1, 1, -1, 1)
        cache.copy_(cache * (1 - mask) + column * mask)
        return cache


# --8<-- [end:in-graph-one-hot]


@dataclass(frozen=True)
class ConstantMaskBlend(KVStrategy):
    """The blend with a one-hot fixed at export time (column 0): an isolation cell only."""

    name: ClassVar[str] = "constant-mask-blend"
    title: ClassVar[str] = "blend with a constant (compile-time) one-hot"
    step_inputs: ClassVar[tuple[str, ...]] = ("attn_mask",)
    isolation_only: ClassVar[bool] = True

    def write(self, cache, column, step):
        mask = torch.zeros(1, 1, cache.shape[2], 1, dtype=cache.dtype)
        mask[:, :, 0] = 1.0
        cache.copy_(cache * (1 - mask) + column * mask)
        return cache

    def host_inputs(self, position, capacity):
        self.check_position(position, capacity)
        return {"attn_mask": causal_mask(np.arange(capacity) == 0)}


# --8<-- [start:shift-append]
@dataclass(frozen=True)
class ShiftAppend(KVStrategy):
    """`cache = cat(cache[1:], column)`: the newest token is always the last column."""

    name: ClassVar[str] = "shift-append"
    title: ClassVar[str] = "shift-append (cat(cache[1:], column))"
    step_inputs: ClassVar[tuple[str, ...]] = ("attn_mask",)

    def write(self, cache, column, step):
        cache.copy_(torch.cat([cache[:, :, 1:], column], dim=2))
        return cache

    def host_inputs(self, position, capacity):
        filled = np.arange(capacity) >= capacity - 1 - position
        return {"attn_mask": causal_mask(filled)}

    def max_positions(self, capacity):
        return 2**31 - 1  # old tokens fall off the front: a sliding window of `capacity`


# --8<-- [end:shift-append]


# --8<-- [start:packed-slot]
@dataclass(frozen=True)
class PackedSlotBlend(InputMaskBlend):
    """Input-mask blend into slot `slot` (fixed at export) of a `[slots, 1, H, C, D]` state.

    `form="view"` writes through the slot's view; `form="whole"` blends the whole state
    with a mask that is zero outside the slot. Both are reported to run on the beta GPU.
    """

    name: ClassVar[str] = "packed-slot-view"
    title: ClassVar[str] = "input-mask blend into one slot (view) of a packed state"
    chunks: ClassVar[bool] = False
    slots: int = 2
    slot: int = 1
    form: str = "view"

    def write(self, cache, column, step):
        mask = step["write_mask"].reshape(1, 1, -1, 1)
        if self.form == "view":
            view = cache[self.slot]
            view.copy_(view * (1 - mask) + column * mask)
        else:
            in_slot = torch.zeros(self.slots, 1, 1, 1, 1, dtype=cache.dtype)
            in_slot[self.slot] = 1.0
            full = in_slot * mask  # [slots, 1, 1, C, 1]
            cache.copy_(cache * (1 - full) + column.unsqueeze(0) * full)
        return cache[self.slot]

    def cache_shape(self, kv_heads, capacity, head_dim):
        return (self.slots, 1, kv_heads, capacity, head_dim)


# --8<-- [end:packed-slot]


@dataclass(frozen=True)
class PackedSlotBlendWhole(PackedSlotBlend):
    name: ClassVar[str] = "packed-slot-whole"
    title: ClassVar[str] = "input-mask blend of a whole packed state, zero outside the slot"
    form: str = "whole"


@dataclass(frozen=True)
class RuntimeIndexDynamicContext(ShapeSymintWrite):
    """Write at `in_step.item()`, attend over a dynamic `position_ids` length.

    The seed's "runtime tensor, dynamic shapes" cell: only the write index changes from
    the shape-symint strategy.
    """

    name: ClassVar[str] = "runtime-index-dynamic"
    title: ClassVar[str] = "slice_update at a runtime index, dynamic context"
    step_inputs: ClassVar[tuple[str, ...]] = ("in_step", "position_ids")

    def write(self, cache, column, step):
        length = step["position_ids"].shape[-1]
        torch._check(length <= cache.shape[2])
        position = step["in_step"].item()
        torch._check(position >= 0)
        torch._check(position < cache.shape[2])
        _slice_write(cache, column, position)
        return cache.narrow(2, 0, length)

    def host_inputs(self, position, capacity):
        return {
            "in_step": np.array([position], np.int32),
            **super().host_inputs(position, capacity),
        }


@dataclass(frozen=True)
class IndexPutWrite(RuntimeIndexSliceWrite):
    """`cache[:, :, in_step] = column`: lowers to index_put; kills the Linux runtime."""

    name: ClassVar[str] = "index-put"
    title: ClassVar[str] = "index_put at a runtime index (crash repro)"
    isolation_only: ClassVar[bool] = True
    chunks: ClassVar[bool] = False

    def write(self, cache, column, step):
        cache[:, :, step["in_step"]] = column
        return cache


STRATEGIES: dict[str, KVStrategy] = {
    s.name: s
    for s in (
        ShapeSymintWrite(),
        RuntimeIndexDynamicContext(),
        RuntimeIndexSliceWrite(),
        HostCache(),
        InputMaskBlend(),
        InGraphOneHotBlend(),
        ShiftAppend(),
        PackedSlotBlend(),
        PackedSlotBlendWhole(),
        RingBufferWrite(),
        ConstantMaskBlend(),
        IndexPutWrite(),
    )
}


def get_strategy(name: str) -> KVStrategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown KV strategy {name!r}; known: {sorted(STRATEGIES)}") from None
