"""Qwen3 mixture-of-experts configuration (30B-A3B, Coder-30B-A3B, 235B-A22B), read from a
checkpoint's config.json.

Field names and defaults follow transformers 5.23 `Qwen3MoeConfig`. The released files say
`num_experts`; transformers 5 re-saves it as `num_local_experts`: both are read. Every
release routes each token to 8 of 128 experts with `norm_topk_prob: true`, on every layer
(`decoder_sparse_step: 1`, `mlp_only_layers: []`); both fields are honoured as transformers
reads them. Like dense Qwen3, `use_sliding_window: false` beside an unused
`sliding_window` / `max_window_layers`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zoo.core.checkpoint.config import DecoderConfig


@dataclass
class Qwen3MoeConfig(DecoderConfig):
    TEXT_TYPE, FAMILY = "qwen3_moe", "Qwen3 MoE"
    RESAVED_AS = {"num_experts": "num_local_experts"}  # ClassVar: DecoderConfig's

    vocab_size: int = 151_936
    hidden_size: int = 2048
    intermediate_size: int = 6144  # the dense MLP of `mlp_only_layers`
    moe_intermediate_size: int = 768  # each expert's
    num_hidden_layers: int = 24
    num_attention_heads: int = 32
    num_key_value_heads: int | None = 4
    head_dim: int | None = None  # None: hidden_size / num_attention_heads
    hidden_act: str = "silu"
    rms_norm_eps: float = 1e-6
    rope_parameters: dict | None = None
    rope_scaling: dict | None = None
    rope_theta: float | None = None
    attention_bias: bool = False
    use_sliding_window: bool = False
    sliding_window: int | None = None
    max_window_layers: int = 28
    num_experts: int = 128
    num_experts_per_tok: int = 8
    norm_topk_prob: bool = False
    decoder_sparse_step: int = 1
    mlp_only_layers: list[int] = field(default_factory=list)
    tie_word_embeddings: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    pad_token_id: int | None = None
    stop_token_ids: list[int] = field(default_factory=list)

    def sparse(self, layer: int) -> bool:
        """Whether `layer` routes to experts (transformers' rule) or has the dense MLP."""
        return (
            layer not in self.mlp_only_layers
            and self.num_experts > 0
            and (layer + 1) % self.decoder_sparse_step == 0
        )

    def __post_init__(self) -> None:
        unsupported = self.settle_plain_fields()
        if self.use_sliding_window:
            unsupported.append("sliding-window layers (use_sliding_window=true)")
        for name in ("moe_intermediate_size", "num_experts_per_tok", "decoder_sparse_step"):
            if getattr(self, name) < 1:
                raise ValueError(f"config.json: {name}={getattr(self, name)} (expected >= 1)")
        self.check_top_k()
        outside = [i for i in self.mlp_only_layers if not 0 <= i < self.num_hidden_layers]
        if outside:
            raise ValueError(f"config.json: mlp_only_layers {outside} are not layers")
        self.refuse(unsupported)
