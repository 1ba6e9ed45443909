"""Gemma 4's audio encoder (E2B, E4B), re-authored for export to Core AI: log-mel frames in,
the decoder's soft tokens out (what transformers 5.23 `Gemma4Model.get_audio_features`
computes; the parity tests hold it to that), for a fixed number of frames.

The host (`zoo.core.host.audio`) reads a 16 kHz WAV file and computes its log-mel frames (10 ms
apart) as the checkpoint's feature extractor does, padded to the function's frame budget
with a mask that says which frames are real. One function then computes, in order:
- two 3x3 convolutions of stride 2 (time and frequency quartered), each after zeroing the
  padded frames, each followed by a layer norm over channels and a ReLU; a projection of
  the flattened (frequency, channel) features: one token every 40 ms;
- conformer layers: a half-weighted feed-forward, chunked local attention (each token sees
  the `attention_context_left - 1` tokens before it and itself; relative positions as
  sinusoids through a learned projection; logits soft-capped), a causal depthwise
  convolution between gated linears, a second half-weighted feed-forward, a norm;
- an output projection, then `embed_audio`: an RMS norm without scale and a projection to
  the decoder's width.
The real frames' tokens come first; the host keeps as many as the feature mask leaves.

Attention is computed over the whole (fixed) token axis with a banded mask rather than in
transformers' blocks of `attention_chunk_size`: the same logits, in one matmul per layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from zoo.core.checkpoint.weights import build_and_load
from zoo.core.export.components import token_text
from zoo.core.io.files import read_json
from zoo.gemma4.model import RMSNorm
from zoo.gemma4.vision import ClippableLinear, MultimodalEmbedder

# two stride-2 convolutions: a soft token every 4 mel frames (40 ms)
FRAMES_PER_TOKEN = 4


@dataclass
class AudioConfig:
    """config.json's `audio_config` (transformers' `Gemma4AudioConfig` fields), the
    feature extractor's settings and the token budget, and the decoder's width."""

    hidden_size: int = 1024
    num_hidden_layers: int = 12
    num_attention_heads: int = 8
    subsampling_conv_channels: list = field(default_factory=lambda: [128, 32])
    conv_kernel_size: int = 5
    residual_weight: float = 0.5
    attention_chunk_size: int = 12
    attention_context_left: int = 13
    attention_context_right: int = 0
    attention_logit_cap: float = 50.0
    attention_invalid_logits_value: float = -1.0e9
    use_clipped_linears: bool = True
    rms_norm_eps: float = 1e-6
    gradient_clipping: float = 1e10
    output_proj_dims: int = 1536
    text_hidden_size: int = 0
    processor: dict = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        """Soft tokens per audio clip at most: the function's fixed output length."""
        return int(self.processor.get("audio_seq_length", 750))

    @property
    def frames(self) -> int:
        return self.tokens * FRAMES_PER_TOKEN

    @property
    def mel_bins(self) -> int:
        return int(self.processor.get("settings", {}).get("feature_size", 128))

    @classmethod
    def of(cls, raw: dict, text_hidden_size: int, processor: dict) -> AudioConfig:
        """From a parsed config.json (its `audio_config`) and the processor (`processor()`)."""
        known = set(cls.__dataclass_fields__)
        audio = {k: v for k, v in (raw.get("audio_config") or {}).items() if k in known}
        return cls(**audio, text_hidden_size=text_hidden_size, processor=processor)


def _clamp(x: torch.Tensor, bound: float) -> torch.Tensor:
    """transformers' guard against overflow (a bound of 1e10: a no-op on sane values)."""
    bound = min(bound, torch.finfo(x.dtype).max)
    return torch.clamp(x, -bound, bound)


class SubsampleLayer(nn.Module):
    def __init__(self, channels_in: int, channels_out: int, eps: float) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels_in, channels_out, 3, stride=2, padding=1, bias=False)
        self.norm = nn.LayerNorm(channels_out, eps=eps, bias=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.conv(x * mask[:, None, :, None])  # padded frames read as silence
        return torch.relu(self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2))


