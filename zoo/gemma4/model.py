"""The Gemma 4 text decoder, re-authored for export to Core AI.

It computes what transformers 5.23 `Gemma4ForCausalLM` computes (the parity tests hold it to
that), written for a fixed-shape decode graph: every attention layer writes its new keys and
values into a cache state through a KV strategy (`zoo.core.asset.kv_writes`), and the masks come
from the host. One forward serves prefill (T tokens) and decode (T = 1).

Gemma 4's quirks, in the order they appear below:
- RMSNorm computes `x * (mean(x^2) + eps)^-0.5 * w` (no `1 + w`); the value norm has no scale.
- Sliding layers use default RoPE; full layers use *proportional* RoPE: only the first
  `partial_rotary_factor` of the frequencies rotate, the rest have frequency zero.
- Full layers have a wider head (`per_layer_config`) and may share k and v
  (`attention_k_eq_v`: no v_proj, values are the raw keys).
- q and k are RMS-normed per head before RoPE; attention scaling is 1.0 (the norms take
  the place of 1/sqrt(d)).
- KV sharing: the last `num_kv_shared_layers` layers have no k/v weights and attend over the
  cache of the last earlier layer of their type ("store" -> "reuse").
- Those shared layers have a double-wide MLP when `use_double_wide_mlp`.
- Sandwich norms around attention and MLP, then a per-layer-embedding (PLE) residual, then
  the whole layer output times `layer_scalar`.
- Embeddings are scaled by sqrt(hidden_size); PLE embeddings by sqrt(ple_dim).
- The final logits are soft-capped: `tanh(logits / cap) * cap`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from zoo.core.asset.kv_writes import KVStrategy
from zoo.core.model.experts import StackedExperts, softmax_then_top_k
from zoo.core.model.kv_cache import KVCache
from zoo.core.model.layers import GatedMLP, head_logits, with_soft_tokens
from zoo.gemma4.config import Gemma4Config


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float, with_scale: bool = True) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim)) if with_scale else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * torch.pow(x.pow(2).mean(-1, keepdim=True) + self.eps, -0.5)
        return x * self.weight if self.weight is not None else x


def rope_frequencies(config: Gemma4Config, layer: int) -> torch.Tensor:
    """Inverse frequencies `[head_dim / 2]` of a layer (zeros where proportional RoPE stops)."""
    head_dim = config.layer_head_dim(layer)
    rope = config.rope_parameters[config.layer_types[layer]]
    rotated = int(rope.get("partial_rotary_factor", 1.0) * head_dim // 2)
    if rope["rope_type"] == "default":
        rotated = head_dim // 2
    exponents = torch.arange(0, 2 * rotated, 2, dtype=torch.float32) / head_dim
    inv_freq = 1.0 / rope["rope_theta"] ** exponents
    return torch.cat([inv_freq, torch.zeros(head_dim // 2 - rotated)])


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on `[B, T, heads, D]` with cos/sin `[B, T, D]` (halves rotated, HF layout)."""
    half = x.shape[-1] // 2
    rotated_half = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos.unsqueeze(2) + rotated_half * sin.unsqueeze(2)


