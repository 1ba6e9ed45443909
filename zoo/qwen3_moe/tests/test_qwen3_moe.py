"""Qwen3 MoE parity with transformers 5.23 on tiny random checkpoints.

Logits of the re-authored torch model vs transformers: max abs error < 1e-4, with the
router's weights renormalised or not and with dense layers among the sparse ones. Greedy
tokens and logits on the Core AI runtime: 8/8 like transformers with both KV strategies,
computing the chosen experts only (GatherMM) or every expert, and as layer ranges.
"""

from __future__ import annotations

import json
import shutil

import pytest

from zoo.core.experts import MixtureOfExperts
from zoo.core.files import UnsupportedConfig
from zoo.qwen3_moe import ENTRY, load_qwen3_moe
from zoo.testing import (
    check_cli_export_and_generate,
    check_logits_match_transformers,
)
from zoo.testing_experts import check_experts_compressed_stacked, mixture_of_experts_tests

from .conftest import CHUNK

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

PROMPT = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]


@pytest.mark.parametrize("variant", list(ENTRY.tiny.variants))
def test_logits_match_transformers(checkpoints, variant):
    check_logits_match_transformers("qwen3_moe", checkpoints[variant], PROMPT)


def test_sparse_and_dense_layers_follow_the_config(checkpoints):
    kinds = [
        isinstance(layer.mlp, MixtureOfExperts)
        for layer in load_qwen3_moe(checkpoints["dense-layers"], capacity=64).layers
    ]
    assert kinds == [False, False, False, True]  # step 2: layers 1 and 3; 1 is mlp-only


# greedy and logits like transformers (both KV strategies), all experts, layer ranges
globals().update(mixture_of_experts_tests("qwen3_moe", PROMPT, CHUNK))


def test_bad_expert_configs_are_refused_by_name(checkpoints, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(checkpoints["default"], ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    for change, named in [
        (dict(num_experts_per_tok=9), "num_experts_per_tok=9 is not 1 to"),
        (dict(decoder_sparse_step=0), "decoder_sparse_step=0"),
        (dict(mlp_only_layers=[7]), r"mlp_only_layers \[7\] are not layers"),
        (dict(use_sliding_window=True), "sliding-window layers"),
    ]:
        for name in ("num_experts", "num_local_experts"):
            config.pop(name, None)
        (ckpt / "config.json").write_text(json.dumps({**config, "num_experts": 6, **change}))
        with pytest.raises((ValueError, UnsupportedConfig), match=named):
            load_qwen3_moe(ckpt)


def test_experts_published_one_by_one_are_compressed_stacked(checkpoints, tmp_path):
    check_experts_compressed_stacked(checkpoints["default"], tmp_path, PROMPT)


def test_cli_export_and_generate(checkpoints, tmp_path):
    check_cli_export_and_generate("qwen3_moe", checkpoints["default"], tmp_path)
