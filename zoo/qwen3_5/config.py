"""Qwen3.5 text-decoder configuration, read from a checkpoint's config.json.

Field names and defaults follow transformers 5.23 `Qwen3_5TextConfig`; a multimodal checkpoint
(`model_type: qwen3_5`) keeps the text decoder's config under `text_config`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zoo.core.checkpoint.config import DecoderConfig
from zoo.core.io.files import UnsupportedConfig


@dataclass
class Qwen3_5Config(DecoderConfig):
    TEXT_TYPE, MULTIMODAL_TYPE, FAMILY = "qwen3_5_text", "qwen3_5", "Qwen3.5"
    TIE_DEFAULTS = (False, False)  # transformers' defaults: text config, multimodal config

    vocab_size: int = 248_320
    hidden_size: int = 4096
    intermediate_size: int = 12_288
    num_hidden_layers: int = 32
    num_attention_heads: int = 16
    num_key_value_heads: int = 4
    head_dim: int = 256
    hidden_act: str = "silu"
    rms_norm_eps: float = 1e-6
    rope_parameters: dict | None = None
    # legacy spellings beside rope_parameters, folded into it as transformers does
    rope_theta: float | None = None
    partial_rotary_factor: float = 0.25
    attention_bias: bool = False
    linear_conv_kernel_dim: int = 4
    linear_key_head_dim: int = 128
    linear_value_head_dim: int = 128
    linear_num_key_heads: int = 16
    linear_num_value_heads: int = 32
    layer_types: list[str] | None = None
    full_attention_interval: int = 4
    tie_word_embeddings: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    pad_token_id: int | None = None
    # every id that ends a generation (generation_config.json, top level, text config)
    stop_token_ids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.layer_types:  # transformers' default: every 4th layer is full attention
            self.layer_types = [
                "full_attention"
                if (i + 1) % self.full_attention_interval == 0
                else "linear_attention"
                for i in range(self.num_hidden_layers)
            ]
        if len(self.layer_types) != self.num_hidden_layers:
            raise ValueError(
                f"layer_types has {len(self.layer_types)} entries for "
                f"{self.num_hidden_layers} layers (num_hidden_layers)"
            )
        # transformers: values inside rope_parameters win; rope_theta and
        # partial_rotary_factor beside it fill what is missing (the Qwen3-Next spelling).
        rope = dict(self.rope_parameters or {})
        rope.setdefault("rope_type", rope.get("type", "default"))
        rope.setdefault("rope_theta", 10_000.0 if self.rope_theta is None else self.rope_theta)
        rope.setdefault("partial_rotary_factor", self.partial_rotary_factor)
        self.rope_parameters = rope
        if not self.stop_token_ids:
            eos = self.eos_token_id
            self.stop_token_ids = [eos] if isinstance(eos, int) else list(eos or [])
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
    def text_fields(cls, text: dict) -> dict:
        if "rope_parameters" not in text and "rope_scaling" in text:  # the older key
            return {**text, "rope_parameters": text["rope_scaling"]}
        return text
