"""OLMo 2 parity with transformers 5.23 on tiny random checkpoints.

Logits of the re-authored torch model vs transformers: max abs error < 1e-4, for the 1B's
shape (as many KV heads as query heads), grouped KV heads (the 32B) and q/k/v/o biases.
Greedy tokens on the Core AI runtime: 8/8 identical to transformers' `generate` with a
10-token prompt that spans two prefill chunks of 4 and two single decode steps.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from zoo.core.io.files import UnsupportedConfig
from zoo.core.model.eager import torch_logits
from zoo.olmo2 import ENTRY, load_olmo2
from zoo.testing import (
    check_cli_export_and_generate,
    check_logits_match_transformers,
    check_runtime_greedy,
)

from .conftest import CHUNK

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

PROMPT = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]


@pytest.mark.parametrize("variant", list(ENTRY.tiny.variants))
def test_logits_match_transformers(checkpoints, variant):
    check_logits_match_transformers("olmo2", checkpoints[variant], PROMPT)


def test_qk_norm_spans_every_head_and_the_norms_follow_each_block(checkpoints):
    """One q norm over heads x head_dim (not per head), and no norm before a block."""
    ours = load_olmo2(checkpoints["grouped"], "runtime-index", 64)
    layer, config = ours.layers[0], ours.config
    assert layer.self_attn.q_norm.weight.shape == (config.num_attention_heads * config.head_dim,)
    assert layer.self_attn.k_norm.weight.shape == (config.num_key_value_heads * config.head_dim,)
    assert not hasattr(layer, "input_layernorm")
    before = torch_logits(ours, PROMPT)
    with torch.no_grad():
        layer.post_feedforward_layernorm.weight.mul_(3.0)
    assert (torch_logits(ours, PROMPT) - before).abs().max().item() > 1e-3


@pytest.mark.parametrize(
    "variant,strategy",
    [("default", "runtime-index"), ("grouped", "input-mask-blend")],
)
def test_greedy_tokens_on_the_runtime_match_transformers(checkpoints, assets, variant, strategy):
    assert len(PROMPT) > CHUNK  # the prompt spans prefill chunks and single steps
    check_runtime_greedy("olmo2", checkpoints, assets, variant, strategy, PROMPT)


def test_unsupported_configs_are_refused_by_name(checkpoints, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(checkpoints["default"], ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    for change, named in [
        (dict(hidden_act="gelu"), "hidden_act='gelu'"),
        (dict(rope_parameters={"rope_type": "yarn", "rope_theta": 5e5}), "RoPE type 'yarn'"),
    ]:
        (ckpt / "config.json").write_text(json.dumps({**config, **change}))
        with pytest.raises(UnsupportedConfig, match=named):
            load_olmo2(ckpt)


def test_cli_export_and_generate(checkpoints, tmp_path):
    check_cli_export_and_generate("olmo2", checkpoints["default"], tmp_path)
