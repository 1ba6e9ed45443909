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
) -> torch.Tensor:
    """Attention written out: `softmax(q k^T * scale + mask) v`, grouped-query.

    q `[B, H, T, D]`, v `[B, kv_heads, S, D]`, k `[B, kv_heads, S, D]` (or `[B, kv_heads, D, S]`
    with `keys_transposed`), mask additive, one head: `[1, 1, T, S]`, `[1, 1, 1, S]` or
    `[T, S]`. Each key head serves `H / kv_heads` query heads: the queries are grouped
    by reshaping instead of repeating the cache, and keys stored transposed are used as they
    are; on the Linux CPU runtime both copies cost more than the attention itself at 2k context
    (docs/performance.md).
    """
    batch, heads, length, dim = q.shape
    kv_heads = k.shape[1]
    groups = heads // kv_heads
    scale = dim**-0.5 if scale is None else scale
    grouped = q.reshape(batch, kv_heads, groups * length, dim)
    scores = torch.matmul(grouped, k if keys_transposed else k.transpose(-1, -2)) * scale
    if mask is not None:  # a mask with one head ([1, 1, T, S] or [T, S]) serves every group
        mask = mask[:, :, None] if mask.dim() == 4 else mask
        scores = scores.reshape(batch, kv_heads, groups, length, -1) + mask
        scores = scores.reshape(batch, kv_heads, groups * length, -1)
    out = torch.matmul(torch.softmax(scores, dim=-1), v)
    # Split the groups out before merging heads: with a dynamic query length (the engine
    # contract, zoo.core.engine) torch.export cannot prove the one-step reshape contiguous.
    return out.reshape(batch, kv_heads, groups, length, dim).reshape(batch, heads, length, dim)


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
