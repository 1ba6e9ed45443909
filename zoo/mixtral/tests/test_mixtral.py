"""Mixtral parity with transformers 5.23 on tiny random checkpoints.

Logits of the re-authored torch model vs transformers: max abs error < 1e-4 (8 experts,
2 per token, the checkpoint's w1/w3/w2 names). Greedy
tokens and logits on the Core AI runtime: 8/8 like transformers with both KV strategies,
computing the chosen experts only (GatherMM) or every expert, and as layer ranges.
"""

from __future__ import annotations

import json
import shutil

import pytest

from zoo.core.files import UnsupportedConfig
from zoo.core.spec import DecodeSpec
from zoo.mixtral import ENTRY, load_mixtral
from zoo.testing import (
    check_cli_export_and_generate,
    check_compressed_experts_are_all_computed,
    check_experts_computed_both_ways,
    check_layout_computes_the_same,
    check_logits_match_transformers,
    check_runtime_greedy,
)

from .conftest import CHUNK

PROMPT = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]


@pytest.mark.parametrize("variant", list(ENTRY.tiny.variants))
def test_logits_match_transformers(checkpoints, variant):
    check_logits_match_transformers("mixtral", checkpoints[variant], PROMPT)


@pytest.mark.parametrize("strategy", ["runtime-index", "input-mask-blend"])
def test_greedy_tokens_on_the_runtime_match_transformers(checkpoints, assets, strategy):
    assert len(PROMPT) > CHUNK  # the prompt spans prefill chunks and single steps
    check_runtime_greedy("mixtral", checkpoints, assets, "default", strategy, PROMPT)


@pytest.mark.parametrize("strategy", ["runtime-index", "input-mask-blend"])
def test_every_expert_weighted_computes_what_the_chosen_ones_compute(checkpoints, assets, strategy):
    check_experts_computed_both_ways("mixtral", checkpoints, assets, strategy, PROMPT)


@pytest.mark.parametrize("strategy", ["runtime-index", "input-mask-blend"])
def test_layer_ranges_decode_like_transformers_and_like_one_function(checkpoints, assets, strategy):
    layout = "ranges"
    check_runtime_greedy("mixtral", checkpoints, assets, "default", strategy, PROMPT, layout)
    check_layout_computes_the_same(assets, "default", strategy, layout)
    assert len(DecodeSpec.of_asset(assets["default", strategy, layout]).ranges) == 4


def test_bad_expert_configs_are_refused_by_name(checkpoints, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(checkpoints["default"], ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    for change, named in [
        (dict(num_experts_per_tok=9), "num_experts_per_tok=9 is not 1 to"),
        (dict(num_local_experts=0), "num_local_experts=0"),
    ]:
        (ckpt / "config.json").write_text(json.dumps({**config, **change}))
        with pytest.raises((ValueError, UnsupportedConfig), match=named):
            load_mixtral(ckpt, capacity=64)


def test_compressed_experts_are_all_computed_and_chosen_is_refused(checkpoints, tmp_path):
    check_compressed_experts_are_all_computed(checkpoints["default"], tmp_path)


def test_cli_export_and_generate(checkpoints, tmp_path):
    check_cli_export_and_generate("mixtral", checkpoints["default"], tmp_path)
