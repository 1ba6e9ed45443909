"""Rotary position embeddings as the released configs spell them (`rope_parameters`).

Shared by the entries whose RoPE is one of transformers' standard kinds: `default`,
`linear` (positions divided by `factor`) and `llama3` (long wavelengths divided by
`factor`, short ones kept, a smooth ramp between); `yarn` (GPT-OSS: the same idea with its
ramp between `beta_fast` and `beta_slow` rotations, and cos and sin scaled by
`attention_scaling`); `longrope` (Phi-3.5, Phi-4-mini) for the
entries that name it: its short factors, which transformers uses while a sequence stays
within `original_max_position_embeddings` (the entry keeps its cache there). Any other kind
is refused by name. `rotate` rotates the first `cos.shape[-1]` dims of a head and passes
the rest through (partial rotary, Phi-4-mini's 0.75).
"""

from __future__ import annotations

import math

import torch

from zoo.core.io.files import UnsupportedConfig

ROPE_TYPES = ("default", "linear", "llama3")


def rope_parameters(
    parameters: dict | None,
    scaling: dict | None = None,
    theta: float | None = None,
    types: tuple[str, ...] = ROPE_TYPES,
) -> dict:
    """One `rope_parameters` dict from the spellings a config.json may use: the newer
    `rope_parameters`, or the older `rope_scaling` (with `type` or `rope_type`) beside
    `rope_theta`. Values in `rope_parameters` win, as in transformers. `types`: the kinds
    the calling entry implements."""
    rope = dict(parameters or scaling or {})
    if "type" in rope and "rope_type" not in rope:
        rope["rope_type"] = rope.pop("type")
    rope.setdefault("rope_type", "default")
    if theta is not None:
        rope.setdefault("rope_theta", theta)
    if rope["rope_type"] not in types:
        raise UnsupportedConfig(
            f"RoPE type {rope['rope_type']!r} is not implemented (this entry has {types})"
        )
    check_rope_numbers(rope)
    return rope


# the numbers of a `rope_parameters` dict that must be finite and above zero (a factor of 0
# or a NaN theta exports fine and decodes nonsense)
POSITIVE_ROPE_NUMBERS = (
    "rope_theta",
    "factor",
    "low_freq_factor",
    "high_freq_factor",
    "original_max_position_embeddings",
    "partial_rotary_factor",
    "attention_factor",
)


def check_rope_numbers(rope: dict, where: str = "rope_parameters") -> None:
    """Refuse a RoPE number that cannot be right, naming it: checked wherever a config
    spells RoPE (the top level, `rope_scaling`, `rope_parameters` per layer type)."""
    for key in POSITIVE_ROPE_NUMBERS:
        value = rope.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"config.json: {where} {key}={value!r} (expected a number)")
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"config.json: {where} {key}={value!r} (expected a number above 0)")
    for key in ("short_factor", "long_factor"):
        values = rope.get(key)
        if values is not None and not (
            isinstance(values, list)
            and all(
                isinstance(v, int | float)
                and not isinstance(v, bool)
                and math.isfinite(v)
                and v > 0
                for v in values
            )
        ):
            raise ValueError(f"config.json: {where} {key} must be a list of numbers above 0")
    low, high = rope.get("low_freq_factor"), rope.get("high_freq_factor")
    if rope.get("rope_type") == "llama3" and low is not None and high is not None and high <= low:
        raise ValueError(
            f"config.json: {where} high_freq_factor={high} must be above low_freq_factor={low}"
        )


def inverse_frequencies(head_dim: int, rope: dict) -> torch.Tensor:
    """Inverse frequencies `[head_dim / 2]` of a `rope_parameters` dict."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim
    inv_freq = 1.0 / rope["rope_theta"] ** exponents
    kind = rope.get("rope_type", "default")
    if kind == "linear":
        return inv_freq / rope["factor"]
    if kind == "longrope":  # the short factors: the entry keeps its cache where they apply
        return inv_freq / torch.tensor(rope["short_factor"], dtype=torch.float32)
    if kind == "yarn":  # interpolated where wavelengths are long, kept where short, a ramp
        factor, original = rope["factor"], rope["original_max_position_embeddings"]
        base, dim = rope["rope_theta"], head_dim
        low, high = (
            dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))
            for rotations in (rope.get("beta_fast") or 32, rope.get("beta_slow") or 1)
        )
        if rope.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        high = high + 0.001 if low == high else high
        ramp = ((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)
        kept = 1 - ramp  # 1: extrapolate (the frequency as it is), 0: interpolate (/ factor)
        return inv_freq / factor * (1 - kept) + inv_freq * kept
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


def attention_scaling(rope: dict, max_position_embeddings: int) -> float:
    """What cos and sin are multiplied by: 1, or longrope's `attention_factor` (by default
    `sqrt(1 + ln(s) / ln(original))` for the context stretch `s` = max / original positions,
    as transformers computes it)."""
    if rope.get("rope_type") == "yarn":  # 0.1 ln(factor) + 1, or mscale's ratio
        if rope.get("attention_factor") is not None:
            return float(rope["attention_factor"])

        def mscale(scale: float, times: float = 1.0) -> float:
            return 1.0 if scale <= 1 else 0.1 * times * math.log(scale) + 1.0

        factor = rope["factor"]
        if rope.get("mscale") and rope.get("mscale_all_dim"):
            return mscale(factor, rope["mscale"]) / mscale(factor, rope["mscale_all_dim"])
        return mscale(factor)
    if rope.get("rope_type") != "longrope":
        return 1.0
    if rope.get("attention_factor") is not None:
        return float(rope["attention_factor"])
    original = rope["original_max_position_embeddings"]
    stretch = rope.get("factor") or max_position_embeddings / original
    return 1.0 if stretch <= 1.0 else math.sqrt(1 + math.log(stretch) / math.log(original))


def rope_cos_sin(
    positions: torch.Tensor, inv_freq: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin `[B, 1, T, D]` for positions `[B, T]` (both halves of the head)."""
    freqs = positions[:, None, :, None].float() * inv_freq
    angles = torch.cat([freqs, freqs], -1)
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on `[B, H, T, D]`, the two halves of each head rotated (transformers' layout);
    with cos and sin narrower than the head (partial rotary), its first dims only."""
    rotary = cos.shape[-1]
    if rotary < x.shape[-1]:
        return torch.cat([rotate(x[..., :rotary], cos, sin), x[..., rotary:]], dim=-1)
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin
