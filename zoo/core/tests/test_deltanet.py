"""The loop-free decode step is the composite GatedDeltaUpdate at T = 1 (to float32 rounding),
and the conv state carries a causal conv across calls exactly."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from zoo.core.model.deltanet import GatedDeltaRule, GatedDeltaUpdate, causal_conv, gated_delta_step

pytestmark = pytest.mark.unit  # the suite's tiers: pyproject.toml's markers


def random_inputs(length: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    b, h, dk, dv = 1, 4, 8, 6

    def rand(*shape):
        return torch.randn(*shape, generator=generator)

    return (
        rand(b, h, length, dk),
        rand(b, h, length, dk),
        rand(b, h, length, dv),
        -torch.rand(b, h, length, generator=generator),  # log decay < 0
        torch.rand(b, h, length, generator=generator),
        rand(b, h, dk, dv),
    )


def test_one_step_equals_the_composite():
    # the step sums with matmuls (fast on the runtime), the composite elementwise: the two
    # agree to float32 rounding
    inputs = random_inputs(1)
    out_step, state_step = gated_delta_step(*inputs)
    out_composite, state_composite = GatedDeltaUpdate(use_qk_l2_norm=True)(*inputs)
    torch.testing.assert_close(out_step, out_composite, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(state_step, state_composite, atol=1e-6, rtol=1e-6)


def test_steps_chain_like_one_composite_call():
    q, k, v, g, beta, state = random_inputs(6, seed=1)
    outputs = []
    for t in range(6):
        out, state = gated_delta_step(
            q[:, :, t : t + 1],
            k[:, :, t : t + 1],
            v[:, :, t : t + 1],
            g[:, :, t : t + 1],
            beta[:, :, t : t + 1],
            state,
        )
        outputs.append(out)
    want_out, want_state = GatedDeltaUpdate(True)(q, k, v, g, beta, random_inputs(6, 1)[-1])
    torch.testing.assert_close(torch.cat(outputs, dim=1), want_out, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(state, want_state, atol=1e-6, rtol=1e-6)


def test_the_rule_picks_the_step_only_for_one_token():
    rule = GatedDeltaRule(one_step=True)
    for length in (1, 3):
        inputs = random_inputs(length)
        torch.testing.assert_close(rule(*inputs)[0], GatedDeltaUpdate(True)(*inputs)[0])


def test_causal_conv_continues_across_calls():
    torch.manual_seed(0)
    channels, kernel = 5, 4
    weight, x = torch.randn(channels, 1, kernel), torch.randn(1, channels, 9)
    whole = F.silu(F.conv1d(F.pad(x, (kernel - 1, 0)), weight, groups=channels))
    state, pieces = torch.zeros(1, kernel - 1, channels), []  # time-major: [B, K-1, C]
    rows = x.transpose(1, 2)  # [B, T, C]
    for chunk in (rows[:, :4], rows[:, 4:5], rows[:, 5:]):
        out, state = causal_conv(chunk, state, weight)
        pieces.append(out)
    torch.testing.assert_close(torch.cat(pieces, 1), whole.transpose(1, 2))
    torch.testing.assert_close(state, rows[:, -(kernel - 1) :])
