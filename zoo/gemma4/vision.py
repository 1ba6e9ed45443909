"""Gemma 4's vision encoder, re-authored for export to Core AI: image patches in, the
decoder's soft tokens out (what transformers 5.23 `Gemma4Model.get_image_features` computes;
the parity tests hold it to that), for a fixed number of patches.

The image processor (`zoo.core.host.media`, on the host) cuts an image into `patch_size`-pixel
patches, at most `max_soft_tokens * pooling_kernel_size**2` of them, and pads the rest with
position (-1, -1). One function then computes, in order:
- each patch's pixels (rescaled to [-1, 1]) projected, plus a learned embedding of its x
  and of its y position;
- encoder layers: bidirectional attention over the real patches, with *axial* RoPE (the
  first half of each head rotates by x, the second by y), q/k RMS-normed, no scaling, a
  value norm without scale, sandwich norms; linears optionally clipped (E2B/E4B);
- average pooling of each `k x k` block of patches into one soft token, times
  sqrt(width) (padding patches count zero), then the optional standardisation;
- `embed_vision`: an RMS norm without scale and a projection to the decoder's width.
The soft tokens of the real patches come first; the host keeps `num_soft_tokens` rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from zoo.core.checkpoint.weights import build_and_load
from zoo.core.export.components import image_processor_settings, token_text, vision_config_of
from zoo.core.io.files import read_json
from zoo.gemma4.model import RMSNorm, gelu_tanh


@dataclass
class VisionConfig:
    """config.json's `vision_config` (transformers' `Gemma4VisionConfig` fields) and the
    image processor's settings (preprocessor_config.json), and the decoder's width."""

    hidden_size: int = 768
    intermediate_size: int = 3072
    num_hidden_layers: int = 16
    num_attention_heads: int = 12
    num_key_value_heads: int = 12
    head_dim: int = 64
    rms_norm_eps: float = 1e-6
    patch_size: int = 16
    pooling_kernel_size: int = 3
    position_embedding_size: int = 10 * 1024
    use_clipped_linears: bool = False
    standardize: bool = False
    rope_parameters: dict = field(default_factory=lambda: {"rope_theta": 100.0})
    text_hidden_size: int = 0
    processor: dict = field(default_factory=dict)

    @property
    def max_soft_tokens(self) -> int:
        return int(self.processor.get("max_soft_tokens", 280))

    @property
    def patches(self) -> int:
        """Patches per image, padding included: the function's fixed input length."""
        return self.max_soft_tokens * self.pooling_kernel_size**2

    @classmethod
    def from_checkpoint(cls, directory: str | Path, text_hidden_size: int) -> VisionConfig:
        directory = Path(directory)
        raw = read_json(directory / "config.json")
        return cls.of(raw, text_hidden_size, image_processor_settings(directory))

    @classmethod
    def of(cls, raw: dict, text_hidden_size: int, processor: dict | None = None) -> VisionConfig:
        """From a parsed config.json (its `vision_config`) and the processor's settings."""
        settled = {"text_hidden_size": text_hidden_size, "processor": processor or {}}
        return vision_config_of(cls, raw, **settled)


class ClippableLinear(nn.Module):
    """A linear whose input and output may be clamped to stored bounds (E2B/E4B)."""

    MAY_BE_INFINITE = ("input_min", "input_max", "output_min", "output_max")

    def __init__(self, config: VisionConfig, width_in: int, width_out: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width_in, width_out, bias=False)
        self.clipped = config.use_clipped_linears
        if self.clipped:  # bounds from the checkpoint; unbounded until read
            for name, sign in (("input_min", -1), ("input_max", 1)):
                self.register_buffer(name, torch.tensor(sign * float("inf")))
            for name, sign in (("output_min", -1), ("output_max", 1)):
                self.register_buffer(name, torch.tensor(sign * float("inf")))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.clipped:
            x = torch.clamp(x, self.input_min, self.input_max)
        x = self.linear(x)
        return torch.clamp(x, self.output_min, self.output_max) if self.clipped else x