class Attention(nn.Module):
    def __init__(
        self, config: Gemma4Config, layer: int, strategy: KVStrategy, capacity: int
    ) -> None:
        super().__init__()
        self.heads, self.head_dim = config.num_attention_heads, config.layer_head_dim(layer)
        self.kv_heads = config.layer_kv_heads(layer)
        self.reuses_kv = config.kv_sharing_modes()[layer] == "reuse"
        # a KV-sharing layer holds the cache of its source layer, and only reads it
        self.cache = KVCache(
            strategy, config.kv_source(layer), self.kv_heads, capacity, self.head_dim
        )
        hidden, eps = config.hidden_size, config.rms_norm_eps
        self.q_proj = nn.Linear(hidden, self.heads * self.head_dim, bias=False)
        self.q_norm = RMSNorm(self.head_dim, eps)
        if not self.reuses_kv:
            self.k_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=False)
            k_eq_v = config.attention_k_eq_v and not config.is_sliding(layer)
            self.v_proj = (
                None if k_eq_v else nn.Linear(hidden, self.kv_heads * self.head_dim, bias=False)
            )
            self.k_norm = RMSNorm(self.head_dim, eps)
            self.v_norm = RMSNorm(self.head_dim, eps, with_scale=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, hidden, bias=False)
        self.register_buffer("inv_freq", rope_frequencies(config, layer), persistent=False)

    def forward(self, x, positions, mask, step, caches: dict) -> torch.Tensor:
        batch, length, _ = x.shape
        freqs = positions[..., None].float() * self.inv_freq
        cos, sin = torch.cat([freqs, freqs], -1).cos(), torch.cat([freqs, freqs], -1).sin()

        q = self.q_norm(self.q_proj(x).reshape(batch, length, self.heads, self.head_dim))
        q = rotate(q, cos, sin).transpose(1, 2)
        if self.reuses_kv:  # the source layer wrote this step's column already
            keys, values = self.cache.read(caches)
        else:
            k = self.k_proj(x).reshape(batch, length, self.kv_heads, self.head_dim)
            v = k if self.v_proj is None else self.v_proj(x).reshape(k.shape)
            k = rotate(self.k_norm(k), cos, sin).transpose(1, 2)
            v = self.v_norm(v).transpose(1, 2)
            keys, values = self.cache.write(caches, k, v, step)
        out = self.cache.attend(q, keys, values, mask, scale=1.0)
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


def gelu_tanh_glu(gate_up: torch.Tensor) -> torch.Tensor:
    """The experts' gated unit: gate and up as the two halves of one projection."""
    gate, up = gate_up.chunk(2, dim=-1)
    return gelu_tanh(gate) * up


