"""Rotary position embeddings as the released configs spell them (`rope_parameters`).

Shared by the entries whose RoPE is one of transformers' standard kinds: `default`,
`linear` (positions divided by `factor`) and `llama3` (long wavelengths divided by
`factor`, short ones kept, a smooth ramp between). Any other kind is refused by name.
"""

from __future__ import annotations

import math

import torch

from zoo.core.checkpoint import UnsupportedConfig

ROPE_TYPES = ("default", "linear", "llama3")


def rope_parameters(
    parameters: dict | None, scaling: dict | None = None, theta: float | None = None
) -> dict:
    """One `rope_parameters` dict from the spellings a config.json may use: the newer
    `rope_parameters`, or the older `rope_scaling` (with `type` or `rope_type`) beside
    `rope_theta`. Values in `rope_parameters` win, as in transformers."""
    rope = dict(parameters or scaling or {})
    if "type" in rope and "rope_type" not in rope:
        rope["rope_type"] = rope.pop("type")
    rope.setdefault("rope_type", "default")
    if theta is not None:
        rope.setdefault("rope_theta", theta)
    if rope["rope_type"] not in ROPE_TYPES:
        raise UnsupportedConfig(
            f"RoPE type {rope['rope_type']!r} is not implemented (the zoo has {ROPE_TYPES})"
        )
    return rope


def inverse_frequencies(head_dim: int, rope: dict) -> torch.Tensor:
    """Inverse frequencies `[head_dim / 2]` of a `rope_parameters` dict."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim
    inv_freq = 1.0 / rope["rope_theta"] ** exponents
    kind = rope.get("rope_type", "default")
    if kind == "linear":
        return inv_freq / rope["factor"]
    if kind == "llama3":
        factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
        context = rope["original_max_position_embeddings"]
        wavelength = 2 * math.pi / inv_freq
        scaled = torch.where(wavelength > context / low, inv_freq / factor, inv_freq)
        ramp = (context / wavelength - low) / (high - low)
        smoothed = (1 - ramp) * scaled / factor + ramp * scaled
        medium = (wavelength >= context / high) & (wavelength <= context / low)
        return torch.where(medium, smoothed, scaled)
    return inv_freq


def rope_cos_sin(
    positions: torch.Tensor, inv_freq: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin `[B, 1, T, D]` for positions `[B, T]` (both halves of the head)."""
    freqs = positions[:, None, :, None].float() * inv_freq
    angles = torch.cat([freqs, freqs], -1)
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on `[B, H, T, D]`, the two halves of each head rotated (transformers' layout)."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin
