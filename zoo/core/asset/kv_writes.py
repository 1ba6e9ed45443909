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

The host side needs numpy only (the decode loop, `zoo generate`, imports no torch); the graph
side imports torch when an export traces it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

if TYPE_CHECKING:
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
        (`zoo.core.model.layout`), which only the chunk strategies support."""
        raise NotImplementedError

    def write_keys(
        self, cache: torch.Tensor, keys: torch.Tensor, step: dict, transposed: bool
    ) -> torch.Tensor:
        """`write` for a key cache, stored `[B, H, D, T]` when `transposed`
        (`zoo.core.model.layout`); `keys` come as `[B, H, T, D]` either way."""
        if transposed:
            return self.write(cache, keys.transpose(2, 3), step, time_axis=3)
        return self.write(cache, keys, step)

    def check_serves(self, model: str) -> None:
        """A zoo decoder writes prefill chunks into state caches: refuse other strategies."""
        if not (self.stateful and self.chunks):
            raise ValueError(
                f"KV strategy {self.name!r} cannot serve {model}: it needs a stateful "
                "strategy that writes prefill chunks (runtime-index or input-mask-blend)"
            )

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
                f"{self.max_positions(capacity)} positions; export with a larger --capacity"
            )

    def example_step(self, capacity: int, position: int = 1) -> dict[str, torch.Tensor]:
        """Example step tensors for torch.export (the host inputs of one step)."""
        import torch

        return {k: torch.from_numpy(v) for k, v in self.host_inputs(position, capacity).items()}

    def cache_shape(self, kv_heads: int, capacity: int, head_dim: int) -> tuple[int, ...]:
        return (1, kv_heads, capacity, head_dim)

    def dynamic_shapes(self, capacity: int) -> dict[str, dict] | None:
        return None


@dataclass(frozen=True)
class RuntimeIndexSliceWrite(KVStrategy):
    """`cache[:, :, p:p+1] = column` at `p = in_step.item()`: Apple's fixed-shape recipe."""

    name: ClassVar[str] = "runtime-index"
    title: ClassVar[str] = "slice_update at a runtime index (in_step input)"
    step_inputs: ClassVar[tuple[str, ...]] = ("in_step", "attn_mask")

    chunks: ClassVar[bool] = True

    def write(self, cache, column, step, time_axis=2):
        import torch

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
            # a matmul, not torch.einsum: the runtime computes einsum("tc,bhtd->bhcd")
            # wrong when t == d (measured, docs/zoo/gemma4.md); the matmul is exact
            placed = rows.transpose(0, 1) @ column if time_axis == 2 else column @ rows
            cache.copy_(cache * (1 - written) + placed)
        return cache

    def host_inputs(self, position, capacity, length=1):
        self.check_position(position + length - 1, capacity)
        rows = np.stack([column_mask(capacity, position + i) for i in range(length)])
        return {
            "write_mask": rows[0] if length == 1 else rows,
            "attn_mask": causal_mask(chunk_rows(position, capacity, length)),
        }


# The strategies a zoo decoder exports with.
STRATEGIES: dict[str, KVStrategy] = {
    s.name: s for s in (RuntimeIndexSliceWrite(), InputMaskBlend())
}
# Every strategy a name can find: the decode strategies, and what others register (the
# isolation cells behind the gotcha pages register theirs from `zoo.lab.kv_cells`).
_REGISTERED: dict[str, KVStrategy] = dict(STRATEGIES)


def register_strategy(strategy: KVStrategy) -> KVStrategy:
    """Make `strategy` findable by its name (`get_strategy`), e.g. an isolation cell."""
    _REGISTERED[strategy.name] = strategy
    return strategy


def get_strategy(name: str) -> KVStrategy:
    """A strategy by name: a decode strategy, or one registered with `register_strategy`."""
    if name not in _REGISTERED:
        raise ValueError(
            f"unknown KV strategy {name!r}; known: {sorted(_REGISTERED)} (the isolation "
            "cells register on `import zoo.lab.kv_cells`)"
        )
    return _REGISTERED[name]
