"""Phi-3 / Phi-4 text-decoder configuration (Phi-3-mini/medium, Phi-3.5-mini, Phi-4-mini,
Phi-4), read from a checkpoint's config.json (`model_type: phi3`).

Field names and defaults follow transformers 5.23 `Phi3Config`. RoPE comes as `rope_theta`
+ `rope_scaling` in the released files: null (Phi-3-mini-4k, Phi-4), or `longrope` with
48 short and 48 long factors. Phi-3-mini-128k's first release spelled it `su`, which
transformers 5.23 no longer loads; the entry refuses it by name too.
`partial_rotary_factor` (Phi-4-mini: 0.75) and `original_max_position_embeddings` sit at
the top level; transformers copies both into `rope_parameters`, and so do we.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zoo.core.checkpoint.config import DecoderConfig


@dataclass
class Phi3Config(DecoderConfig):
    TEXT_TYPE, FAMILY = "phi3", "Phi-3"
    ROPE_TYPES = ("default", "longrope")  # what transformers' Phi3Config accepts

    vocab_size: int = 32_064
    hidden_size: int = 3072
    intermediate_size: int = 8192
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int | None = None  # None: as many as the query heads
    head_dim: int | None = None  # no release sets it: hidden_size / num_attention_heads
    hidden_act: str = "silu"
    max_position_embeddings: int = 4096
    original_max_position_embeddings: int = 4096  # the pretraining context (longrope)
    rms_norm_eps: float = 1e-5
    rope_parameters: dict | None = None
    rope_scaling: dict | None = None  # the released spelling, folded into rope_parameters
    rope_theta: float | None = None
    partial_rotary_factor: float = 1.0  # the share of each head that RoPE rotates
    sliding_window: int | None = None  # keys each token sees (Phi-3-mini-4k: 2047)
    attention_bias: bool = False
    mlp_bias: bool = False
    lm_head_bias: bool = False
    tie_word_embeddings: bool = False
    bos_token_id: int | None = 1
    eos_token_id: int | list[int] | None = 32_000
    pad_token_id: int | None = 32_000
    stop_token_ids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        unsupported = self.settle_plain_fields()
        rope = self.rope_parameters
        rope.setdefault("partial_rotary_factor", self.partial_rotary_factor)
        if rope["rope_type"] == "longrope":  # transformers takes the top-level value
            rope["original_max_position_embeddings"] = self.original_max_position_embeddings
        for flag in ("attention_bias", "mlp_bias", "lm_head_bias"):
            if getattr(self, flag):
                unsupported.append(f"{flag}=True")  # transformers' Phi3 has no biases either
        if self.rotary_dim % 2:
            unsupported.append(f"an odd rotary dimension ({self.rotary_dim})")
        self.refuse(unsupported)

    @property
    def rotary_dim(self) -> int:
        """The leading dims of each head that RoPE rotates (the rest pass through)."""
        return int(self.head_dim * self.rope_parameters["partial_rotary_factor"])
