"""Qwen3.5's vision encoder, re-authored for export to Core AI: image patches in, the
decoder's soft tokens out (what transformers 5.23 `Qwen3_5Model.get_image_features`
computes; the parity tests hold it to that), for a fixed number of patches.

The image processor (`zoo.core.host.media`, on the host) resizes an image to a multiple of
`patch_size * spatial_merge_size` pixels within the processor's pixel budget, cuts it into
patches (each one repeated `temporal_patch_size` times: a still image is a one-frame video),
orders them so that each 2 x 2 block of patches is consecutive, and pads the rest. It also
computes what depends only on the grid: the four taps and weights that resample the learned
48 x 48 position table to the image's grid (bilinear, corners aligned) and each patch's
(row, column). One function then computes:
- each patch's pixels projected (transformers' Conv3d, whose kernel is its stride: a linear
  map of the flattened patch), plus its resampled position embedding;
- blocks: LayerNorm, attention over the real patches (one image a call: transformers'
  packed attention per image) with axial RoPE by row and column, LayerNorm, an MLP;
- the merger: LayerNorm, each 2 x 2 block's four patches side by side, two linears.
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


@dataclass
class VisionConfig:
    """config.json's `vision_config` (transformers' `Qwen3_5VisionConfig` fields) and the
    image processor's settings (preprocessor_config.json)."""

    depth: int = 27
    hidden_size: int = 1152
    hidden_act: str = "gelu_pytorch_tanh"
    intermediate_size: int = 4304
    num_heads: int = 16
    in_channels: int = 3
    patch_size: int = 16
    spatial_merge_size: int = 2
    temporal_patch_size: int = 2
    out_hidden_size: int = 3584
    num_position_embeddings: int = 2304
    rope_parameters: dict = field(default_factory=lambda: {"rope_theta": 10000.0})
    processor: dict = field(default_factory=dict)

    @property
    def patches(self) -> int:
        """Patches per image, padding included: the function's fixed input length (the
        processor's pixel budget, `size.longest_edge`, over one patch's pixels)."""
        budget = (self.processor.get("size") or {}).get("longest_edge", 0)
        unit = (self.patch_size * self.spatial_merge_size) ** 2
        return budget // unit * self.spatial_merge_size**2

    @classmethod
    def of(cls, raw: dict, processor: dict | None = None) -> VisionConfig:
        """From a parsed config.json (its `vision_config`) and the processor's settings."""
        return vision_config_of(cls, raw, processor=processor or {})


def activation(name: str):
    if name in ("gelu_pytorch_tanh", "gelu_tanh"):
        return lambda x: F.gelu(x, approximate="tanh")
    if name == "gelu":
        return F.gelu
    raise ValueError(f"vision_config: hidden_act {name!r} is not implemented")


def rotate_axial(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on `[P, heads, D]` with cos/sin `[P, D]` (HF halves)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[:, None] + rotated * sin[:, None]


class Attention(nn.Module):
    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        self.heads = config.num_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.proj = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, x, cos, sin, mask) -> torch.Tensor:
        patches = x.shape[0]
        q, k, v = self.qkv(x).reshape(patches, 3, self.heads, -1).unbind(1)
        q, k = rotate_axial(q, cos, sin).transpose(0, 1), rotate_axial(k, cos, sin).transpose(0, 1)
        scale = q.shape[-1] ** -0.5
        weights = torch.softmax(q @ k.transpose(-1, -2) * scale + mask, dim=-1)
        out = (weights @ v.transpose(0, 1)).transpose(0, 1).reshape(patches, -1)
        return self.proj(out)


class MLP(nn.Module):
    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        self.linear_fc1 = nn.Linear(config.hidden_size, config.intermediate_size)
        self.linear_fc2 = nn.Linear(config.intermediate_size, config.hidden_size)
        self.act = activation(config.hidden_act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_fc2(self.act(self.linear_fc1(x)))


class Block(nn.Module):
    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(config.hidden_size, eps=1e-6)
        self.norm2 = nn.LayerNorm(config.hidden_size, eps=1e-6)
        self.attn = Attention(config)
        self.mlp = MLP(config)

    def forward(self, h, cos, sin, mask) -> torch.Tensor:
        h = h + self.attn(self.norm1(h), cos, sin, mask)
        return h + self.mlp(self.norm2(h))


class PatchEmbed(nn.Module):
    """transformers' Conv3d (kernel = stride = one patch): a linear map of the patch."""

    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        kernel = (config.temporal_patch_size, config.patch_size, config.patch_size)
        self.proj = nn.Conv3d(config.in_channels, config.hidden_size, kernel, kernel)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        weight = self.proj.weight.reshape(self.proj.weight.shape[0], -1)
        return pixels @ weight.T + self.proj.bias


class Merger(nn.Module):
    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        self.width = config.hidden_size * config.spatial_merge_size**2
        self.norm = nn.LayerNorm(config.hidden_size, eps=1e-6)
        self.linear_fc1 = nn.Linear(self.width, self.width)
        self.linear_fc2 = nn.Linear(self.width, config.out_hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(x).reshape(-1, self.width)
        return self.linear_fc2(F.gelu(self.linear_fc1(x)))


class VisionTower(nn.Module):
    """transformers' `visual` (its parameter names, so the checkpoint reads as is)."""

    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        self.config = config
        self.patch_embed = PatchEmbed(config)
        self.pos_embed = nn.Embedding(config.num_position_embeddings, config.hidden_size)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.depth))
        self.merger = Merger(config)
        head_dim = config.hidden_size // config.num_heads
        theta = config.rope_parameters.get("rope_theta", 10000.0)
        spatial = head_dim // 2
        exponents = torch.arange(0, spatial, 2, dtype=torch.float32) / spatial
        self.register_buffer("inv_freq", 1.0 / theta**exponents, persistent=False)

    def forward(self, pixels, taps, tap_weights, rows_columns) -> torch.Tensor:
        """`pixels` `[P, C T p p]`, `taps`/`tap_weights` `[P, 4]` (the position table's
        resampling), `rows_columns` `[P, 2]` (-1 for padding): soft tokens `[P / 4, out]`."""
        padding = rows_columns[:, 0] < 0
        h = self.patch_embed(pixels)
        h = h + (self.pos_embed(taps) * tap_weights[..., None]).sum(1)
        freqs = rows_columns.clamp(min=0).float()[..., None] * self.inv_freq  # [P, 2, D/4]
        freqs = torch.cat([freqs[:, 0], freqs[:, 1]], dim=-1)  # rows' then columns'
        cos, sin = torch.cat([freqs, freqs], -1).cos(), torch.cat([freqs, freqs], -1).sin()
        mask = (padding.float() * torch.finfo(torch.float32).min)[None, None, :]
        for block in self.blocks:
            h = block(h, cos, sin, mask)
        return self.merger(h)


