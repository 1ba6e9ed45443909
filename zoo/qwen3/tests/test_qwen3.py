"""Qwen3 (dense, 0.6B to 32B) parity with transformers 5.23 on tiny random checkpoints.

Logits of the re-authored torch model vs transformers: max abs error < 1e-4, for the tied
0.6B-to-4B shape, the untied head of 8B and up, and q/k/v/o biases. Greedy tokens on the
Core AI runtime: 8/8 identical to transformers' `generate` with a 10-token prompt that
spans two prefill chunks of 4 and two single decode steps.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from zoo.core.io.files import UnsupportedConfig
from zoo.core.model.eager import torch_logits
from zoo.qwen3 import ENTRY, load_qwen3
from zoo.testing import (
    check_cli_export_and_generate,
    check_layout_computes_the_same,
    check_logits_match_transformers,
    check_runtime_greedy,
)

from .conftest import CHUNK

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

PROMPT = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]


@pytest.mark.parametrize("variant", list(ENTRY.tiny.variants))
def test_logits_match_transformers(checkpoints, variant):
    check_logits_match_transformers("qwen3", checkpoints[variant], PROMPT)


def test_qk_norm_weights_are_read_and_used(checkpoints):
    """The jittered q/k norm weights load (not left at ones), and they change the logits."""
    ours = load_qwen3(checkpoints["default"], "runtime-index", 64)
    attention = ours.layers[0].self_attn
    assert not torch.allclose(attention.q_norm.weight, torch.ones_like(attention.q_norm.weight))
    before = torch_logits(ours, PROMPT)
    with torch.no_grad():
        attention.k_norm.weight.mul_(3.0)
    assert (torch_logits(ours, PROMPT) - before).abs().max().item() > 1e-3


# The untied head (8B and up) decodes on the runtime in the released-config rows; the
# biases are held to transformers in eager above.
@pytest.mark.parametrize("strategy", ["runtime-index", "input-mask-blend"])
def test_greedy_tokens_on_the_runtime_match_transformers(checkpoints, assets, strategy):
    assert len(PROMPT) > CHUNK  # the prompt spans prefill chunks and single steps
    check_runtime_greedy("qwen3", checkpoints, assets, "default", strategy, PROMPT)


def test_unsupported_configs_are_refused_by_name(checkpoints, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(checkpoints["default"], ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    for change, named in [
        (dict(use_sliding_window=True), "sliding-window layers"),
        (dict(hidden_act="gelu"), "hidden_act='gelu'"),
        (dict(rope_parameters={"rope_type": "yarn", "rope_theta": 1e6}), "RoPE type 'yarn'"),
        (dict(model_type="qwen3_moe"), "mixture-of-experts"),
    ]:
        (ckpt / "config.json").write_text(json.dumps({**config, **change}))
        with pytest.raises(UnsupportedConfig, match=named):
            load_qwen3(ckpt)


def test_cli_export_and_generate(checkpoints, tmp_path):
    check_cli_export_and_generate("qwen3", checkpoints["default"], tmp_path)


@pytest.mark.parametrize("strategy", ["runtime-index", "input-mask-blend"])
def test_layer_ranges_decode_like_transformers_and_like_one_function(checkpoints, assets, strategy):
    """One function per layer (`--layers-per-function 1`), prefill pipelined over them."""
    check_runtime_greedy("qwen3", checkpoints, assets, "default", strategy, PROMPT, layout="ranges")
    check_layout_computes_the_same(assets, "default", strategy, "ranges")