class SubsampleProjection(nn.Module):
    def __init__(self, config: AudioConfig) -> None:
        super().__init__()
        first, second = config.subsampling_conv_channels
        self.layer0 = SubsampleLayer(1, first, config.rms_norm_eps)
        self.layer1 = SubsampleLayer(first, second, config.rms_norm_eps)
        self.input_proj_linear = nn.Linear((first // 4) * second, config.hidden_size, bias=False)

    def forward(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.layer0(features.unsqueeze(1), mask)
        x = self.layer1(x, every_second(mask))
        batch, _, time, _ = x.shape
        return self.input_proj_linear(x.permute(0, 2, 3, 1).reshape(batch, time, -1))


def every_second(mask: torch.Tensor) -> torch.Tensor:
    """`mask[:, ::2]` of an even-length `[1, T]` mask, as a reshape (what a stride-2
    convolution keeps of the frames it reads)."""
    return mask.reshape(mask.shape[0], -1, 2)[..., 0]


class FeedForward(nn.Module):
    def __init__(self, config: AudioConfig) -> None:
        super().__init__()
        width = config.hidden_size
        self.ffw_layer_1 = ClippableLinear(config, width, 4 * width)
        self.ffw_layer_2 = ClippableLinear(config, 4 * width, width)
        self.pre_layer_norm = RMSNorm(width, config.rms_norm_eps)
        self.post_layer_norm = RMSNorm(width, config.rms_norm_eps)
        self.clip, self.weight = config.gradient_clipping, config.residual_weight

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        x = self.pre_layer_norm(_clamp(h, self.clip))
        x = self.ffw_layer_2(F.silu(self.ffw_layer_1(x)))
        return h + self.post_layer_norm(_clamp(x, self.clip)) * self.weight


class ChunkedAttention(nn.Module):
    """Local attention: token t sees tokens t - (left - 1) .. t + right; the logit of a key
    at distance d = t - k adds the query times a learned projection of a sinusoid of d."""

    def __init__(self, config: AudioConfig) -> None:
        super().__init__()
        width, self.heads = config.hidden_size, config.num_attention_heads
        self.head_dim = width // self.heads
        self.q_proj = ClippableLinear(config, width, width)
        self.k_proj = ClippableLinear(config, width, width)
        self.v_proj = ClippableLinear(config, width, width)
        self.post = ClippableLinear(config, width, width)
        self.relative_k_proj = nn.Linear(width, width, bias=False)
        self.per_dim_scale = nn.Parameter(torch.zeros(self.head_dim))
        self.q_scale = self.head_dim**-0.5 / math.log(2)
        self.k_scale = math.log(1 + math.e) / math.log(2)
        self.cap = config.attention_logit_cap

    def forward(self, h, distances, relative, banded, mask) -> torch.Tensor:
        """`distances` `[D, width]` (sinusoids of d = left-1 .. 0), `relative` `[T, T]` the
        index of each key's distance in them (0 outside the band), `banded` `[T, T]` 1
        inside it, `mask` `[1, 1, T, T]` 0 where a key may be read, the invalid value
        elsewhere."""
        batch, length, _ = h.shape
        shape = (batch, length, self.heads, self.head_dim)
        q = self.q_proj(h).reshape(shape) * (self.q_scale * F.softplus(self.per_dim_scale))
        k = self.k_proj(h).reshape(shape) * self.k_scale
        v = self.v_proj(h).reshape(shape)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        rel = self.relative_k_proj(distances).reshape(-1, self.heads, self.head_dim)
        by_distance = q @ rel.permute(1, 2, 0)  # [1, H, T, D]: each query by each distance
        index = relative.expand(batch, self.heads, length, length)
        positional = torch.gather(by_distance, -1, index) * banded
        logits = torch.tanh((q @ k.transpose(-1, -2) + positional) / self.cap) * self.cap
        weights = torch.softmax(logits + mask, dim=-1)
        return self.post((weights @ v).transpose(1, 2).reshape(batch, length, -1))


class LightConv(nn.Module):
    def __init__(self, config: AudioConfig) -> None:
        super().__init__()
        width = config.hidden_size
        self.linear_start = ClippableLinear(config, width, 2 * width)
        self.linear_end = ClippableLinear(config, width, width)
        self.kernel = config.conv_kernel_size
        self.depthwise_conv1d = nn.Conv1d(width, width, self.kernel, groups=width, bias=False)
        self.pre_layer_norm = RMSNorm(width, config.rms_norm_eps)
        self.conv_norm = RMSNorm(width, config.rms_norm_eps)
        self.clip = config.gradient_clipping

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        x = F.glu(self.linear_start(self.pre_layer_norm(h)), dim=-1)
        x = F.pad(x.transpose(1, 2), (self.kernel - 1, 0))  # causal: the past only
        x = self.conv_norm(_clamp(self.depthwise_conv1d(x).transpose(1, 2), self.clip))
        return h + self.linear_end(F.silu(x))


class ConformerLayer(nn.Module):
    def __init__(self, config: AudioConfig) -> None:
        super().__init__()
        width, eps = config.hidden_size, config.rms_norm_eps
        self.feed_forward1 = FeedForward(config)
        self.feed_forward2 = FeedForward(config)
        self.self_attn = ChunkedAttention(config)
        self.lconv1d = LightConv(config)
        self.norm_pre_attn = RMSNorm(width, eps)
        self.norm_post_attn = RMSNorm(width, eps)
        self.norm_out = RMSNorm(width, eps)
        self.clip = config.gradient_clipping

    def forward(self, h, distances, relative, banded, mask) -> torch.Tensor:
        h = self.feed_forward1(h)
        x = self.self_attn(
            self.norm_pre_attn(_clamp(h, self.clip)), distances, relative, banded, mask
        )
        h = h + self.norm_post_attn(_clamp(x, self.clip))
        h = self.feed_forward2(self.lconv1d(h))
        return self.norm_out(_clamp(h, self.clip))


class AudioTower(nn.Module):
    """transformers' `audio_tower` (its parameter names, so the checkpoint reads as is)."""

    def __init__(self, config: AudioConfig) -> None:
        super().__init__()
        self.config = config
        self.subsample_conv_projection = SubsampleProjection(config)
        self.layers = nn.ModuleList(ConformerLayer(config) for _ in range(config.num_hidden_layers))
        self.output_proj = nn.Linear(config.hidden_size, config.output_proj_dims, bias=True)
        left, right = config.attention_context_left - 1, config.attention_context_right
        # sinusoids of the distances left .. 0 ([sin..., cos...], transformers' layout)
        half = config.hidden_size // 2
        step = math.log(10000.0) / max(half - 1, 1)
        inverse = torch.exp(torch.arange(half, dtype=torch.float32) * -step)
        angles = torch.arange(left, -1, -1, dtype=torch.float32)[:, None] * inverse
        self.register_buffer("distances", torch.cat([angles.sin(), angles.cos()], -1), False)
        # the band of keys a token reads: distance t - k in [0, left) or (0 < k - t <= right)
        t = torch.arange(config.tokens)
        distance = t[:, None] - t[None, :]
        near = ((distance >= 0) & (distance < left)) | ((distance < 0) & (-distance < right))
        positional = (distance >= 0) & (distance <= left)  # where the sinusoids reach
        index = torch.where(positional, left - distance, torch.zeros_like(distance))
        self.register_buffer("near", near.float(), False)
        self.register_buffer("relative", index[None, None], False)
        self.register_buffer("banded", positional.float()[None, None], False)

    def forward(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.subsample_conv_projection(features, mask)
        valid = every_second(every_second(mask))  # [1, T]: the real tokens
        readable = self.near * valid[:, None, :]  # [1, T, T]
        invalid = self.config.attention_invalid_logits_value
        mask = ((1.0 - readable) * invalid)[:, None]
        for layer in self.layers:
            h = layer(h, self.distances, self.relative, self.banded, mask)
        return self.output_proj(h)


class Gemma4Audio(nn.Module):
    """`forward(input_features [1, F, mel bins], input_features_mask [1, F]) -> soft tokens
    [1, F / 4, text width]`: the real frames' tokens first (the host keeps as many as the
    feature mask leaves)."""

    input_names = ("input_features", "input_features_mask")

    def __init__(self, config: AudioConfig) -> None:
        super().__init__()
        self.config = config
        self.audio_tower = AudioTower(config)
        self.embed_audio = MultimodalEmbedder(
            config.output_proj_dims, config.rms_norm_eps, config.text_hidden_size
        )

    def forward(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.embed_audio(self.audio_tower(features, mask))

    def example_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        frames = self.config.frames
        mask = torch.zeros(1, frames)
        mask[0, : frames // 2] = 1.0
        return torch.zeros(1, frames, self.config.mel_bins), mask


def checkpoint_name(key: str) -> str | None:
    """Our name of an audio tensor (transformers' under `model.`), None for the rest."""
    name = key.removeprefix("model.")
    return name if name.startswith(("audio_tower.", "embed_audio.")) else None


def has_encoder(directory: str | Path) -> bool:
    """Whether a checkpoint has Gemma 4's audio tower (config.json's `audio_config`)."""
    raw = read_json(Path(directory) / "config.json")
    return raw.get("model_type") == "gemma4" and bool(raw.get("audio_config"))


def load_encoder(directory: str | Path, text_hidden_size: int, processor: dict) -> Gemma4Audio:
    """The audio encoder of a Gemma 4 checkpoint, its weights read (float32, eval), for
    clips of at most `processor`'s token budget."""
    raw = read_json(Path(directory) / "config.json")
    config = AudioConfig.of(raw, text_hidden_size, processor)
    model = build_and_load(lambda: Gemma4Audio(config), directory, checkpoint_name)
    return model.float().eval()


def processor(directory: str | Path) -> dict:
    """What the host needs to turn a WAV file into this checkpoint's audio inputs (stored
    in the asset's metadata.json, `zoo.core.host.audio`): the feature extractor's settings, the
    token budget and the audio tokens."""
    directory = Path(directory)
    raw = read_json(directory / "config.json")
    nested = directory / "processor_config.json"
    outer = read_json(nested) if nested.is_file() else {}
    settings = outer.get("feature_extractor") or {}
    flat = directory / "preprocessor_config.json"
    if not settings and flat.is_file():
        found = read_json(flat)
        if "AudioFeatureExtractor" in str(found.get("feature_extractor_type")):
            settings = found
    found = {
        "kind": "gemma4_audio",
        "settings": settings,
        "audio_seq_length": int(outer.get("audio_seq_length", 750)),
        "token_id": raw.get("audio_token_id"),
        "pad_token_id": (raw.get("text_config") or {}).get("pad_token_id", 0),
    }
    if settings:
        tokens = {"token": "audio_token_id", "begin": "boa_token_id", "end": "eoa_token_index"}
        found |= {name: token_text(directory, raw.get(key)) for name, key in tokens.items()}
    return found


def tokens(processor: dict) -> int:
    """The most soft tokens a clip becomes (the audio function's fixed size)."""
    return int(processor["audio_seq_length"])


def with_tokens(processor: dict, count: int) -> dict:
    """The processor with its budget set to `count` soft tokens (40 ms each) a clip."""
    if not 1 <= count <= 750:
        raise ValueError(
            f"--audio-tokens {count}: Gemma 4 reads 1 to 750 soft tokens a clip (40 ms each, "
            "30 s at most)"
        )
    return processor | {"audio_seq_length": count}
