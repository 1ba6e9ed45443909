"""The Qwen3.5 text decoder (hybrid GatedDeltaNet + attention), re-authored for Core AI.

It computes what transformers 5.23 `Qwen3_5ForCausalLM` computes (the parity tests hold it
to that). Three layers in four are GatedDeltaNet (linear attention with a recurrent state and
a conv state), every fourth is full attention with a KV cache. All of those are states of the
exported functions; one forward serves prefill (T tokens) and decode (T = 1).

Qwen3.5's parts, in the order they appear below:
- RMSNorm computes `x * rsqrt(mean(x^2) + eps) * (1 + w)` (weights start at zero); the
  GatedDeltaNet output norm is `norm(x) * w * silu(z)` (weights start at one).
- GatedDeltaNet: separate q/k/v (`in_proj_qkv`), gate (`in_proj_z`), beta (`in_proj_b`) and
  decay (`in_proj_a`) projections; a depthwise causal conv (kernel 4) over q/k/v carrying its
  last 3 inputs as the conv state; fewer key heads than value heads (q and k are repeated);
  decay `g = -exp(A_log) * softplus(a + dt_bias)`; the gated delta rule with l2-normed q and k.
- Attention: `q_proj` is twice as wide (query and a per-channel output gate), q/k RMSNorm
  per head, partial RoPE on the first quarter of the head, output times `sigmoid(gate)`.
- Multimodal RoPE: the rotated frequencies are interleaved over three position axes (time,
  height, width: `mrope_section`); text sees the same position on all three, so a text-only
  asset rotates by plain partial RoPE, and an asset with a vision component takes the three
  axes from the host (`mrope_positions`, `zoo.core.host.media`).
- The multi-token-prediction (`mtp.*`) weights of some checkpoints are not used.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zoo.core.asset.kv_writes import KVStrategy
from zoo.core.model.deltanet import GatedDeltaRule, causal_conv
from zoo.core.model.kv_cache import KVCache
from zoo.core.model.layers import GatedMLP, head_logits, with_soft_tokens
from zoo.qwen3_5.config import Qwen3_5Config


class RMSNorm(nn.Module):
    """`x * rsqrt(mean(x^2) + eps) * (1 + w)`."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)


