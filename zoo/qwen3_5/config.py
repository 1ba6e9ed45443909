"""Qwen3.5 text-decoder configuration, read from a checkpoint's config.json.

Field names and defaults follow transformers 5.23 `Qwen3_5TextConfig`; a multimodal checkpoint
(`model_type: qwen3_5`) keeps the text decoder's config under `text_config`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

from zoo.core.checkpoint import read_text_config, text_config


class UnsupportedConfig(ValueError):
    """The checkpoint asks for something this entry does not implement."""


@dataclass
class Qwen3_5Config:
    vocab_size: int = 248_320
    hidden_size: int = 4096
    intermediate_size: int = 12_288
    num_hidden_layers: int = 32
    num_attention_heads: int = 16
    num_key_value_heads: int = 4
    head_dim: int = 256
    hidden_act: str = "silu"
    rms_norm_eps: float = 1e-6
    rope_parameters: dict = field(default_factory=dict)
    attention_bias: bool = False
    linear_conv_kernel_dim: int = 4
    linear_key_head_dim: int = 128
    linear_value_head_dim: int = 128
    linear_num_key_heads: int = 16
    linear_num_value_heads: int = 32
    layer_types: list[str] = field(default_factory=list)
    full_attention_interval: int = 4
    tie_word_embeddings: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    pad_token_id: int | None = None

    def __post_init__(self) -> None:
        if not self.layer_types:  # transformers' default: every 4th layer is full attention
            self.layer_types = [
                "full_attention"
                if (i + 1) % self.full_attention_interval == 0
                else "linear_attention"
                for i in range(self.num_hidden_layers)
            ]
        self.rope_parameters = {
            "rope_type": "default",
            "rope_theta": 10_000.0,
            "partial_rotary_factor": 0.25,
            **(self.rope_parameters or {}),
        }
        unsupported = []
        if self.rope_parameters.get("rope_type") != "default":
            unsupported.append(f"rope_parameters={self.rope_parameters}")
        if self.hidden_act != "silu":
            unsupported.append(f"hidden_act={self.hidden_act!r}")
        if self.attention_bias:
            unsupported.append("attention_bias=True")
        if set(self.layer_types) - {"full_attention", "linear_attention"}:
            unsupported.append(f"layer_types={sorted(set(self.layer_types))}")
        if unsupported:
            raise UnsupportedConfig(
                "this Qwen3.5 entry does not implement: " + "; ".join(unsupported)
            )

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.rope_parameters.get("partial_rotary_factor", 1.0))

    @property
    def conv_dim(self) -> int:
        """Channels of the depthwise conv: q and k (key heads) and v (value heads)."""
        keys = self.linear_num_key_heads * self.linear_key_head_dim
        return 2 * keys + self.linear_num_value_heads * self.linear_value_head_dim

    @classmethod
    def from_dict(cls, raw: dict) -> Qwen3_5Config:
        raw = text_config(raw, "qwen3_5_text", "qwen3_5", "Qwen3.5")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in known})

    @classmethod
    def from_checkpoint(cls, directory: str | Path) -> Qwen3_5Config:
        return cls.from_dict(read_text_config(directory, "qwen3_5_text", "qwen3_5", "Qwen3.5"))
