"""Layers every zoo model shares, written to export cleanly: plain torch ops, no magic."""

from __future__ import annotations

import torch


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
    keys_transposed: bool = False,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention written out: `softmax(q k^T * scale + mask) v`, grouped-query.

    q `[B, H, T, D]`, v `[B, kv_heads, S, D]`, k `[B, kv_heads, S, D]` (or `[B, kv_heads, D, S]`
    with `keys_transposed`), mask additive, one head: `[1, 1, T, S]`, `[1, 1, 1, S]` or
    `[T, S]`; a mask of fewer columns than the cache reads only the cache's first columns (an
    attention span). Each key head serves `H / kv_heads` query heads: the queries are grouped
    by reshaping instead of repeating the cache, and keys stored transposed are used as they
    are; on the Linux CPU runtime both copies cost more than the attention itself at 2k context
    (docs/performance.md). `sinks` (`[heads]`, GPT-OSS): a learned logit per head that joins
    every row's softmax as one more column and is dropped after it, so a head can attend
    to nothing in particular.
    """
    batch, heads, length, dim = q.shape
    if mask is not None and mask.shape[-1] < v.shape[-2]:
        # an attention span (zoo.core.export.functions): a mask narrower than the cache attends over
        # its first columns only; the runtime's cost follows the columns it reads
        span = mask.shape[-1]
        k = k[..., :span] if keys_transposed else k[..., :span, :]
        v = v[..., :span, :]
    kv_heads = k.shape[1]
    groups = heads // kv_heads
    scale = dim**-0.5 if scale is None else scale
    grouped = q.reshape(batch, kv_heads, groups * length, dim)
    scores = torch.matmul(grouped, k if keys_transposed else k.transpose(-1, -2)) * scale
    if mask is not None:  # a mask with one head ([1, 1, T, S] or [T, S]) serves every group
        mask = mask[:, :, None] if mask.dim() == 4 else mask
        scores = scores.reshape(batch, kv_heads, groups, length, -1) + mask
        scores = scores.reshape(batch, kv_heads, groups * length, -1)
    if sinks is not None:  # one column per row, each query head its own sink
        column = sinks.reshape(1, kv_heads, groups, 1, 1).expand(batch, -1, -1, length, 1)
        scores = torch.cat([scores, column.reshape(batch, kv_heads, groups * length, 1)], -1)
        weights = torch.softmax(scores, dim=-1)[..., :-1]
    else:
        weights = torch.softmax(scores, dim=-1)
    out = torch.matmul(weights, v)
    # Split the groups out before merging heads: with a dynamic query length (the engine
    # contract, zoo.core.export.apple_engine) torch.export cannot prove the one-step reshape
    # contiguous.
    return out.reshape(batch, kv_heads, groups, length, dim).reshape(batch, heads, length, dim)


def shorter_window(window: int | None, capacity: int) -> int | None:
    """A sliding window the KV cache outgrows, which every layer that has it must mask; or
    None: a window at least as long as the cache never cuts (full attention is the same
    function, as for Phi-4-mini's 262,144)."""
    return window if window is not None and window < capacity else None


def window_mask(step: dict, window: int | None) -> torch.Tensor:
    """The additive mask a layer attends with: the host's `sliding_mask` (the last `window`
    keys, `zoo.core.asset.decode_spec.DecodeSpec.host_inputs`) for a sliding layer, else
    `attn_mask`."""
    return step["sliding_mask"] if window else step["attn_mask"]


class RMSNorm(torch.nn.Module):
    """`x * rsqrt(mean(x^2) + eps) * w`, or `* (1 + w)` with `unit_offset` (Gemma, Qwen3.5:
    weights stored as offsets from one)."""

    def __init__(self, dim: int, eps: float, unit_offset: bool = False) -> None:
        super().__init__()
        self.eps, self.unit_offset = eps, unit_offset
        self.weight = torch.nn.Parameter(torch.zeros(dim) if unit_offset else torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = 1.0 + self.weight if self.unit_offset else self.weight
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * scale


class GatedMLP(torch.nn.Module):
    """`down(act(gate(x)) * up(x))`: the MLP of Gemma (gelu-tanh) and Qwen (silu)."""

    def __init__(self, hidden: int, intermediate: int, activation) -> None:
        super().__init__()
        self.activation = activation
        self.gate_proj = torch.nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = torch.nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = torch.nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.activation(self.gate_proj(x)) * self.up_proj(x))


class PreNormLayer(torch.nn.Module):
    """The Llama layer (Qwen3's, Phi-3's too): RMSNorm before the attention and before a
    SiLU gated MLP, each block's output added to the residual stream."""

    def __init__(
        self,
        attention: torch.nn.Module,
        hidden: int,
        intermediate: int,
        eps: float,
        mlp: torch.nn.Module | None = None,  # None: a SiLU GatedMLP
    ):
        super().__init__()
        self.self_attn = attention
        self.mlp = mlp or GatedMLP(hidden, intermediate, torch.nn.functional.silu)
        self.input_layernorm = RMSNorm(hidden, eps)
        self.post_attention_layernorm = RMSNorm(hidden, eps)

    def forward(self, h, positions, step, states: dict) -> torch.Tensor:
        h = h + self.self_attn(self.input_layernorm(h), positions, step, states)
        return h + self.mlp(self.post_attention_layernorm(h))


class DecoderStack(torch.nn.Module):
    """What the plain decoders (Llama, Qwen3, OLMo 2, Gemma 3) share around their layers:
    the token embedding, the layers (each owning its KV cache as `self_attn.cache`), the
    final norm and the head (tied to the embedding, or its own). A model subclasses it
    with its `name` and passes its decoder layer and final norm; it overrides `embed` or
    `head` where the family differs (Gemma's embedding scale and softcap).

    `forward(input_ids, positions, step, states) -> logits`: `step` holds the KV
    strategy's inputs by name (`strategy.step_inputs`: a write index or mask, `attn_mask`),
    `states` the caches of `state_shapes()` by name (`zoo.core.export.functions.FlatDecoder`
    flattens both for export).
    """

    name: str  # the zoo entry, recorded in the asset's DecodeSpec

    def __init__(self, config, strategy, capacity: int, layer, norm, family: str) -> None:
        super().__init__()
        strategy.check_serves(family)
        self.config, self.strategy, self.capacity = config, strategy, capacity
        hidden = config.hidden_size
        self.embed_tokens = torch.nn.Embedding(config.vocab_size, hidden)
        self.layers = torch.nn.ModuleList(
            layer(config, i, strategy, capacity) for i in range(config.num_hidden_layers)
        )
        self.norm = norm
        self.lm_head = (
            None
            if config.tie_word_embeddings
            else torch.nn.Linear(hidden, config.vocab_size, bias=False)
        )

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        """The exported functions' states: each layer's key and value cache."""
        return self.layer_state_shapes(0, len(self.layers))

    def layer_state_shapes(self, start: int, stop: int) -> dict[str, tuple[int, ...]]:
        """The states of layers [start, stop) (a layer range, `zoo.core.export.ranges`)."""
        layers = self.layers[start:stop]
        return {n: s for layer in layers for n, s in layer.self_attn.cache.shapes().items()}

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embed_tokens(input_ids)

    def head(self, h: torch.Tensor, last_row_only: bool = False) -> torch.Tensor:
        return head_logits(h, self.norm, self.embed_tokens, self.lm_head, last_row_only)

    def forward(self, input_ids, positions, step: dict, states: dict, last_row_only=False):
        h = self.embed(input_ids)
        for layer in self.layers:
            h = layer(h, positions, step, states)
        return self.head(h, last_row_only)


def head_logits(
    h: torch.Tensor,
    norm: torch.nn.Module,
    embed_tokens: torch.nn.Embedding,
    lm_head: torch.nn.Module | None,
    last_row_only: bool,
    softcap: float | None = None,
) -> torch.Tensor:
    """A decoder's tail: the final norm and the LM head, on the chunk's last row only for
    prefill (the host reads nothing else, and the head is the widest matmul), capped by
    `tanh(x / softcap) * softcap` when the model says so."""
    if last_row_only:
        h = h[:, -1:]
    h = norm(h)
    # A tied head reads the embedding table, unless an export layout stored its own copy.
    if lm_head is None:
        logits = torch.nn.functional.linear(h, embed_tokens.weight)
    else:
        logits = lm_head(h)
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    return logits


def with_soft_tokens(h: torch.Tensor, step: dict) -> torch.Tensor:
    """The embeddings `h` `[1, T, width]` with an image's soft tokens in place where the
    host's `soft_mask` says (an asset with a vision component, `DecodeSpec.soft_tokens`);
    the token ids there are the pad id, so the rest of the model sees the pad token."""
    if "soft_tokens" not in step:
        return h
    return torch.where(step["soft_mask"] > 0.5, step["soft_tokens"], h)
