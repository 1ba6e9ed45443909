"""The Mixtral decoder (8x7B, 8x22B), re-authored for Core AI.

It computes what transformers 5.23 `MixtralForCausalLM` computes (the parity tests hold it
to that): Mistral's attention (`zoo.llama`'s, RoPE base 1e6) and, in place of each layer's
MLP, a sparse mixture of 8 experts (`block_sparse_moe`, `zoo.core.model.experts`):
- the router (`block_sparse_moe.gate`) scores the 8 experts; softmax over all 8 in fp32,
  the top 2, renormalised to sum to one;
- each expert is a SiLU gated MLP whose projections the checkpoints call `w1` (gate),
  `w3` (up) and `w2` (down): ~13B of 47B parameters active per token in 8x7B.
"""

from __future__ import annotations

import torch
from torch import nn

from zoo.core.asset.kv_writes import KVStrategy
from zoo.core.model.experts import MixtureOfExperts
from zoo.core.model.layers import DecoderStack, RMSNorm, shorter_window
from zoo.llama.model import Attention
from zoo.mixtral.config import MixtralConfig


class DecoderLayer(nn.Module):
    def __init__(self, config: MixtralConfig, layer: int, strategy: KVStrategy, capacity: int):
        super().__init__()
        hidden, eps = config.hidden_size, config.rms_norm_eps
        self.self_attn = Attention(config, layer, strategy, capacity)
        self.block_sparse_moe = MixtureOfExperts(
            hidden,
            config.intermediate_size,
            config.num_local_experts,
            config.num_experts_per_tok,
            activation=nn.functional.silu,
            routing="softmax-top-k",
            renormalize=True,
            names=("w1", "w3", "w2"),
        )
        self.input_layernorm = RMSNorm(hidden, eps)
        self.post_attention_layernorm = RMSNorm(hidden, eps)

    def forward(self, h, positions, step, states: dict) -> torch.Tensor:
        h = h + self.self_attn(self.input_layernorm(h), positions, step, states)
        return h + self.block_sparse_moe(self.post_attention_layernorm(h))


class Mixtral(DecoderStack):
    """The embedding, the layers, the final norm and the head (`zoo.core.model.layers.DecoderStack`:
    `forward(input_ids, positions, step, states) -> logits`)."""

    name = "mixtral"  # the zoo entry, recorded in the asset's DecodeSpec

    def __init__(self, config: MixtralConfig, strategy: KVStrategy, capacity: int) -> None:
        norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        super().__init__(config, strategy, capacity, DecoderLayer, norm, family="Mixtral")
        # the host builds a `sliding_mask` of this window (None: the cache fits inside it)
        self.sliding_window = shorter_window(config.sliding_window, capacity)
