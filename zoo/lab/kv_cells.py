"""The KV-write isolation cells: every formulation of a cache write the isolation matrix
runs (docs/gotchas/mpsgraph-kv-write.md), beside the two that zoo decoders export with
(`zoo.core.asset.kv_writes`). Some are ways to decode (a ring buffer, a dynamic context), some are
repros of a crash (`isolation_only`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from zoo.core.asset.kv_writes import (
    InputMaskBlend,
    KVStrategy,
    RuntimeIndexSliceWrite,
    causal_mask,
    register_strategy,
)


def _slice_write(cache: torch.Tensor, column: torch.Tensor, position) -> None:
    cache[:, :, position : position + 1, :] = column


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


@dataclass(frozen=True)
class PackedSlotBlendWhole(PackedSlotBlend):
    name: ClassVar[str] = "packed-slot-whole"
    title: ClassVar[str] = "input-mask blend of a whole packed state, zero outside the slot"
    form: str = "whole"


@dataclass(frozen=True)
class RuntimeIndexDynamicContext(ShapeSymintWrite):
    """Write at `in_step.item()`, attend over a dynamic `position_ids` length.

    The report's "runtime tensor, dynamic shapes" cell: only the write index changes from
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


# Every cell of the isolation matrix, in the order its table shows them.
CELLS: dict[str, KVStrategy] = {
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
for _cell in CELLS.values():  # findable by name (zoo.core.asset.kv_writes.get_strategy)
    register_strategy(_cell)
