"""Gemma 3 text-decoder configuration, read from a checkpoint's config.json.

Field names and defaults follow transformers 5.23 `Gemma3TextConfig`. The text-only sizes
(270m, 1b: `model_type: gemma3_text`) have the decoder's fields at the top level; the
multimodal ones (4b, 12b, 27b: `model_type: gemma3`) under `text_config`. Released files
spell RoPE as `rope_theta` (full layers) + `rope_local_base_freq` (sliding layers) +
`rope_scaling` (full layers only) and the layer pattern as `sliding_window_pattern`;
transformers 5 re-saves them as `rope_parameters` per layer type and `layer_types`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zoo.core.checkpoint.config import DecoderConfig
from zoo.core.checkpoint.rope import rope_parameters
from zoo.core.io.files import UnsupportedConfig

LAYER_TYPES = ("sliding_attention", "full_attention")


@dataclass
class Gemma3Config(DecoderConfig):
    TEXT_TYPE, MULTIMODAL_TYPE, FAMILY = "gemma3_text", "gemma3", "Gemma 3"
    TIE_DEFAULTS = (True, True)  # transformers' defaults: text config, multimodal config

    vocab_size: int = 262_208
    hidden_size: int = 2304
    intermediate_size: int = 9216
    num_hidden_layers: int = 26
    num_attention_heads: int = 8
    num_key_value_heads: int = 4
    head_dim: int = 256
    hidden_activation: str = "gelu_pytorch_tanh"
    rms_norm_eps: float = 1e-6
    query_pre_attn_scalar: float = 256  # attention scores are scaled by its -1/2 power
    attention_bias: bool = False

    # layer kinds: 5 sliding-window layers, then 1 full (the pattern), unless layer_types
    sliding_window: int = 4096
    sliding_window_pattern: int = 6
    layer_types: list[str] | None = None
    # RoPE per layer kind (a dict keyed by layer kind), or the released spellings below
    rope_parameters: dict | None = None
    rope_theta: float | None = None  # full layers
    rope_local_base_freq: float | None = None  # sliding layers
    rope_scaling: dict | None = None  # full layers (4b and up: linear, factor 8)

    final_logit_softcapping: float | None = None
    attn_logit_softcapping: float | None = None  # refused when set: no release uses it
    use_bidirectional_attention: bool | None = False  # EmbeddingGemma: refused

    tie_word_embeddings: bool = True
    bos_token_id: int | None = 2
    eos_token_id: int | list[int] | None = 1
    pad_token_id: int | None = 0
    stop_token_ids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.layer_types:
            self.layer_types = [
                "full_attention" if (i + 1) % self.sliding_window_pattern == 0 else LAYER_TYPES[0]
                for i in range(self.num_hidden_layers)
            ]
        if len(self.layer_types) != self.num_hidden_layers:
            raise ValueError(
                f"layer_types has {len(self.layer_types)} entries for "
                f"{self.num_hidden_layers} layers (num_hidden_layers)"
            )
        nested = dict(self.rope_parameters or {})
        if not set(nested) <= set(LAYER_TYPES):  # one dict for every layer: transformers'
            nested = {kind: nested for kind in LAYER_TYPES}  # older flat spelling
        self.rope_parameters = {
            "full_attention": rope_parameters(
                nested.get("full_attention"),
                self.rope_scaling,
                1_000_000.0 if self.rope_theta is None else self.rope_theta,
            ),
            "sliding_attention": rope_parameters(
                nested.get("sliding_attention"),
                None,
                10_000.0 if self.rope_local_base_freq is None else self.rope_local_base_freq,
            ),
        }
        if not self.stop_token_ids:
            eos = self.eos_token_id
            self.stop_token_ids = [eos] if isinstance(eos, int) else list(eos or [])
        unsupported = []
        if self.use_bidirectional_attention:
            unsupported.append("use_bidirectional_attention=True (EmbeddingGemma, an encoder)")
        if self.attn_logit_softcapping is not None:
            unsupported.append(f"attn_logit_softcapping={self.attn_logit_softcapping}")
        if self.hidden_activation != "gelu_pytorch_tanh":
            unsupported.append(f"hidden_activation={self.hidden_activation!r}")
        if set(self.layer_types) - set(LAYER_TYPES):
            unsupported.append(f"layer_types={sorted(set(self.layer_types))}")
        if unsupported:
            raise UnsupportedConfig(
                "this Gemma 3 entry does not implement: " + "; ".join(unsupported)
            )

    @classmethod
    def text_fields(cls, text: dict) -> dict:
        if "sliding_window_pattern" not in text and "_sliding_window_pattern" in text:
            return {**text, "sliding_window_pattern": text["_sliding_window_pattern"]}
        return text

    def is_sliding(self, layer: int) -> bool:
        return self.layer_types[layer] == "sliding_attention"
