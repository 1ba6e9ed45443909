"""Qwen3.5 mixture-of-experts configuration (35B-A3B, 122B-A10B, 397B-A17B), read from a
checkpoint's config.json.

The dense Qwen3.5 hybrid's fields (`zoo.qwen3_5.config`) plus the experts', as
transformers 5.23 `Qwen3_5MoeTextConfig` names them: every layer routes each token to
`num_experts_per_tok` of `num_experts` experts of `moe_intermediate_size` (softmax, top k,
renormalised), beside one shared expert of `shared_expert_intermediate_size` behind a
sigmoid gate. A multimodal checkpoint (`model_type: qwen3_5_moe`) keeps the decoder under
`text_config`.
"""

from __future__ import annotations

from dataclasses import dataclass

from zoo.qwen3_5.config import Qwen3_5Config


@dataclass
class Qwen3_5MoeConfig(Qwen3_5Config):
    TEXT_TYPE, MULTIMODAL_TYPE, FAMILY = "qwen3_5_moe_text", "qwen3_5_moe", "Qwen3.5 MoE"

    hidden_size: int = 2048
    num_hidden_layers: int = 40
    num_attention_heads: int = 16
    num_key_value_heads: int = 2
    moe_intermediate_size: int = 512
    shared_expert_intermediate_size: int = 512
    num_experts: int = 256
    num_experts_per_tok: int = 8

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("moe_intermediate_size", "shared_expert_intermediate_size", "num_experts"):
            if getattr(self, name) < 1:
                raise ValueError(f"config.json: {name}={getattr(self, name)} (expected >= 1)")
        self.check_top_k()
