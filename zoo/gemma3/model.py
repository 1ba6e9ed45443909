"""The Gemma 3 text decoder, re-authored for Core AI.

It computes what transformers 5.23 `Gemma3ForCausalLM` (and the text part of
`Gemma3ForConditionalGeneration`) computes; the parity tests hold it to that. Every
attention layer writes its keys and values into a cache state through the KV strategy
(`zoo.core.asset.kv_writes`); the host passes the masks, a `sliding_mask` for the sliding-window
layers.

Gemma 3's parts, in the order they appear below:
- RMSNorm multiplies by `1 + w` (weights stored as offsets from one), also on q and k per
  head before RoPE (qk-norm);
- five sliding-window layers (a window of `sliding_window` keys), then one full-attention
  layer, each kind with its own RoPE base (10k sliding, 1M full; `linear` scaling on the
  full layers of the 4b and larger sizes);
- attention scores scaled by `query_pre_attn_scalar ** -0.5`, not by the head dim;
- sandwich norms: the attention and MLP outputs are normed before joining the residual;
- a gelu-tanh gated MLP; embeddings times `sqrt(hidden_size)`; a head tied to the
  embedding; a final logit softcap where a config sets one (no release does).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zoo.core.asset.kv_writes import KVStrategy
from zoo.core.checkpoint.rope import inverse_frequencies, rope_cos_sin
from zoo.core.model.kv_cache import KVCache
from zoo.core.model.layers import DecoderStack, GatedMLP, RMSNorm, head_logits
from zoo.gemma3.config import Gemma3Config


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


class Attention(nn.Module):
    def __init__(self, config: Gemma3Config, layer: int, strategy: KVStrategy, capacity: int):
        super().__init__()
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim, hidden, bias = config.head_dim, config.hidden_size, config.attention_bias
        self.scale = config.query_pre_attn_scalar**-0.5
        self.cache = KVCache(strategy, layer, self.kv_heads, capacity, self.head_dim)
        self.q_proj = nn.Linear(hidden, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, hidden, bias=bias)
        self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps, unit_offset=True)
        self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps, unit_offset=True)
        rope = config.rope_parameters[config.layer_types[layer]]
        self.register_buffer("inv_freq", inverse_frequencies(self.head_dim, rope), persistent=False)

    def forward(self, x, positions, mask, step, states: dict) -> torch.Tensor:
        batch, length, _ = x.shape
        cos, sin = rope_cos_sin(positions, self.inv_freq)
        q = self.q_norm(self.q_proj(x).reshape(batch, length, self.heads, self.head_dim))
        k = self.k_norm(self.k_proj(x).reshape(batch, length, self.kv_heads, self.head_dim))
        v = self.v_proj(x).reshape(batch, length, self.kv_heads, self.head_dim)
        out = self.cache.rope_attend(states, q, k, v, cos, sin, step, mask, self.scale)
        return self.o_proj(out)


class DecoderLayer(nn.Module):
    def __init__(self, config: Gemma3Config, layer: int, strategy: KVStrategy, capacity: int):
        super().__init__()
        hidden, eps = config.hidden_size, config.rms_norm_eps
        self.sliding = config.is_sliding(layer)
        self.self_attn = Attention(config, layer, strategy, capacity)
        self.mlp = GatedMLP(hidden, config.intermediate_size, gelu_tanh)
        self.input_layernorm = RMSNorm(hidden, eps, unit_offset=True)
        self.post_attention_layernorm = RMSNorm(hidden, eps, unit_offset=True)
        self.pre_feedforward_layernorm = RMSNorm(hidden, eps, unit_offset=True)
        self.post_feedforward_layernorm = RMSNorm(hidden, eps, unit_offset=True)

    def forward(self, h, positions, step, states: dict) -> torch.Tensor:
        mask = step["sliding_mask"] if self.sliding else step["attn_mask"]
        attended = self.self_attn(self.input_layernorm(h), positions, mask, step, states)
        h = h + self.post_attention_layernorm(attended)
        return h + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(h)))


class Gemma3(DecoderStack):
    """The embedding, the layers, the final norm and the head (`zoo.core.model.layers.DecoderStack`:
    `forward(input_ids, positions, step, states) -> logits`); `step` also holds the
    `sliding_mask` of the sliding-window layers. Gemma scales the embedding by
    `sqrt(hidden_size)` and may cap the logits."""

    name = "gemma3"  # the zoo entry, recorded in the asset's DecodeSpec

    def __init__(self, config: Gemma3Config, strategy: KVStrategy, capacity: int) -> None:
        norm = RMSNorm(config.hidden_size, config.rms_norm_eps, unit_offset=True)
        super().__init__(config, strategy, capacity, DecoderLayer, norm, family="Gemma 3")

    @property
    def sliding_window(self) -> int:
        """The host builds a `sliding_mask` input of this window for the sliding layers."""
        return self.config.sliding_window

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embed_tokens(input_ids) * self.config.hidden_size**0.5

    def head(self, h: torch.Tensor, last_row_only: bool = False) -> torch.Tensor:
        softcap = self.config.final_logit_softcapping
        return head_logits(h, self.norm, self.embed_tokens, self.lm_head, last_row_only, softcap)
