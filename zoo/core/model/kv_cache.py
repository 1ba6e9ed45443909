"""One attention layer's KV cache: the two states, their names, shapes and stored layout,
and the write of each step through the KV strategy the model was built with.

The layer owns its cache; the model's `state_shapes()` is the union of its layers' caches
(and, for hybrids, their recurrent states), and `zoo.core.model.layout` stores the keys
transposed by setting `keys_transposed` on the caches, not on the layers.

An int8 cache (`set_kv_cache(model, "int8")`) stores each head's key (and value) of a
position as int8 codes with one float32 scale (its largest magnitude / 127): the codes in
`k_cache_{layer}` (int8), the scales in `k_scale_{layer}` (`[1, H, T, 1]`, `[1, H, 1, T]`
beside transposed keys). Each step quantizes what it writes and attends over the whole
cache dequantized, so eager and the asset do the same arithmetic (where their float32 last
bits differ at a rounding boundary a code moves a step, and later layers carry it on:
docs/guides/compression.md#an-8-bit-kv-cache); a position costs `head_dim + 4` bytes a
head for keys and again for values, against `4 * head_dim` in fp32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from zoo.core.asset.decode_spec import KV_CACHES
from zoo.core.asset.kv_writes import KVStrategy
from zoo.core.checkpoint.rope import rotate
from zoo.core.model.layers import attend


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
    keys_transposed: bool = False  # keys stored `[B, H, D, T]` (zoo.core.model.layout)
    stored: Literal["fp32", "int8"] = "fp32"  # int8: codes and a scale a head and position

    @property
    def names(self) -> tuple[str, str]:
        return f"k_cache_{self.layer}", f"v_cache_{self.layer}"

    @property
    def scale_names(self) -> tuple[str, str]:
        """The int8 cache's scale states (none in fp32)."""
        return f"k_scale_{self.layer}", f"v_scale_{self.layer}"

    def shapes(self) -> dict[str, tuple[int, ...]]:
        shape = self.strategy.cache_shape(self.kv_heads, self.capacity, self.head_dim)
        keys, values = self.names
        shapes = {keys: transposed_keys(shape) if self.keys_transposed else shape, values: shape}
        if self.stored == "int8":
            row = (*shape[:-1], 1)  # one scale a head and position
            key_scale, value_scale = self.scale_names
            shapes[key_scale] = transposed_keys(row) if self.keys_transposed else row
            shapes[value_scale] = row
        return shapes

    def dtypes(self) -> dict[str, str]:
        """The states not stored float32, by name."""
        return dict.fromkeys(self.names, "int8") if self.stored == "int8" else {}

    def write(self, states: dict, keys: torch.Tensor, values: torch.Tensor, step: dict):
        """Store this step's keys and values (`[B, H, T, D]`); returns what to attend over."""
        key_state, value_state = (states[name] for name in self.names)
        if self.stored == "fp32":
            return (
                self.strategy.write_keys(key_state, keys, step, self.keys_transposed),
                self.strategy.write(value_state, values, step),
            )
        key_scales, value_scales = (states[name] for name in self.scale_names)
        (key_codes, key_scale), (value_codes, value_scale) = map(int8_rows, (keys, values))
        transposed = self.keys_transposed
        return (
            self.strategy.write_keys(key_state, key_codes, step, transposed).float()
            * self.strategy.write_keys(key_scales, key_scale, step, transposed),
            self.strategy.write(value_state, value_codes, step).float()
            * self.strategy.write(value_scales, value_scale, step),
        )

    def read(self, states: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values another layer wrote earlier in the same step."""
        caches = tuple(self.strategy.read(states[name]) for name in self.names)
        if self.stored == "fp32":
            return caches
        scales = (self.strategy.read(states[name]) for name in self.scale_names)
        return tuple(cache.float() * scale for cache, scale in zip(caches, scales, strict=True))

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


def int8_rows(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Codes (integers in [-127, 127], float32 for the write) and scales `[..., 1]` of
    each row of `rows`: the row's largest magnitude / 127, so the row round-trips within
    half a step."""
    scale = rows.abs().amax(-1, keepdim=True).clamp(min=1e-12) / 127
    return torch.round(rows / scale).clamp(-127, 127), scale


def set_kv_cache(model: nn.Module, stored: str) -> None:
    """Store every KV cache of `model` as `stored` ("fp32" or "int8"), in place, before
    export; the model's states and what it computes change with it."""
    if stored not in KV_CACHES:
        raise ValueError(f"the KV cache is stored as one of {list(KV_CACHES)}, not {stored!r}")
    for cache in kv_caches(model):
        cache.stored = stored


def kv_cache_of(model: nn.Module) -> str:
    """How `model`'s KV caches are stored ("fp32" for a model without one)."""
    return next((cache.stored for cache in kv_caches(model)), "fp32")


def kv_caches(model: nn.Module) -> list[KVCache]:
    """Every layer's cache (a shared cache once per holder)."""
    return [m.cache for m in model.modules() if isinstance(getattr(m, "cache", None), KVCache)]
