"""Llama text-decoder configuration (SmolLM2, Llama 3.x, Mistral, Qwen2.5), read from a
checkpoint's config.json.

Field names and defaults follow transformers 5.23 `LlamaConfig`. Released files spell RoPE
either way: `rope_theta` + `rope_scaling` (SmolLM2, Llama 3.x as published) or
`rope_parameters` (as transformers 5 re-saves them); both are read.

Two other families are this decoder with a flag, read from their own spelling:
- `model_type: mistral`: a `sliding_window` (Mistral 7B v0.1: 4096; null from v0.2 on),
  which changes nothing while the KV cache holds no more tokens than the window;
- `model_type: qwen2` (Qwen2, Qwen2.5): biases on q, k and v (not on o), and a
  `sliding_window` that only counts with `use_sliding_window: true` (no release sets it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zoo.core.checkpoint.config import DecoderConfig


@dataclass
class LlamaConfig(DecoderConfig):
    TEXT_TYPE, FAMILY = "llama", "Llama"
    ALSO_TEXT_TYPES = ("mistral", "qwen2")

    vocab_size: int = 32_000
    hidden_size: int = 4096
    intermediate_size: int = 11_008
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int | None = None  # None: as many as the query heads
    head_dim: int | None = None  # None: hidden_size / num_attention_heads
    hidden_act: str = "silu"
    rms_norm_eps: float = 1e-6
    rope_parameters: dict | None = None
    rope_scaling: dict | None = None  # the older spellings, folded into rope_parameters
    rope_theta: float | None = None
    attention_bias: bool = False  # q, k, v and o
    qkv_bias: bool = False  # q, k and v only (Qwen2: set from its model_type)
    sliding_window: int | None = None  # keys each token sees (Mistral v0.1), None: all
    mlp_bias: bool = False
    pretraining_tp: int = 1
    tie_word_embeddings: bool = False
    bos_token_id: int | None = 1
    eos_token_id: int | list[int] | None = 2
    pad_token_id: int | None = None
    # every id that ends a generation (generation_config.json, text config)
    stop_token_ids: list[int] = field(default_factory=list)

    @classmethod
    def text_fields(cls, text: dict) -> dict:
        if text.get("model_type") == "qwen2":
            text = {**text, "qkv_bias": True}
            if not text.get("use_sliding_window"):  # the released files carry an unused one
                text["sliding_window"] = None
        return text

    def __post_init__(self) -> None:
        unsupported = self.settle_plain_fields()
        if self.mlp_bias:
            unsupported.append("mlp_bias=True")
        self.refuse(unsupported)
