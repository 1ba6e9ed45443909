"""The Qwen3 dense text decoder (0.6B to 32B), re-authored for Core AI.

It computes what transformers 5.23 `Qwen3ForCausalLM` computes (the parity tests hold it
to that). Every attention layer writes its keys and values into a cache state through the
KV strategy the model was built with (`zoo.core.asset.kv_writes`); the host passes the masks.

Qwen3 is the Llama decoder (`zoo.llama`) with one change where it matters for export:
- qk-norm: q and k are RMS-normed per head (a learned weight of `head_dim`) after their
  projections and before RoPE, which keeps attention logits in range without biases
  (Qwen2 had q/k/v biases instead; Qwen3 has none unless `attention_bias`);
- `head_dim` is set, not derived: 0.6B has 16 heads of 128 over a hidden size of 1024, so
  the attention width (2048) is twice the hidden size;
- RoPE base 1e6 on the whole head, a SiLU gated MLP, the head tied up to 4B, untied above.
"""

from __future__ import annotations

import torch
from torch import nn

from zoo.core.asset.kv_writes import KVStrategy
from zoo.core.checkpoint.rope import inverse_frequencies, rope_cos_sin
from zoo.core.model.kv_cache import KVCache
from zoo.core.model.layers import DecoderStack, PreNormLayer, RMSNorm
from zoo.qwen3.config import Qwen3Config


class Attention(nn.Module):
    def __init__(self, config: Qwen3Config, layer: int, strategy: KVStrategy, capacity: int):
        super().__init__()
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim, hidden, bias = config.head_dim, config.hidden_size, config.attention_bias
        self.cache = KVCache(strategy, layer, self.kv_heads, capacity, self.head_dim)
        self.q_proj = nn.Linear(hidden, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, hidden, bias=bias)
        self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
        inv_freq = inverse_frequencies(self.head_dim, config.rope_parameters)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, positions, step, states: dict) -> torch.Tensor:
        batch, length, _ = x.shape
        cos, sin = rope_cos_sin(positions, self.inv_freq)
        # [B, T, heads, D]: normed per head, before RoPE
        q = self.q_norm(self.q_proj(x).reshape(batch, length, self.heads, self.head_dim))
        k = self.k_norm(self.k_proj(x).reshape(batch, length, self.kv_heads, self.head_dim))
        v = self.v_proj(x).reshape(batch, length, self.kv_heads, self.head_dim)
        out = self.cache.rope_attend(states, q, k, v, cos, sin, step, step["attn_mask"])
        return self.o_proj(out)


class DecoderLayer(PreNormLayer):
    def __init__(self, config: Qwen3Config, layer: int, strategy: KVStrategy, capacity: int):
        attention = Attention(config, layer, strategy, capacity)
        hidden, eps = config.hidden_size, config.rms_norm_eps
        super().__init__(attention, hidden, config.intermediate_size, eps)


class Qwen3(DecoderStack):
    """The embedding, the layers, the final norm and the head (`zoo.core.model.layers.DecoderStack`:
    `forward(input_ids, positions, step, states) -> logits`)."""

    name = "qwen3"  # the zoo entry, recorded in the asset's DecodeSpec

    def __init__(self, config: Qwen3Config, strategy: KVStrategy, capacity: int) -> None:
        norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        super().__init__(config, strategy, capacity, DecoderLayer, norm, family="Qwen3")