class Router(nn.Module):
    """26B-A4B's router: the residual RMS-normed (no weight), times `scale` and
    hidden^-0.5, to one logit per expert (`proj`); softmax in fp32, the top k renormalised,
    each then times its expert's `per_expert_scale`."""

    def __init__(self, config: Gemma4Config) -> None:
        super().__init__()
        hidden, self.top_k = config.hidden_size, config.top_k_experts
        self.norm = RMSNorm(hidden, config.rms_norm_eps, with_scale=False)
        self.proj = nn.Linear(hidden, config.num_experts, bias=False)
        self.proj.is_router = True  # kept float32 by every preset (zoo.core.compression.presets)
        self.scale = nn.Parameter(torch.ones(hidden))
        self.per_expert_scale = nn.Parameter(torch.ones(config.num_experts))
        self.root = hidden**-0.5

    def forward(self, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.proj(self.norm(flat) * self.scale * self.root)
        weights, indices = softmax_then_top_k(logits, self.top_k, renormalize=True)
        return weights * self.per_expert_scale[indices], indices


class DecoderLayer(nn.Module):
    def __init__(
        self, config: Gemma4Config, layer: int, strategy: KVStrategy, capacity: int
    ) -> None:
        super().__init__()
        hidden, eps = config.hidden_size, config.rms_norm_eps
        self.sliding = config.is_sliding(layer)
        self.self_attn = Attention(config, layer, strategy, capacity)
        shared = config.kv_sharing_modes()[layer] == "reuse"
        wide = 2 if config.use_double_wide_mlp and shared else 1
        self.mlp = GatedMLP(hidden, config.intermediate_size * wide, gelu_tanh)
        self.input_layernorm = RMSNorm(hidden, eps)
        self.post_attention_layernorm = RMSNorm(hidden, eps)
        self.pre_feedforward_layernorm = RMSNorm(hidden, eps)
        self.post_feedforward_layernorm = RMSNorm(hidden, eps)
        self.ple_dim = config.hidden_size_per_layer_input
        if self.ple_dim:
            self.per_layer_input_gate = nn.Linear(hidden, self.ple_dim, bias=False)
            self.per_layer_projection = nn.Linear(self.ple_dim, hidden, bias=False)
            self.post_per_layer_input_norm = RMSNorm(hidden, eps)
        self.register_buffer("layer_scalar", torch.ones(1))
        self.moe = config.enable_moe_block
        if self.moe:  # experts stacked as transformers saves them: [experts, out, in]
            self.router = Router(config)
            self.experts = StackedExperts(
                config.num_experts,
                hidden,
                config.moe_intermediate_size,
                gelu_tanh_glu,
                bias=False,
                transposed=True,
            )
            self.pre_feedforward_layernorm_2 = RMSNorm(hidden, eps)
            self.post_feedforward_layernorm_1 = RMSNorm(hidden, eps)
            self.post_feedforward_layernorm_2 = RMSNorm(hidden, eps)

    def forward(self, h, per_layer_input, positions, masks, step, caches) -> torch.Tensor:
        mask = masks["sliding"] if self.sliding else masks["full"]
        attended = self.self_attn(self.input_layernorm(h), positions, mask, step, caches)
        h = h + self.post_attention_layernorm(attended)
        out = self.mlp(self.pre_feedforward_layernorm(h))
        if self.moe:  # beside the MLP, from the same residual
            flat = h.reshape(-1, h.shape[-1])
            weights, indices = self.router(flat)
            routed = self.experts.compute(self.pre_feedforward_layernorm_2(flat), weights, indices)
            out = self.post_feedforward_layernorm_1(out) + self.post_feedforward_layernorm_2(
                routed.reshape(h.shape)
            )
        h = h + self.post_feedforward_layernorm(out)
        if self.ple_dim:
            gate = gelu_tanh(self.per_layer_input_gate(h)) * per_layer_input
            h = h + self.post_per_layer_input_norm(self.per_layer_projection(gate))
        return h * self.layer_scalar


class Gemma4(nn.Module):
    """`forward(input_ids, positions, step, caches) -> logits`.

    `step` holds the KV strategy's inputs by name (`strategy.step_inputs`: write index or
    mask, and `attn_mask` for full layers) and the `sliding_mask` of the sliding-window
    layers; `caches` the states of `state_shapes()` by name (`zoo.core.export.functions.FlatDecoder`
    flattens both for export).
    """

    name = "gemma4"  # the zoo entry, recorded in the asset's DecodeSpec
    # a sidecar input -> the checkpoint table (our name) its rows come from
    SIDECAR_WEIGHTS = {"per_layer_embeddings": "embed_tokens_per_layer.weight"}

    def __init__(
        self,
        config: Gemma4Config,
        strategy: KVStrategy,
        capacity: int,
        ple_sidecar: bool = False,
    ) -> None:
        super().__init__()
        strategy.check_serves("Gemma 4")
        self.config, self.strategy, self.capacity = config, strategy, capacity
        hidden, layers = config.hidden_size, config.num_hidden_layers
        self.embed_tokens = nn.Embedding(config.vocab_size, hidden)
        self.layers = nn.ModuleList(
            DecoderLayer(config, i, strategy, capacity) for i in range(layers)
        )
        self.norm = RMSNorm(hidden, config.rms_norm_eps)
        self.lm_head = (
            None if config.tie_word_embeddings else nn.Linear(hidden, config.vocab_size, bias=False)
        )
        self.ple_dim = config.hidden_size_per_layer_input
        # `ple_sidecar`: the PLE table stays out of the graph, as an int8 file beside it whose
        # rows the host looks up per token (zoo.core.asset.sidecar); the loader sets the source.
        self.sidecar_inputs = {}  # input name -> row width, looked up by the host
        self.sidecars = {}  # input name -> zoo.core.asset.sidecar.SidecarSource
        if self.ple_dim and ple_sidecar:
            self.sidecar_inputs["per_layer_embeddings"] = layers * self.ple_dim
        elif self.ple_dim:
            self.embed_tokens_per_layer = nn.Embedding(
                config.vocab_size_per_layer_input, layers * self.ple_dim
            )
        if self.ple_dim:
            self.per_layer_model_projection = nn.Linear(hidden, layers * self.ple_dim, bias=False)
            self.per_layer_projection_norm = RMSNorm(self.ple_dim, config.rms_norm_eps)

    @property
    def sliding_window(self) -> int:
        """The host builds a `sliding_mask` input of this window for the sliding layers."""
        return self.config.sliding_window

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        """The exported functions' states: the caches of the layers with their own KV."""
        shapes = {}
        for layer in self.layers:
            if not layer.self_attn.reuses_kv:
                shapes.update(layer.self_attn.cache.shapes())
        return shapes

    def per_layer_inputs(self, input_ids, embeds, step: dict) -> torch.Tensor:
        """PLE: a token-identity embedding plus a projection of the context embedding."""
        batch, length = input_ids.shape
        shape = (batch, length, len(self.layers), self.ple_dim)
        if "per_layer_embeddings" in self.sidecar_inputs:  # rows the host looked up
            identity = step["per_layer_embeddings"] * self.ple_dim**0.5
        else:
            identity = self.embed_tokens_per_layer(input_ids) * self.ple_dim**0.5
        context = self.per_layer_model_projection(embeds) * self.config.hidden_size**-0.5
        context = self.per_layer_projection_norm(context.reshape(shape))
        return (context + identity.reshape(shape)) * 2**-0.5

    def forward(self, input_ids, positions, step: dict, caches: dict, last_row_only=False):
        h = with_soft_tokens(self.embed(input_ids), step)
        carried = self.carried(input_ids, h, step)
        h = self.run_layers(h, 0, len(self.layers), positions, step, caches, carried)
        return self.head(h, last_row_only)

    # -- layer ranges (zoo.core.export.ranges): the PLE inputs are computed once, from the
    # embedding, and passed to every later range; a KV-shared layer's range holds the
    # cache it reads (its source layer's), so that cache is in two ranges
    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embed_tokens(input_ids) * self.config.hidden_size**0.5

    def carried_shapes(self, length: int) -> dict[str, tuple[int, ...]]:
        return {"per_layer": (1, length, len(self.layers), self.ple_dim)} if self.ple_dim else {}

    def carried(self, input_ids, h: torch.Tensor, step: dict) -> dict:
        return {"per_layer": self.per_layer_inputs(input_ids, h, step)} if self.ple_dim else {}

    def run_layers(self, h, start, stop, positions, step, caches, carried) -> torch.Tensor:
        masks = {"full": step["attn_mask"], "sliding": step["sliding_mask"]}
        per_layer = carried.get("per_layer")
        for i in range(start, stop):
            layer_input = per_layer[:, :, i] if per_layer is not None else None
            h = self.layers[i](h, layer_input, positions, masks, step, caches)
        return h

    def read_only_states(self, start: int, stop: int) -> list[str]:
        """The caches KV-shared layers in [start, stop) read and no layer there writes."""
        written = self._written_states(start, stop)
        return [n for n in self.layer_state_shapes(start, stop) if n not in written]

    def _written_states(self, start: int, stop: int) -> set[str]:
        layers = [layer for layer in self.layers[start:stop] if not layer.self_attn.reuses_kv]
        return {n for layer in layers for n in layer.self_attn.cache.shapes()}

    def layer_state_shapes(self, start: int, stop: int) -> dict[str, tuple[int, ...]]:
        """The caches layers [start, stop) write, and those their KV-shared layers read."""
        layers = self.layers[start:stop]
        return {n: s for layer in layers for n, s in layer.self_attn.cache.shapes().items()}

    def head(self, h: torch.Tensor, last_row_only: bool = False) -> torch.Tensor:
        return head_logits(
            h,
            self.norm,
            self.embed_tokens,
            self.lm_head,
            last_row_only,
            self.config.final_logit_softcapping,
        )