class GatedRMSNorm(nn.Module):
    """`rmsnorm(x) * w * silu(gate)`: the GatedDeltaNet output norm."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x * F.silu(gate)


class GatedDeltaNet(nn.Module):
    def __init__(self, config: Qwen3_5Config, one_step_decode: bool = True) -> None:
        super().__init__()
        c = config
        self.key_heads, self.value_heads = c.linear_num_key_heads, c.linear_num_value_heads
        self.key_dim, self.value_dim = c.linear_key_head_dim, c.linear_value_head_dim
        keys, values = self.key_heads * self.key_dim, self.value_heads * self.value_dim
        self.in_proj_qkv = nn.Linear(c.hidden_size, 2 * keys + values, bias=False)
        self.in_proj_z = nn.Linear(c.hidden_size, values, bias=False)
        self.in_proj_b = nn.Linear(c.hidden_size, self.value_heads, bias=False)
        self.in_proj_a = nn.Linear(c.hidden_size, self.value_heads, bias=False)
        self.conv1d = nn.Conv1d(
            c.conv_dim, c.conv_dim, c.linear_conv_kernel_dim, groups=c.conv_dim, bias=False
        )
        self.dt_bias = nn.Parameter(torch.ones(self.value_heads))
        self.A_log = nn.Parameter(torch.zeros(self.value_heads))
        self.norm = GatedRMSNorm(self.value_dim, c.rms_norm_eps)
        self.out_proj = nn.Linear(values, c.hidden_size, bias=False)
        self.rule = GatedDeltaRule(one_step=one_step_decode)

    def forward(self, x, conv_state, recurrent_state) -> torch.Tensor:
        batch, length, _ = x.shape
        qkv, new_conv = causal_conv(self.in_proj_qkv(x), conv_state, self.conv1d.weight)
        conv_state.copy_(new_conv)
        keys = self.key_heads * self.key_dim
        q, k, v = torch.split(qkv, [keys, keys, qkv.shape[-1] - 2 * keys], -1)
        repeat = self.value_heads // self.key_heads  # each key head serves `repeat` value heads
        q = q.reshape(batch, length, self.key_heads, self.key_dim).repeat_interleave(repeat, 2)
        k = k.reshape(batch, length, self.key_heads, self.key_dim).repeat_interleave(repeat, 2)
        v = v.reshape(batch, length, self.value_heads, self.value_dim)
        beta = torch.sigmoid(self.in_proj_b(x))
        g = -self.A_log.exp() * F.softplus(self.in_proj_a(x) + self.dt_bias)
        out, new_state = self.rule(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            g.transpose(1, 2),
            beta.transpose(1, 2),
            recurrent_state,
        )
        recurrent_state.copy_(new_state)
        z = self.in_proj_z(x).reshape(batch, length, self.value_heads, self.value_dim)
        out = self.norm(out, z)  # out: [B, T, value_heads, value_dim]
        return self.out_proj(out.reshape(batch, length, -1))


class Attention(nn.Module):
    def __init__(
        self, config: Qwen3_5Config, layer: int, strategy: KVStrategy, capacity: int
    ) -> None:
        super().__init__()
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim, hidden = config.head_dim, config.hidden_size
        self.cache = KVCache(strategy, layer, self.kv_heads, capacity, self.head_dim)
        self.q_proj = nn.Linear(hidden, 2 * self.heads * self.head_dim, bias=False)  # + gate
        self.k_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, hidden, bias=False)
        self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps)
        rotary, theta = config.rotary_dim, config.rope_parameters["rope_theta"]
        inv_freq = 1.0 / theta ** (torch.arange(0, rotary, 2, dtype=torch.float32) / rotary)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        # which of the three position axes each frequency reads (interleaved: t, h, w, t, ...)
        section = config.rope_parameters.get("mrope_section") or [11, 11, 10]  # transformers'

        axis = torch.zeros(rotary // 2, dtype=torch.long)
        for dim in (1, 2):
            axis[dim : section[dim] * 3 : 3] = dim
        self.register_buffer("axis", axis, persistent=False)

    def rotate(self, x: torch.Tensor, positions: torch.Tensor, step: dict) -> torch.Tensor:
        """Partial RoPE on `[B, H, T, D]`: the first `rotary_dim` channels rotate; with
        images, each frequency by its axis of the host's `mrope_positions` `[3, T]`."""
        if "mrope_positions" in step:
            axes = step["mrope_positions"].float()[self.axis]  # [rotary/2, T]
            freqs = (axes.transpose(0, 1) * self.inv_freq)[None, None]  # [1, 1, T, rotary/2]
        else:
            freqs = positions[:, None, :, None].float() * self.inv_freq  # [B, 1, T, rotary/2]
        cos, sin = torch.cat([freqs, freqs], -1).cos(), torch.cat([freqs, freqs], -1).sin()
        rotary = cos.shape[-1]
        x_rot, x_pass = x[..., :rotary], x[..., rotary:]
        half = rotary // 2
        rotated = torch.cat([-x_rot[..., half:], x_rot[..., :half]], dim=-1)
        return torch.cat([x_rot * cos + rotated * sin, x_pass], dim=-1)

    def forward(self, x, positions, step, states: dict) -> torch.Tensor:
        batch, length, _ = x.shape
        query, gate = (
            self.q_proj(x).reshape(batch, length, self.heads, 2 * self.head_dim).chunk(2, -1)
        )
        q = self.rotate(self.q_norm(query).transpose(1, 2), positions, step)
        k = self.k_norm(self.k_proj(x).reshape(batch, length, self.kv_heads, self.head_dim))
        k = self.rotate(k.transpose(1, 2), positions, step)
        v = self.v_proj(x).reshape(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        keys, values = self.cache.write(states, k, v, step)
        out = self.cache.attend(q, keys, values, step["attn_mask"])
        out = out.transpose(1, 2).reshape(batch, length, -1)
        return self.o_proj(out * torch.sigmoid(gate.reshape(batch, length, -1)))


class DecoderLayer(nn.Module):
    def __init__(
        self,
        config: Qwen3_5Config,
        layer: int,
        strategy: KVStrategy,
        capacity: int,
        one_step_decode: bool,
    ) -> None:
        super().__init__()
        self.layer, self.config = layer, config
        self.linear = config.layer_types[layer] == "linear_attention"
        if self.linear:
            self.linear_attn = GatedDeltaNet(config, one_step_decode)
        else:
            self.self_attn = Attention(config, layer, strategy, capacity)
        self.mlp = self.mlp_of(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    @staticmethod
    def mlp_of(config: Qwen3_5Config) -> nn.Module:
        """The layer's MLP (zoo.qwen3_5_moe: a mixture of experts instead)."""
        return GatedMLP(config.hidden_size, config.intermediate_size, F.silu)

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        """A conv and a recurrent state (GatedDeltaNet), or the attention's KV cache."""
        if not self.linear:
            return self.self_attn.cache.shapes()
        c = self.config
        return {
            f"conv_state_{self.layer}": (1, c.linear_conv_kernel_dim - 1, c.conv_dim),  # time-major
            f"recurrent_state_{self.layer}": (
                1,
                c.linear_num_value_heads,
                c.linear_key_head_dim,
                c.linear_value_head_dim,
            ),
        }

    def forward(self, h, positions, step, states: dict) -> torch.Tensor:
        x = self.input_layernorm(h)
        if self.linear:
            conv, recurrent = (states[name] for name in self.state_shapes())
            h = h + self.linear_attn(x, conv, recurrent)
        else:
            h = h + self.self_attn(x, positions, step, states)
        return h + self.mlp(self.post_attention_layernorm(h))


class Qwen3_5(nn.Module):
    """`forward(input_ids, positions, step, states) -> logits`.

    `step` holds the KV strategy's inputs by name (`strategy.step_inputs`), for the
    attention layers; `states` the states of `state_shapes()` by name: per layer, a conv and
    a recurrent state (GatedDeltaNet) or a key and a value cache (attention)
    (`zoo.core.export.functions.FlatDecoder` flattens both for export).
    """

    name = "qwen3_5"  # the zoo entry, recorded in the asset's DecodeSpec
    family = "Qwen3.5"
    layer_class = DecoderLayer  # zoo.qwen3_5_moe: the same layers with experts

    def __init__(
        self,
        config: Qwen3_5Config,
        strategy: KVStrategy,
        capacity: int,
        one_step_decode: bool = True,
    ) -> None:
        super().__init__()
        strategy.check_serves(self.family)
        self.config, self.strategy, self.capacity = config, strategy, capacity
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(
            self.layer_class(config, i, strategy, capacity, one_step_decode)
            for i in range(config.num_hidden_layers)
        )
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = (
            None
            if config.tie_word_embeddings
            else nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        )

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        """The exported functions' states, layer by layer."""
        return self.layer_state_shapes(0, len(self.layers))

    def layer_state_shapes(self, start: int, stop: int) -> dict[str, tuple[int, ...]]:
        """The states of layers [start, stop) (a layer range, `zoo.core.export.ranges`): the
        GatedDeltaNet states stay with their layer like the KV caches."""
        layers = self.layers[start:stop]
        return {name: shape for layer in layers for name, shape in layer.state_shapes().items()}

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embed_tokens(input_ids)

    def head(self, h: torch.Tensor, last_row_only: bool = False) -> torch.Tensor:
        return head_logits(h, self.norm, self.embed_tokens, self.lm_head, last_row_only)

    def forward(self, input_ids, positions, step: dict, states: dict, last_row_only=False):
        h = with_soft_tokens(self.embed(input_ids), step)
        for layer in self.layers:
            h = layer(h, positions, step, states)
        return self.head(h, last_row_only)
