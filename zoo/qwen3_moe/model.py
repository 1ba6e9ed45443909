"""The Qwen3 mixture-of-experts decoder (30B-A3B, Coder-30B-A3B, 235B-A22B), re-authored
for Core AI.

It computes what transformers 5.23 `Qwen3MoeForCausalLM` computes (the parity tests hold
it to that). It is dense Qwen3 (`zoo.qwen3`: qk-norm per head, RoPE on the whole head)
with the MLP of each layer replaced by a mixture of experts (`zoo.core.model.experts`):
- a router (`mlp.gate`, hidden -> 128 logits) picks 8 experts per token: softmax over all
  128 in fp32, the top 8, renormalised to sum to one (`norm_topk_prob`);
- each expert is a SiLU gated MLP of `moe_intermediate_size` (768 in 30B-A3B), so a token
  computes 8 x 768 of its 128 x 768 intermediate units: ~3B of 30B parameters active;
- layers in `mlp_only_layers`, or off the `decoder_sparse_step` beat, keep a dense MLP.
"""

from __future__ import annotations

from torch import nn

from zoo.core.asset.kv_writes import KVStrategy
from zoo.core.model.experts import MixtureOfExperts
from zoo.core.model.layers import DecoderStack, GatedMLP, PreNormLayer, RMSNorm
from zoo.qwen3.model import Attention
from zoo.qwen3_moe.config import Qwen3MoeConfig


class DecoderLayer(PreNormLayer):
    def __init__(self, config: Qwen3MoeConfig, layer: int, strategy: KVStrategy, capacity: int):
        hidden, eps, silu = config.hidden_size, config.rms_norm_eps, nn.functional.silu
        if config.sparse(layer):
            mlp = MixtureOfExperts(
                hidden,
                config.moe_intermediate_size,
                config.num_experts,
                config.num_experts_per_tok,
                activation=silu,
                routing="softmax-top-k",
                renormalize=config.norm_topk_prob,
            )
        else:
            mlp = GatedMLP(hidden, config.intermediate_size, silu)
        attention = Attention(config, layer, strategy, capacity)
        super().__init__(attention, hidden, config.intermediate_size, eps, mlp=mlp)


class Qwen3Moe(DecoderStack):
    """The embedding, the layers, the final norm and the head (`zoo.core.model.layers.DecoderStack`:
    `forward(input_ids, positions, step, states) -> logits`)."""

    name = "qwen3_moe"  # the zoo entry, recorded in the asset's DecodeSpec

    def __init__(self, config: Qwen3MoeConfig, strategy: KVStrategy, capacity: int) -> None:
        norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        super().__init__(config, strategy, capacity, DecoderLayer, norm, family="Qwen3 MoE")
