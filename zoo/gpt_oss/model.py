"""The GPT-OSS decoder (gpt-oss-20b, gpt-oss-120b), re-authored for Core AI.

It computes what transformers 5.23 `GptOssForCausalLM` computes (the parity tests hold it
to that). What is its own:
- attention with biases on q, k, v and o, and a learned **sink** per head: one more logit
  in every row's softmax, dropped after it (`zoo.core.model.layers.attend(sinks=)`), so a head
  may put its weight nowhere;
- layers alternate a **sliding window** of 128 keys (the host's `sliding_mask`, when the
  cache is longer) and full attention (`layer_types`);
- **yarn** RoPE on the whole head (`zoo.core.checkpoint.rope`): frequencies interpolated where the
  wavelength is long, kept where short, cos and sin scaled by its attention factor;
- every layer a **mixture of experts** (`zoo.core.model.experts.StackedMixtureOfExperts`): the
  router (with a bias) takes the top 4 logits, then a softmax over those four; experts
  stacked with biases, a clamped SwiGLU `(up + 1) * gate * sigmoid(1.702 gate)`.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from zoo.core.asset.kv_writes import KVStrategy
from zoo.core.checkpoint.rope import attention_scaling, inverse_frequencies, rope_cos_sin
from zoo.core.model.experts import StackedMixtureOfExperts, clamped_swiglu
from zoo.core.model.kv_cache import KVCache
from zoo.core.model.layers import DecoderStack, PreNormLayer, RMSNorm, shorter_window, window_mask
from zoo.gpt_oss.config import GptOssConfig


class Attention(nn.Module):
    def __init__(self, config: GptOssConfig, layer: int, strategy: KVStrategy, capacity: int):
        super().__init__()
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim, hidden, bias = config.head_dim, config.hidden_size, config.attention_bias
        self.cache = KVCache(strategy, layer, self.kv_heads, capacity, self.head_dim)
        self.q_proj = nn.Linear(hidden, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, hidden, bias=bias)
        self.sinks = nn.Parameter(torch.zeros(self.heads))
        rope = config.rope_parameters
        self.register_buffer("inv_freq", inverse_frequencies(self.head_dim, rope), persistent=False)
        self.scaling = attention_scaling(rope, config.max_position_embeddings)
        sliding = config.sliding_window if config.is_sliding(layer) else None
        self.window = shorter_window(sliding, capacity)

    def forward(self, x, positions, step, states: dict) -> torch.Tensor:
        batch, length, _ = x.shape
        cos, sin = rope_cos_sin(positions, self.inv_freq)
        cos, sin = cos * self.scaling, sin * self.scaling  # yarn's attention factor
        q = self.q_proj(x).reshape(batch, length, self.heads, self.head_dim)
        k = self.k_proj(x).reshape(batch, length, self.kv_heads, self.head_dim)
        v = self.v_proj(x).reshape(batch, length, self.kv_heads, self.head_dim)
        mask = window_mask(step, self.window)
        out = self.cache.rope_attend(states, q, k, v, cos, sin, step, mask, sinks=self.sinks)
        return self.o_proj(out)


class DecoderLayer(PreNormLayer):
    def __init__(self, config: GptOssConfig, layer: int, strategy: KVStrategy, capacity: int):
        hidden = config.hidden_size
        glu = functools.partial(
            clamped_swiglu, alpha=config.swiglu_alpha, limit=config.swiglu_limit
        )
        mlp = StackedMixtureOfExperts(
            hidden,
            config.intermediate_size,
            config.num_local_experts,
            config.num_experts_per_tok,
            glu,
            routing="top-k-softmax",
            router_name="router",
            router_bias=True,
        )
        attention = Attention(config, layer, strategy, capacity)
        super().__init__(attention, hidden, config.intermediate_size, config.rms_norm_eps, mlp)


class GptOss(DecoderStack):
    """The embedding, the layers, the final norm and the head (`zoo.core.model.layers.DecoderStack`:
    `forward(input_ids, positions, step, states) -> logits`)."""

    name = "gpt_oss"  # the zoo entry, recorded in the asset's DecodeSpec

    def __init__(self, config: GptOssConfig, strategy: KVStrategy, capacity: int) -> None:
        norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        super().__init__(config, strategy, capacity, DecoderLayer, norm, family="GPT-OSS")
        # the host builds a `sliding_mask` of this window (None: the cache fits inside it)
        self.sliding_window = shorter_window(config.sliding_window, capacity)
