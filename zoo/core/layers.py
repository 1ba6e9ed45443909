"""Layers every zoo model shares, written to export cleanly: plain torch ops, no magic."""

from __future__ import annotations

import torch


def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """`[B, kv_heads, T, D]` -> `[B, kv_heads * groups, T, D]` for grouped-query attention."""
    if groups == 1:
        return x
    return x.repeat_interleave(groups, dim=1)


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
) -> torch.Tensor:
    """Attention written out: `softmax(q k^T * scale + mask) v`, with GQA by repetition.

    q `[B, H, T, D]`, k/v `[B, kv_heads, S, D]`, mask additive and broadcastable to
    `[B, H, T, S]` (e.g. `[1, 1, 1, S]`).
    """
    groups = q.shape[1] // k.shape[1]
    k, v = repeat_kv(k, groups), repeat_kv(v, groups)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if mask is not None:
        scores = scores + mask
    return torch.matmul(torch.softmax(scores, dim=-1), v)


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
