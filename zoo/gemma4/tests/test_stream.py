"""Gemma 4 range by range: a size with KV-shared layers or per-layer embeddings exports in
one piece (its ranges would share them), one without them (26B-A4B's design) streams and
cuts an early exit like any decoder. ffe1239 refused 26B-A4B for what it does not have."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.core.export.plan import plan_export
from zoo.core.export.run import run_plan
from zoo.core.host.generator import Generator

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

PROMPT = [3, 17, 5, 9, 11, 2, 8, 30, 4, 6]


def logits(asset) -> np.ndarray:
    with Generator(asset) as generator:
        return np.stack([generator.feed(PROMPT), generator.feed([5])])


def test_the_moe_size_streams_and_decodes_exactly_like_one_piece(checkpoints, tmp_path):
    made = {}
    for stream in ("off", "on"):
        plan = plan_export(
            checkpoints["moe"],
            tmp_path / f"{stream}.aimodel",
            capacity=32,
            layers_per_function=2,
            stream=stream,
        )
        assert plan.streamed == (stream == "on")
        made[stream] = run_plan(plan)
    assert (made["on"] / "range-2.aimodel").is_dir()
    np.testing.assert_array_equal(logits(made["on"]), logits(made["off"]))


def test_the_moe_size_cuts_an_early_exit(checkpoints, tmp_path):
    plan = plan_export(checkpoints["moe"], tmp_path / "early.aimodel", capacity=32, first_layers=2)
    with Generator(run_plan(plan)) as generator:
        assert generator.generate(PROMPT, max_new_tokens=3, stop_token_ids=[])


@pytest.mark.parametrize("option", [{"stream": "on"}, {"first_layers": 2}])
def test_a_size_with_kv_shared_layers_says_what_it_shares(checkpoints, tmp_path, option):
    with pytest.raises(ValueError, match="shares 2 KV-shared layers and per-layer embeddings"):
        plan_export(checkpoints["kv-sharing"], tmp_path / "x.aimodel", capacity=32, **option)
