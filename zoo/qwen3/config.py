"""Qwen3 dense text-decoder configuration (0.6B to 32B), read from a checkpoint's config.json.

Field names and defaults follow transformers 5.23 `Qwen3Config`. Released files spell RoPE
as `rope_theta` + `rope_scaling: null` (transformers 5 re-saves it as `rope_parameters`);
both are read. Every release sets `use_sliding_window: false` (all layers full attention)
while still carrying `sliding_window` / `max_window_layers`: those two are read and unused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zoo.core.checkpoint.config import DecoderConfig


@dataclass
class Qwen3Config(DecoderConfig):
    TEXT_TYPE, FAMILY = "qwen3", "Qwen3"
    REFUSED_MODEL_TYPES = {
        "qwen3_moe": "the mixture-of-experts Qwen3 sizes (30B-A3B, 235B-A22B) are the "
        "zoo.qwen3_moe entry (zoo export picks it from model_type)"
    }

    vocab_size: int = 151_936
    hidden_size: int = 4096
    intermediate_size: int = 22_016
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int | None = 32
    head_dim: int = 128  # set by every release: not hidden_size / heads (0.6B: 16 x 128)
    hidden_act: str = "silu"
    rms_norm_eps: float = 1e-6
    rope_parameters: dict | None = None
    rope_scaling: dict | None = None  # the released spelling, folded into rope_parameters
    rope_theta: float | None = None
    attention_bias: bool = False
    use_sliding_window: bool = False
    sliding_window: int | None = 4096
    max_window_layers: int = 28
    layer_types: list[str] | None = None
    tie_word_embeddings: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    pad_token_id: int | None = None
    stop_token_ids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        unsupported = self.settle_plain_fields()
        sliding = [t for t in self.layer_types or [] if t != "full_attention"]
        if self.use_sliding_window or sliding:
            unsupported.append("sliding-window layers (use_sliding_window=true)")
        self.refuse(unsupported)
