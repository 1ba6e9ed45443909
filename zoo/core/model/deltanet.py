"""The gated delta rule (GatedDeltaNet) and its causal conv, for prefill chunks and decode.

Prefill runs coreai-torch's composite `GatedDeltaUpdate`, whose time loop lowers to a
`while_loop`. A one-token decode needs no loop at all, and a `while` loop is reported not to
lower on Apple's GPU delegates, so `gated_delta_step` is the same update written out for
T = 1; the tests hold it equal to the composite.

Layouts (coreai-torch's): q/k `[B, H, T, Dk]` (already repeated to the value-head count),
v `[B, H, T, Dv]`, g (log decay) and beta `[B, H, T]`, state `[B, H, Dk, Dv]`;
the output is `[B, T, H, Dv]`.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import nn

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="coreai-torch has only been validated")
    from coreai_torch.composite_ops import GatedDeltaUpdate


def _l2norm(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + 1e-6)


def gated_delta_step(q, k, v, g, beta, state) -> tuple[torch.Tensor, torch.Tensor]:
    """One token of the gated delta rule, loop-free (T must be 1)."""
    q = _l2norm(q.float()) * q.shape[-1] ** -0.5  # [B, H, 1, Dk]
    k = _l2norm(k.float())
    state = state.float() * g.float().exp()[..., None]  # decay: [B, H, 1, 1]
    remembered = k @ state  # [B, H, 1, Dv]: what the state recalls for this key
    delta = (v.float() - remembered) * beta.float()[..., None]  # [B, H, 1, Dv]
    state = state + k.transpose(2, 3) @ delta  # rank-1 update: [B, H, Dk, Dv]
    out = q @ state  # [B, H, 1, Dv]
    return out.transpose(1, 2), state


class GatedDeltaRule(nn.Module):
    """The composite op for chunks; the loop-free step for a single token (if `one_step`)."""

    def __init__(self, one_step: bool = True) -> None:
        super().__init__()
        self.one_step = one_step
        self.composite = GatedDeltaUpdate(use_qk_l2_norm=True)

    def forward(self, q, k, v, g, beta, state):
        if self.one_step and q.shape[2] == 1:
            return gated_delta_step(q, k, v, g, beta, state)
        return self.composite(q, k, v, g, beta, state)


def causal_conv(
    x: torch.Tensor, conv_state: torch.Tensor, weight: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Depthwise causal conv over `x [B, T, C]`, continuing from `conv_state [B, K-1, C]`.

    Returns the SiLU-activated output `[B, T, C]` and the next conv state (the last K-1
    inputs). `weight` is the conv's `[C, 1, K]`. A chunk (T > 1) concatenates state and
    input; one token shifts the state with a constant matrix instead, because on the Linux
    CPU runtime slices and concats are slow per element and matmuls are not
    (docs/performance.md).
    """
    kernel, length = weight.shape[-1], x.shape[1]
    taps = weight[:, 0, :].t()  # [K, C]
    if length == 1:
        out = (conv_state * taps[: kernel - 1]).sum(1, keepdim=True) + x * taps[kernel - 1]
        # next state = rows 1.. of [state; x], as two constant 0/1 matrices
        rows = range(kernel - 1)
        shift = torch.tensor([[float(j == i + 1) for j in rows] for i in rows])
        last = torch.tensor([[float(i == kernel - 2)] for i in rows])
        return F.silu(out), shift @ conv_state + last @ x
    window = torch.cat([conv_state, x], dim=1)  # [B, K-1+T, C]
    out = sum(window[:, k : k + length] * taps[k] for k in range(kernel))
    return F.silu(out), window[:, length:]
