"""GPT-OSS configuration (gpt-oss-20b, gpt-oss-120b), read from a checkpoint's config.json.

Field names and defaults follow transformers 5.23 `GptOssConfig`. Layers alternate a
sliding window of 128 keys and full attention (`layer_types`); RoPE is `yarn` (base 150k,
factor 32 over an original 4096-token context), each attention head has a learned sink;
every layer is a mixture of `num_local_experts` (32, 128) of which 4 per token, with biases
and a clamped SwiGLU (`swiglu_limit` 7, alpha 1.702).

The released experts are stored MXFP4 (`quantization_config: {quant_method: mxfp4}`:
`*_blocks` and `*_scales` tensors): read as released and dequantized exactly on load
(`zoo.core.checkpoint.mxfp4`, as transformers does), or in bf16/fp32 as transformers saves them
after dequantizing. Any other `quant_method` is refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zoo.core.checkpoint.config import DecoderConfig

LAYER_TYPES = ("sliding_attention", "full_attention")
# what transformers 5.23 assumes when a config.json spells no RoPE (the released values)
DEFAULT_ROPE = {
    "rope_type": "yarn",
    "factor": 32.0,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "truncate": False,
    "original_max_position_embeddings": 4096,
    "rope_theta": 150_000.0,
}


@dataclass
class GptOssConfig(DecoderConfig):
    TEXT_TYPE, FAMILY = "gpt_oss", "GPT-OSS"
    ROPE_TYPES = ("default", "yarn")

    vocab_size: int = 201_088
    hidden_size: int = 2880
    intermediate_size: int = 2880  # each expert's
    num_hidden_layers: int = 24
    num_attention_heads: int = 64
    num_key_value_heads: int | None = 8
    head_dim: int | None = 64
    hidden_act: str = "silu"  # spelled so; the experts' unit is the clamped SwiGLU below
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 131_072
    rope_parameters: dict | None = None
    rope_scaling: dict | None = None
    rope_theta: float | None = 150_000.0
    sliding_window: int | None = 128
    layer_types: list[str] | None = None
    num_local_experts: int = 32
    num_experts_per_tok: int = 4
    swiglu_limit: float = 7.0
    swiglu_alpha: float = 1.702
    attention_bias: bool = True
    quantization_config: dict | None = None
    tie_word_embeddings: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    pad_token_id: int | None = None
    stop_token_ids: list[int] = field(default_factory=list)

    @classmethod
    def text_fields(cls, text: dict) -> dict:
        if not text.get("rope_parameters") and not text.get("rope_scaling"):
            text = {**text, "rope_parameters": dict(DEFAULT_ROPE)}  # transformers' default
        return text

    def __post_init__(self) -> None:
        unsupported = self.settle_plain_fields()
        if self.layer_types is None:  # transformers' default: sliding, full, sliding, ...
            self.layer_types = [LAYER_TYPES[i % 2] for i in range(self.num_hidden_layers)]
        if len(self.layer_types) != self.num_hidden_layers:
            raise ValueError(
                f"config.json: layer_types has {len(self.layer_types)} entries for "
                f"{self.num_hidden_layers} layers (num_hidden_layers)"
            )
        if set(self.layer_types) - set(LAYER_TYPES):
            unsupported.append(f"layer_types={sorted(set(self.layer_types))}")
        self.check_top_k()
        quantized = (self.quantization_config or {}).get("quant_method")
        if quantized not in (None, "mxfp4"):  # MXFP4 (as released): zoo.core.checkpoint.mxfp4
            unsupported.append(
                f"experts stored {quantized} (quantization_config): dequantize them to "
                "bf16 first (transformers' from_pretrained, then save_pretrained)"
            )
        self.refuse(unsupported)

    def is_sliding(self, layer: int) -> bool:
        return self.layer_types[layer] == "sliding_attention"
