"""OLMo 2 text-decoder configuration (1B, 7B, 13B, 32B), read from a checkpoint's config.json.

Field names and defaults follow transformers 5.23 `Olmo2Config`. Released files spell RoPE
as `rope_theta` (500000) + `rope_scaling: null`; transformers 5 re-saves it as
`rope_parameters`; both are read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zoo.core.checkpoint.config import DecoderConfig


@dataclass
class Olmo2Config(DecoderConfig):
    TEXT_TYPE, FAMILY = "olmo2", "OLMo 2"

    vocab_size: int = 50_304
    hidden_size: int = 4096
    intermediate_size: int = 11_008
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int | None = None  # None: as many as the query heads
    head_dim: int | None = None  # no release sets it: hidden_size / num_attention_heads
    hidden_act: str = "silu"
    rms_norm_eps: float = 1e-5
    rope_parameters: dict | None = None
    rope_scaling: dict | None = None  # the released spelling, folded into rope_parameters
    rope_theta: float | None = None
    attention_bias: bool = False
    tie_word_embeddings: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = 50_279
    pad_token_id: int | None = 1
    stop_token_ids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.refuse(self.settle_plain_fields())
