"""The Llama text decoder (SmolLM2, Llama 3.x; Mistral, Qwen2.5), re-authored for Core AI.

It computes what transformers 5.23 `LlamaForCausalLM` computes (the parity tests hold it
to that). Every attention layer writes its keys and values into a cache state through the
KV strategy the model was built with (`zoo.core.asset.kv_writes`); the host passes the masks. One
forward serves prefill (T tokens) and decode (T = 1).

Llama is the plain pre-norm decoder the other entries are variations of:
- RMSNorm `x * rsqrt(mean(x^2) + eps) * w` before attention and before the MLP;
- grouped-query attention scaled by `1/sqrt(head_dim)`, optional q/k/v/o biases
  (`attention_bias`) or q/k/v biases alone (`qkv_bias`: Qwen2), RoPE on the whole head:
  `default`, or `llama3` (Llama 3.1+: long wavelengths stretched by `factor`) from
  `zoo.core.checkpoint.rope`;
- a SiLU gated MLP; a head tied to the embedding (SmolLM2, Llama 3.2) or its own;
- Mistral's sliding window: each token sees the last `sliding_window` keys; the host
  passes that mask (`sliding_mask`) when the cache is longer than the window
  (`zoo.core.model.layers.shorter_window`), so a 32k cache works with Mistral 7B v0.1's 4096.
"""

from __future__ import annotations

import torch
from torch import nn

from zoo.core.asset.kv_writes import KVStrategy
from zoo.core.checkpoint.rope import inverse_frequencies, rope_cos_sin
from zoo.core.model.kv_cache import KVCache
from zoo.core.model.layers import DecoderStack, PreNormLayer, RMSNorm, shorter_window, window_mask
from zoo.llama.config import LlamaConfig


class Attention(nn.Module):
    def __init__(self, config: LlamaConfig, layer: int, strategy: KVStrategy, capacity: int):
        super().__init__()
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim, hidden, bias = config.head_dim, config.hidden_size, config.attention_bias
        qkv_bias = bias or config.qkv_bias
        self.cache = KVCache(strategy, layer, self.kv_heads, capacity, self.head_dim)
        self.q_proj = nn.Linear(hidden, self.heads * self.head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, hidden, bias=bias)
        inv_freq = inverse_frequencies(self.head_dim, config.rope_parameters)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.window = shorter_window(getattr(config, "sliding_window", None), capacity)

    def forward(self, x, positions, step, states: dict) -> torch.Tensor:
        batch, length, _ = x.shape
        cos, sin = rope_cos_sin(positions, self.inv_freq)
        q = self.q_proj(x).reshape(batch, length, self.heads, self.head_dim)
        k = self.k_proj(x).reshape(batch, length, self.kv_heads, self.head_dim)
        v = self.v_proj(x).reshape(batch, length, self.kv_heads, self.head_dim)
        mask = window_mask(step, self.window)
        out = self.cache.rope_attend(states, q, k, v, cos, sin, step, mask)
        return self.o_proj(out)


class DecoderLayer(PreNormLayer):
    def __init__(self, config: LlamaConfig, layer: int, strategy: KVStrategy, capacity: int):
        attention = Attention(config, layer, strategy, capacity)
        hidden, eps = config.hidden_size, config.rms_norm_eps
        super().__init__(attention, hidden, config.intermediate_size, eps)


class Llama(DecoderStack):
    """The embedding, the layers, the final norm and the head (`zoo.core.model.layers.DecoderStack`:
    `forward(input_ids, positions, step, states) -> logits`)."""

    name = "llama"  # the zoo entry, recorded in the asset's DecodeSpec

    def __init__(self, config: LlamaConfig, strategy: KVStrategy, capacity: int) -> None:
        norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        super().__init__(config, strategy, capacity, DecoderLayer, norm, family="Llama")
        # the host builds a `sliding_mask` of this window (None: the cache fits inside it)
        self.sliding_window = shorter_window(config.sliding_window, capacity)
