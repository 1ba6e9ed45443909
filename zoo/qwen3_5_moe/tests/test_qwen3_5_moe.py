"""Qwen3.5 MoE parity with transformers 5.23 on tiny random checkpoints.

Logits of the re-authored torch model vs transformers: max abs error < 1e-4, text-only and
multimodal layouts. Greedy tokens and logits on the Core AI runtime: 8/8 like
transformers with both KV strategies, computing the chosen experts only (GatherMM) or every
expert, and as layer ranges; the shared expert and its gate are read and used.
"""

from __future__ import annotations

import pytest
import torch

from zoo.core.model.eager import torch_logits
from zoo.core.model.experts import MixtureOfExperts
from zoo.qwen3_5_moe import load_qwen3_5_moe
from zoo.testing import (
    check_cli_export_and_generate,
    check_logits_match_transformers,
)
from zoo.testing_experts import mixture_of_experts_tests

from .conftest import CHUNK

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

PROMPT = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]


@pytest.mark.parametrize("layout", ["default", "multimodal"])
def test_logits_match_transformers(checkpoints, layout):
    check_logits_match_transformers("qwen3_5_moe", checkpoints[layout], PROMPT)


def test_every_layer_routes_beside_a_gated_shared_expert(checkpoints):
    model = load_qwen3_5_moe(checkpoints["default"], capacity=64)
    mixtures = [layer.mlp for layer in model.layers]
    assert all(isinstance(m, MixtureOfExperts) and m.shared_expert for m in mixtures)
    before = torch_logits(model, PROMPT)
    with torch.no_grad():  # the shared expert's gate shut: the logits change
        mixtures[0].shared_expert_gate.weight.fill_(-1e4)
    assert (torch_logits(model, PROMPT) - before).abs().max() > 1e-3


# greedy and logits like transformers (both KV strategies), all experts, layer ranges
globals().update(mixture_of_experts_tests("qwen3_5_moe", PROMPT, CHUNK))


def test_cli_export_and_generate(checkpoints, tmp_path):
    check_cli_export_and_generate("qwen3_5_moe", checkpoints["default"], tmp_path)
