"""The Qwen3.5 mixture-of-experts decoder (35B-A3B, 122B-A10B, 397B-A17B), re-authored for
Core AI.

It computes what transformers 5.23 `Qwen3_5MoeForCausalLM` computes (the parity tests hold
it to that). It is the dense Qwen3.5 hybrid (`zoo.qwen3_5`: three GatedDeltaNet layers to
one full attention, their recurrent, conv and KV states) with every layer's MLP replaced by
a mixture of experts (`zoo.core.model.experts`):
- a router (`mlp.gate`) picks 8 of 256 experts per token: softmax over all of them in
  fp32, the top 8, renormalised to sum to one;
- each expert is a SiLU gated MLP of `moe_intermediate_size` (512 in 35B-A3B);
- a shared expert (`mlp.shared_expert`, 512 wide) every token takes, weighted by
  `sigmoid(mlp.shared_expert_gate(x))`, is added to the chosen experts' sum.
"""

from __future__ import annotations

from torch import nn

from zoo.core.model.experts import MixtureOfExperts
from zoo.qwen3_5.model import DecoderLayer as DenseLayer
from zoo.qwen3_5.model import Qwen3_5
from zoo.qwen3_5_moe.config import Qwen3_5MoeConfig


class DecoderLayer(DenseLayer):
    @staticmethod
    def mlp_of(config: Qwen3_5MoeConfig) -> nn.Module:
        return MixtureOfExperts(
            config.hidden_size,
            config.moe_intermediate_size,
            config.num_experts,
            config.num_experts_per_tok,
            activation=nn.functional.silu,
            routing="softmax-top-k",
            renormalize=True,
            shared_intermediate=config.shared_expert_intermediate_size,
        )


class Qwen3_5Moe(Qwen3_5):
    """The dense hybrid's embedding, layers, norm and head, each layer with experts."""

    name = "qwen3_5_moe"  # the zoo entry, recorded in the asset's DecodeSpec
    family = "Qwen3.5 MoE"
    layer_class = DecoderLayer