class Qwen3_5Vision(nn.Module):
    """`forward(pixel_values, taps, tap_weights, rows_columns) -> soft tokens [1, P/4,
    out]`: the real image's tokens first (the host keeps as many as it counted)."""

    input_names = ("pixel_values", "taps", "tap_weights", "rows_columns")

    def __init__(self, config: VisionConfig) -> None:
        super().__init__()
        self.config = config
        self.visual = VisionTower(config)

    def forward(self, pixels, taps, tap_weights, rows_columns) -> torch.Tensor:
        return self.visual(pixels, taps, tap_weights, rows_columns)[None]

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        c, patches = self.config, self.config.patches
        width = c.in_channels * c.temporal_patch_size * c.patch_size**2
        rows_columns = torch.full((patches, 2), -1, dtype=torch.int32)
        rows_columns[0] = 0
        taps = torch.zeros(patches, 4, dtype=torch.int32)
        return torch.zeros(patches, width), taps, torch.zeros(patches, 4), rows_columns


def checkpoint_name(key: str) -> str | None:
    """Our name of a vision tensor (transformers' `model.visual.*`), None for the rest."""
    name = key.removeprefix("model.")
    return name if name.startswith("visual.") else None


def has_encoder(directory: str | Path) -> bool:
    raw = read_json(Path(directory) / "config.json")
    return raw.get("model_type") in ("qwen3_5", "qwen3_5_moe") and bool(raw.get("vision_config"))


def load_encoder(
    directory: str | Path, text_hidden_size: int, processor: dict | None = None
) -> Qwen3_5Vision:
    """The vision encoder of a Qwen3.5 checkpoint, its weights read (float32, eval), for
    images as `processor` (`processor()`, its budget perhaps changed) prepares them
    (default: the checkpoint's own)."""
    directory = Path(directory)
    raw = read_json(directory / "config.json")
    given = processor["settings"] if processor is not None else image_processor_settings(directory)
    config = VisionConfig.of(raw, given)
    if config.out_hidden_size != text_hidden_size:
        raise ValueError(
            f"{directory}/config.json: vision_config.out_hidden_size {config.out_hidden_size} "
            f"is not the decoder's width {text_hidden_size}"
        )
    model = build_and_load(lambda: Qwen3_5Vision(config), directory, checkpoint_name)
    return model.float().eval()


def processor(directory: str | Path) -> dict:
    """What the host needs to prepare an image for this checkpoint (stored in the asset's
    metadata.json, `zoo.core.host.media`): the processor's settings, the grid's geometry, the
    image token (the chat template writes the vision start and end tokens itself)."""
    directory = Path(directory)
    raw = read_json(directory / "config.json")
    vision = raw.get("vision_config") or {}
    settings = image_processor_settings(directory)
    found = {"kind": "qwen3_5", "settings": settings, "begin": "", "end": ""}
    if settings:
        found["token"] = token_text(directory, raw["image_token_id"])
    found["token_id"] = raw.get("image_token_id")
    found["pad_token_id"] = raw.get("image_token_id")  # no per-layer lookups: the token as is
    found["position_table"] = vision.get("num_position_embeddings", 2304)
    found["mrope_section"] = _mrope_section(raw)
    return found


def _mrope_section(raw: dict) -> list[int]:
    text = raw.get("text_config") or {}
    rope = text.get("rope_parameters") or text.get("rope_scaling") or {}
    return list(rope.get("mrope_section") or [11, 11, 10])


def tokens(processor: dict) -> int:
    """The most soft tokens an image becomes (the vision function's fixed size): the
    processor's pixel budget (`size.longest_edge`) over a merged block's pixels."""
    settings = processor["settings"]
    block = (settings["patch_size"] * settings["merge_size"]) ** 2
    return settings["size"]["longest_edge"] // block


def with_tokens(processor: dict, count: int) -> dict:
    """The processor with its pixel budget lowered (or raised) to `count` soft tokens an
    image: larger images are resized smaller, as transformers' processor does with that
    `size`."""
    settings = processor["settings"]
    block = (settings["patch_size"] * settings["merge_size"]) ** 2
    size = dict(settings["size"], longest_edge=count * block)
    size["shortest_edge"] = min(size["shortest_edge"], size["longest_edge"])
    return processor | {"settings": settings | {"size": size}}
