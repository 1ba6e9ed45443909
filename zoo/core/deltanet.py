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


# --8<-- [start:step]
def gated_delta_step(q, k, v, g, beta, state) -> tuple[torch.Tensor, torch.Tensor]:
    """One token of the gated delta rule, loop-free (T must be 1)."""
    q = _l2norm(q.float()) * q.shape[-1] ** -0.5
    k = _l2norm(k.float())
    q_t, k_t = q.transpose(2, 3), k.transpose(2, 3)  # [B, H, Dk, 1]
    v_t = v.float().squeeze(2)  # [B, H, Dv]
    state = state.float() * g.float().exp().unsqueeze(-1)  # decay: [B, H, 1, 1]
    remembered = (state * k_t).sum(dim=-2)  # [B, H, Dv]
    delta = ((v_t - remembered) * beta.float()).unsqueeze(-2)  # [B, H, 1, Dv]
    state = state + k_t * delta
    out = (state * q_t).sum(dim=-2)  # [B, H, Dv]
    return out.unsqueeze(1), state


# --8<-- [end:step]


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
    """Depthwise causal conv over `x [B, C, T]`, continuing from `conv_state [B, C, K-1]`.

    Returns the SiLU-activated output `[B, C, T]` and the next conv state (the last K-1
    inputs). `weight` is the conv's `[C, 1, K]`.
    """
    kernel = weight.shape[-1]
    window = torch.cat([conv_state, x], dim=-1)  # [B, C, K-1+T]
    out = F.conv1d(window, weight, groups=weight.shape[0])  # [B, C, T]
    return F.silu(out), window[:, :, window.shape[-1] - (kernel - 1) :]
