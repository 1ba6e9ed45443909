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

from zoo.core.io.files import UnsupportedConfig
from zoo.mixtral import ENTRY, load_mixtral
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
    check_logits_match_transformers("mixtral", checkpoints[variant], PROMPT)


# greedy and logits like transformers (both KV strategies), all experts, layer ranges
globals().update(mixture_of_experts_tests("mixtral", PROMPT, CHUNK))


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


def test_experts_are_compressed_stacked(checkpoints, tmp_path):
    # the experts compute as Qwen3 MoE's (zoo.core.model.experts), whose test decodes them
    check_experts_compressed_stacked(checkpoints["default"], tmp_path, None)


def test_cli_export_and_generate(checkpoints, tmp_path):
    check_cli_export_and_generate("mixtral", checkpoints["default"], tmp_path)
