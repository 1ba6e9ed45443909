"""What fits your Mac (docs/guides/run-on-your-mac.md): the record holds every released size
at every preset, its rows are what the plan says today, and the memory rule."""

from __future__ import annotations

import pytest

from zoo.bench.fits import PRESETS, RECORD, rows_of, smallest_mac
from zoo.core.io.records import load_record
from zoo.core.model.entry import all_entries
from zoo.released import released_configs

pytestmark = pytest.mark.unit  # the suite's tiers: pyproject.toml's markers


def test_the_smallest_mac_leaves_a_quarter_of_its_memory():
    three_quarters_of_8 = 6 * 2**30
    assert smallest_mac(three_quarters_of_8) == "8 GB"
    assert smallest_mac(three_quarters_of_8 + 1) == "16 GB"
    assert smallest_mac(10**13) == "more than 512 GB"


def test_the_record_has_every_released_size_at_every_preset():
    rows = load_record(RECORD)["results"]["rows"]
    recorded = [(row["entry"], row["released"], row["preset"]) for row in rows]
    released = [
        (f"zoo.{model}", name, preset)
        for model in all_entries()
        for name in released_configs(model)
        for preset in PRESETS
    ]
    assert recorded == released, "regenerate: python -m zoo.core.io.records regenerate " + RECORD


@pytest.mark.parametrize(
    "model,name", [("llama", "SmolLM2-135M-Instruct"), ("qwen3_5", "Qwen3.5-0.8B")]
)
def test_the_record_is_what_the_plan_says_today(model, name, tmp_path):
    recorded = [row for row in load_record(RECORD)["results"]["rows"] if row["released"] == name]
    assert recorded == rows_of(model, name, released_configs(model)[name], tmp_path)
