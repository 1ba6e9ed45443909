"""One attention layer's KV cache: the two states, their names, shapes and stored layout,
and the write of each step through the KV strategy the model was built with.

The layer owns its cache; the model's `state_shapes()` is the union of its layers' caches
(and, for hybrids, their recurrent states), and `zoo.core.layout` stores the keys
transposed by setting `keys_transposed` on the caches, not on the layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from zoo.core.kv import KVStrategy
from zoo.core.layers import attend
from zoo.core.rope import rotate


def transposed_keys(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The `[B, H, D, T]` shape of a key cache whose values are `[B, H, T, D]`."""
    *lead, time, dim = shape
    return (*lead, dim, time)


@dataclass(eq=False)
class KVCache:
    """The key and value cache states `k_cache_{layer}` / `v_cache_{layer}`.

    A layer that shares another layer's cache (Gemma 4's KV sharing) holds a `KVCache` of the
    source layer's number and only reads it."""

    strategy: KVStrategy
    layer: int
    kv_heads: int
    capacity: int
    head_dim: int
    keys_transposed: bool = False  # keys stored `[B, H, D, T]` (zoo.core.layout)

    @property
    def names(self) -> tuple[str, str]:
        return f"k_cache_{self.layer}", f"v_cache_{self.layer}"

    def shapes(self) -> dict[str, tuple[int, ...]]:
        shape = self.strategy.cache_shape(self.kv_heads, self.capacity, self.head_dim)
        keys, values = self.names
        return {keys: transposed_keys(shape) if self.keys_transposed else shape, values: shape}

    def write(self, states: dict, keys: torch.Tensor, values: torch.Tensor, step: dict):
        """Store this step's keys and values (`[B, H, T, D]`); returns what to attend over."""
        key_state, value_state = (states[name] for name in self.names)
        return (
            self.strategy.write_keys(key_state, keys, step, self.keys_transposed),
            self.strategy.write(value_state, values, step),
        )

    def read(self, states: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values another layer wrote earlier in the same step."""
        return tuple(self.strategy.read(states[name]) for name in self.names)

    def attend(self, q, keys, values, mask, scale=None, sinks=None) -> torch.Tensor:
        transposed = self.keys_transposed
        return attend(q, keys, values, mask, scale, keys_transposed=transposed, sinks=sinks)

    def rope_attend(
        self, states: dict, q, k, v, cos, sin, step: dict, mask, scale=None, sinks=None
    ):
        """The tail of a plain attention layer: q `[B, T, heads, D]`, k and v `[B, T, KV
        heads, D]`; RoPE on q and k, k and v written into this cache, q attending over it.
        Returns `[B, T, heads * D]`, ready for the output projection."""
        batch, length = q.shape[:2]
        keys = rotate(k.transpose(1, 2), cos, sin)
        keys, values = self.write(states, keys, v.transpose(1, 2), step)
        out = self.attend(rotate(q.transpose(1, 2), cos, sin), keys, values, mask, scale, sinks)
        return out.transpose(1, 2).reshape(batch, length, -1)


def kv_caches(model: nn.Module) -> list[KVCache]:
    """Every layer's cache (a shared cache once per holder)."""
    return [m.cache for m in model.modules() if isinstance(getattr(m, "cache", None), KVCache)]
