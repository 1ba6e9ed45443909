"""The OLMo 2 text decoder (1B to 32B), re-authored for Core AI.

It computes what transformers 5.23 `Olmo2ForCausalLM` computes (the parity tests hold it
to that). Every attention layer writes its keys and values into a cache state through the
KV strategy the model was built with (`zoo.core.asset.kv_writes`); the host passes the masks.

OLMo 2 moves the norms of the Llama decoder:
- no norm before attention or the MLP: each block's *output* is RMS-normed before it joins
  the residual stream (`post_attention_layernorm`, `post_feedforward_layernorm`);
- qk-norm over the whole projection: q (all heads, `heads x head_dim` values) and k are
  RMS-normed before they are split into heads, so one norm spans every head (Qwen3 norms
  each head on its own);
- RoPE base 500000 on the whole head, a SiLU gated MLP, an untied head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zoo.core.asset.kv_writes import KVStrategy
from zoo.core.checkpoint.rope import inverse_frequencies, rope_cos_sin
from zoo.core.model.kv_cache import KVCache
from zoo.core.model.layers import DecoderStack, GatedMLP, RMSNorm
from zoo.olmo2.config import Olmo2Config


class Attention(nn.Module):
    def __init__(self, config: Olmo2Config, layer: int, strategy: KVStrategy, capacity: int):
        super().__init__()
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim, hidden, bias = config.head_dim, config.hidden_size, config.attention_bias
        q_width, kv_width = self.heads * self.head_dim, self.kv_heads * self.head_dim
        self.cache = KVCache(strategy, layer, self.kv_heads, capacity, self.head_dim)
        self.q_proj = nn.Linear(hidden, q_width, bias=bias)
        self.k_proj = nn.Linear(hidden, kv_width, bias=bias)
        self.v_proj = nn.Linear(hidden, kv_width, bias=bias)
        self.o_proj = nn.Linear(q_width, hidden, bias=bias)
        self.q_norm = RMSNorm(q_width, config.rms_norm_eps)  # across all heads at once
        self.k_norm = RMSNorm(kv_width, config.rms_norm_eps)
        inv_freq = inverse_frequencies(self.head_dim, config.rope_parameters)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, positions, step, states: dict) -> torch.Tensor:
        batch, length, _ = x.shape
        cos, sin = rope_cos_sin(positions, self.inv_freq)
        q = self.q_norm(self.q_proj(x)).reshape(batch, length, self.heads, self.head_dim)
        k = self.k_norm(self.k_proj(x)).reshape(batch, length, self.kv_heads, self.head_dim)
        v = self.v_proj(x).reshape(batch, length, self.kv_heads, self.head_dim)
        out = self.cache.rope_attend(states, q, k, v, cos, sin, step, step["attn_mask"])
        return self.o_proj(out)


class DecoderLayer(nn.Module):
    def __init__(self, config: Olmo2Config, layer: int, strategy: KVStrategy, capacity: int):
        super().__init__()
        hidden, eps = config.hidden_size, config.rms_norm_eps
        self.self_attn = Attention(config, layer, strategy, capacity)
        self.mlp = GatedMLP(hidden, config.intermediate_size, F.silu)
        self.post_attention_layernorm = RMSNorm(hidden, eps)
        self.post_feedforward_layernorm = RMSNorm(hidden, eps)

    def forward(self, h, positions, step, states: dict) -> torch.Tensor:
        h = h + self.post_attention_layernorm(self.self_attn(h, positions, step, states))
        return h + self.post_feedforward_layernorm(self.mlp(h))


class Olmo2(DecoderStack):
    """The embedding, the layers, the final norm and the head (`zoo.core.model.layers.DecoderStack`:
    `forward(input_ids, positions, step, states) -> logits`)."""

    name = "olmo2"  # the zoo entry, recorded in the asset's DecodeSpec

    def __init__(self, config: Olmo2Config, strategy: KVStrategy, capacity: int) -> None:
        norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        super().__init__(config, strategy, capacity, DecoderLayer, norm, family="OLMo 2")