def rotate_axial(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Axial RoPE on `[1, P, heads, D]`: the first half of D by x, the second by y (each
    half rotated HF-style, its own halves swapped); cos/sin `[1, P, 2, D/4]` per axis."""
    out = []
    for axis, part in enumerate(x.chunk(2, dim=-1)):
        c = torch.cat([cos[:, :, axis], cos[:, :, axis]], -1).unsqueeze(2)
        s = torch.cat([sin[:, :, axis], sin[:, :, axis]], -1).unsqueeze(2)
        half = part.shape[-1] // 2
        rotated = torch.cat([-part[..., half:], part[..., :half]], dim=-1)
        out.append(part * c + rotated * s)
    return torch.cat(out, dim=-1)


class VisionAttention(nn.Module):
    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        self.heads, self.head_dim = config.num_attention_heads, config.head_dim
        self.kv_heads, width = config.num_key_value_heads, config.hidden_size
        self.q_proj = ClippableLinear(config, width, self.heads * self.head_dim)
        self.k_proj = ClippableLinear(config, width, self.kv_heads * self.head_dim)
        self.v_proj = ClippableLinear(config, width, self.kv_heads * self.head_dim)
        self.o_proj = ClippableLinear(config, self.heads * self.head_dim, width)
        self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
        self.v_norm = RMSNorm(self.head_dim, config.rms_norm_eps, with_scale=False)

    def forward(self, x, cos, sin, mask) -> torch.Tensor:
        batch, length, _ = x.shape
        q = self.q_norm(self.q_proj(x).reshape(batch, length, self.heads, self.head_dim))
        k = self.k_norm(self.k_proj(x).reshape(batch, length, self.kv_heads, self.head_dim))
        v = self.v_norm(self.v_proj(x).reshape(batch, length, self.kv_heads, self.head_dim))
        q = rotate_axial(q, cos, sin).transpose(1, 2)
        k = rotate_axial(k, cos, sin).transpose(1, 2)
        v = v.transpose(1, 2)
        if self.kv_heads != self.heads:
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        weights = torch.softmax(q @ k.transpose(-1, -2) + mask, dim=-1)  # scale 1.0
        out = (weights @ v).transpose(1, 2).reshape(batch, length, -1)
        return self.o_proj(out)


class VisionMLP(nn.Module):
    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        width, inner = config.hidden_size, config.intermediate_size
        self.gate_proj = ClippableLinear(config, width, inner)
        self.up_proj = ClippableLinear(config, width, inner)
        self.down_proj = ClippableLinear(config, inner, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(gelu_tanh(self.gate_proj(x)) * self.up_proj(x))


class VisionLayer(nn.Module):
    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        width, eps = config.hidden_size, config.rms_norm_eps
        self.self_attn = VisionAttention(config)
        self.mlp = VisionMLP(config)
        self.input_layernorm = RMSNorm(width, eps)
        self.post_attention_layernorm = RMSNorm(width, eps)
        self.pre_feedforward_layernorm = RMSNorm(width, eps)
        self.post_feedforward_layernorm = RMSNorm(width, eps)

    def forward(self, h, cos, sin, mask) -> torch.Tensor:
        attended = self.self_attn(self.input_layernorm(h), cos, sin, mask)
        h = h + self.post_attention_layernorm(attended)
        return h + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(h)))


class PatchEmbedder(nn.Module):
    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        width, pixels = config.hidden_size, 3 * config.patch_size**2
        self.input_proj = nn.Linear(pixels, width, bias=False)
        self.position_embedding_table = nn.Parameter(
            torch.ones(2, config.position_embedding_size, width)
        )

    def forward(self, pixels, positions, padding) -> torch.Tensor:
        h = self.input_proj(2 * (pixels - 0.5))
        clamped = positions.clamp(min=0)
        where = F.embedding(clamped[..., 0], self.position_embedding_table[0]) + F.embedding(
            clamped[..., 1], self.position_embedding_table[1]
        )
        return h + where * (~padding).unsqueeze(-1).float()


class Encoder(nn.Module):
    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(VisionLayer(config) for _ in range(config.num_hidden_layers))


class VisionTower(nn.Module):
    """transformers' `vision_tower` (its parameter names, so the checkpoint reads as is)."""

    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        self.config = config
        self.patch_embedder = PatchEmbedder(config)
        self.encoder = Encoder(config)
        theta = config.rope_parameters.get("rope_theta", 100.0)
        spatial = config.head_dim // 2
        exponents = torch.arange(0, spatial, 2, dtype=torch.float32) / spatial
        self.register_buffer("inv_freq", 1.0 / theta**exponents, persistent=False)
        if config.standardize:
            self.register_buffer("std_bias", torch.zeros(config.hidden_size))
            self.register_buffer("std_scale", torch.ones(config.hidden_size))

    def forward(self, pixels: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        padding = (positions == -1).all(dim=-1)  # [1, P]
        h = self.patch_embedder(pixels, positions, padding)
        freqs = positions.float()[..., None] * self.inv_freq  # [1, P, 2, D/4]
        cos, sin = freqs.cos(), freqs.sin()
        # bidirectional over the real patches: padded keys are masked out
        mask = (padding.float() * torch.finfo(torch.float32).min)[:, None, None, :]
        for layer in self.encoder.layers:
            h = layer(h, cos, sin, mask)
        return self.pool(h, positions, padding)

    def pool(self, h, positions, padding) -> torch.Tensor:
        """Each `k x k` block of patches averaged into one soft token, times sqrt(width)."""
        k = self.config.pooling_kernel_size
        h = h * (~padding).unsqueeze(-1).float()
        tokens = h.shape[1] // (k * k)
        clamped = positions.clamp(min=0)
        columns = clamped[..., 0].max(dim=-1, keepdim=True)[0] + 1
        block = torch.div(clamped, k, rounding_mode="floor")
        index = block[..., 0] + torch.div(columns, k, rounding_mode="floor") * block[..., 1]
        slots = torch.arange(tokens, dtype=index.dtype)
        weights = (index.unsqueeze(-1) == slots).float() / (k * k)  # [1, P, tokens]
        pooled = weights.transpose(1, 2) @ h * self.config.hidden_size**0.5
        if self.config.standardize:
            pooled = (pooled - self.std_bias) * self.std_scale
        return pooled


class MultimodalEmbedder(nn.Module):
    """transformers' `embed_vision` and `embed_audio`: an encoder's soft tokens (`width`
    wide) into the decoder's width."""

    def __init__(self, width: int, eps: float, text_width: int) -> None:
        super().__init__()
        self.embedding_pre_projection_norm = RMSNorm(width, eps, with_scale=False)
        self.embedding_projection = nn.Linear(width, text_width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.embedding_projection(self.embedding_pre_projection_norm(x))


class Gemma4Vision(nn.Module):
    """`forward(pixel_values [1, P, 3 p^2], pixel_position_ids [1, P, 2]) -> soft tokens
    [1, P / k^2, text width]`: the real image's tokens first (the host keeps as many as
    the processor counted)."""

    input_names = ("pixel_values", "pixel_position_ids")

    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        self.config = config
        self.vision_tower = VisionTower(config)
        self.embed_vision = MultimodalEmbedder(
            config.hidden_size, config.rms_norm_eps, config.text_hidden_size
        )

    def forward(self, pixels: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.embed_vision(self.vision_tower(pixels, positions))

    def example_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        patches, pixels = self.config.patches, 3 * self.config.patch_size**2
        positions = torch.full((1, patches, 2), -1, dtype=torch.int32)
        positions[0, 0] = 0
        return torch.zeros(1, patches, pixels), positions


def checkpoint_name(key: str) -> str | None:
    """Our name of a vision tensor (transformers' under `model.`), None for the rest."""
    name = key.removeprefix("model.")
    return name if name.startswith(("vision_tower.", "embed_vision.")) else None


def has_encoder(directory: str | Path) -> bool:
    """Whether a checkpoint has Gemma 4's vision tower (config.json's `vision_config`)."""
    raw = read_json(Path(directory) / "config.json")
    return raw.get("model_type") == "gemma4" and bool(raw.get("vision_config"))


def load_encoder(
    directory: str | Path, text_hidden_size: int, processor: dict | None = None
) -> Gemma4Vision:
    """The vision encoder of a Gemma 4 checkpoint, its weights read (float32, eval), for
    images as `processor` (`processor()`, its budget perhaps changed) prepares them
    (default: the checkpoint's own)."""
    config = VisionConfig.from_checkpoint(directory, text_hidden_size)
    config.processor = processor["settings"] if processor is not None else config.processor
    model = build_and_load(lambda: Gemma4Vision(config), directory, checkpoint_name)
    return model.float().eval()


def processor(directory: str | Path) -> dict:
    """What the host needs to prepare an image for this checkpoint (stored in the asset's
    metadata.json, `zoo.core.host.media`): its image processor's settings and image tokens."""
    directory = Path(directory)
    raw = read_json(directory / "config.json")
    settings = image_processor_settings(directory)
    tokens = {"token": "image_token_id", "begin": "boi_token_id", "end": "eoi_token_id"}
    found = {"kind": "gemma4", "settings": settings}
    if settings:
        found |= {name: token_text(directory, raw[field]) for name, field in tokens.items()}
    text = raw.get("text_config") or {}
    found["token_id"] = raw.get("image_token_id")
    found["pad_token_id"] = text.get("pad_token_id", 0)
    # the 31B: an image's tokens attend to each other both ways in the sliding layers
    found["bidirectional"] = text.get("use_bidirectional_attention") == "vision"
    return found


SOFT_TOKEN_BUDGETS = (70, 140, 280, 560, 1120)  # what Gemma 4's image processor accepts


def tokens(processor: dict) -> int:
    """The most soft tokens an image becomes (the vision function's fixed size)."""
    return int(processor["settings"].get("max_soft_tokens", 280))


def with_tokens(processor: dict, count: int) -> dict:
    """The processor with its budget set to `count` soft tokens an image."""
    if count not in SOFT_TOKEN_BUDGETS:
        raise ValueError(
            f"--image-tokens {count}: Gemma 4's image processor takes one of "
            f"{', '.join(map(str, SOFT_TOKEN_BUDGETS))}"
        )
    return processor | {"settings": processor["settings"] | {"max_soft_tokens": count}}
