"""The Phi-3 text decoder (Phi-3-mini/medium, Phi-3.5-mini, Phi-4-mini, Phi-4), re-authored
for Core AI.

It computes what transformers 5.23 `Phi3ForCausalLM` computes (the parity tests hold it
to that). Every attention layer writes its keys and values into a cache state through the
KV strategy the model was built with (`zoo.core.asset.kv_writes`); the host passes the masks.

Phi-3 is the Llama layer (`zoo.core.model.layers.PreNormLayer`) with its weights fused and its
RoPE partial:
- one `qkv_proj` computes q, k and v (split by width after it), one `gate_up_proj` the
  gate and the up halves of the MLP: one matmul where Llama has three, and two;
- partial rotary: RoPE turns the first `partial_rotary_factor` of each head (Phi-4-mini:
  96 of 128 dims) and passes the rest through;
- `longrope` (Phi-3-mini-128k, Phi-3.5-mini, Phi-4-mini): per-frequency short factors and
  cos/sin scaled by an attention factor while a sequence stays within
  `original_max_position_embeddings` (4096); past it transformers switches every position
  to the long factors. The entry keeps its KV cache within 4096 and computes exactly the
  short regime; a larger cache is refused by name;
- `sliding_window` (Phi-3-mini-4k: 2047): each token sees the last 2047 keys; past it the
  host passes that mask (`sliding_mask`), as for Mistral in `zoo.llama`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zoo.core.asset.kv_writes import KVStrategy
from zoo.core.checkpoint.config import refuse_cache_past
from zoo.core.checkpoint.rope import attention_scaling, inverse_frequencies, rope_cos_sin
from zoo.core.model.kv_cache import KVCache
from zoo.core.model.layers import DecoderStack, PreNormLayer, RMSNorm, shorter_window, window_mask
from zoo.phi3.config import Phi3Config


class Attention(nn.Module):
    def __init__(self, config: Phi3Config, layer: int, strategy: KVStrategy, capacity: int):
        super().__init__()
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim, hidden = config.head_dim, config.hidden_size
        self.q_width, self.kv_width = self.heads * self.head_dim, self.kv_heads * self.head_dim
        self.cache = KVCache(strategy, layer, self.kv_heads, capacity, self.head_dim)
        self.qkv_proj = nn.Linear(hidden, self.q_width + 2 * self.kv_width, bias=False)
        self.o_proj = nn.Linear(self.q_width, hidden, bias=False)
        rope = config.rope_parameters  # frequencies for the rotated dims only
        self.register_buffer(
            "inv_freq", inverse_frequencies(config.rotary_dim, rope), persistent=False
        )
        self.scaling = attention_scaling(rope, config.max_position_embeddings)
        self.window = shorter_window(config.sliding_window, capacity)

    def forward(self, x, positions, step, states: dict) -> torch.Tensor:
        batch, length, _ = x.shape
        cos, sin = rope_cos_sin(positions, self.inv_freq)
        if self.scaling != 1.0:  # longrope's attention factor
            cos, sin = cos * self.scaling, sin * self.scaling
        q, k, v = self.qkv_proj(x).split([self.q_width, self.kv_width, self.kv_width], -1)
        q = q.reshape(batch, length, self.heads, self.head_dim)
        k = k.reshape(batch, length, self.kv_heads, self.head_dim)
        v = v.reshape(batch, length, self.kv_heads, self.head_dim)
        mask = window_mask(step, self.window)
        out = self.cache.rope_attend(states, q, k, v, cos, sin, step, mask)
        return self.o_proj(out)


class FusedGatedMLP(nn.Module):
    """`down(silu(gate) * up)` with gate and up from one projection (`gate_up_proj`)."""

    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_up_proj = nn.Linear(hidden, 2 * intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class DecoderLayer(PreNormLayer):
    def __init__(self, config: Phi3Config, layer: int, strategy: KVStrategy, capacity: int):
        attention = Attention(config, layer, strategy, capacity)
        hidden, intermediate = config.hidden_size, config.intermediate_size
        mlp = FusedGatedMLP(hidden, intermediate)
        super().__init__(attention, hidden, intermediate, config.rms_norm_eps, mlp)


class Phi3(DecoderStack):
    """The embedding, the layers, the final norm and the head (`zoo.core.model.layers.DecoderStack`:
    `forward(input_ids, positions, step, states) -> logits`)."""

    name = "phi3"  # the zoo entry, recorded in the asset's DecodeSpec

    def __init__(self, config: Phi3Config, strategy: KVStrategy, capacity: int) -> None:
        if config.rope_parameters["rope_type"] == "longrope":
            refuse_cache_past(
                config.original_max_position_embeddings,
                capacity,
                "original_max_position_embeddings",
                "past it longrope switches to its long factors, which this entry does not",
            )
        norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        super().__init__(config, strategy, capacity, DecoderLayer, norm, family="Phi-3")
        # the host builds a `sliding_mask` of this window (None: the cache fits inside it)
        self.sliding_window = shorter_window(config.sliding_window, capacity)
