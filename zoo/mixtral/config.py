"""Mixtral configuration (8x7B, 8x22B), read from a checkpoint's config.json.

Field names and defaults follow transformers 5.23 `MixtralConfig`: Mistral's attention
(grouped-query, RoPE base 1e6, no biases) and, in every layer, 8 experts of which each
token takes 2 (`num_local_experts`, `num_experts_per_tok`), their weights renormalised over
the two. `router_jitter_noise` only acts in training. A `sliding_window` (null in the
releases) is masked as zoo.llama masks Mistral's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zoo.core.checkpoint.config import DecoderConfig


@dataclass
class MixtralConfig(DecoderConfig):
    TEXT_TYPE, FAMILY = "mixtral", "Mixtral"

    vocab_size: int = 32_000
    hidden_size: int = 4096
    intermediate_size: int = 14_336  # each expert's
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int | None = 8
    head_dim: int | None = None  # None: hidden_size / num_attention_heads
    hidden_act: str = "silu"
    rms_norm_eps: float = 1e-5
    rope_parameters: dict | None = None
    rope_scaling: dict | None = None
    rope_theta: float | None = 1e6
    sliding_window: int | None = None
    num_local_experts: int = 8
    num_experts_per_tok: int = 2
    router_jitter_noise: float = 0.0
    attention_bias: bool = False  # Mistral's attention has none (zoo.llama's reads these)
    qkv_bias: bool = False
    tie_word_embeddings: bool = False
    bos_token_id: int | None = 1
    eos_token_id: int | list[int] | None = 2
    pad_token_id: int | None = None
    stop_token_ids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        unsupported = self.settle_plain_fields()
        self.check_top_k()
        self.refuse(unsupported)
