"""An expert count in config.json that the weights do not hold is refused from the
safetensors headers, before a model of that size is built: ffe1239 built a million
experts for minutes (and its dry run said the plan was fine)."""

from __future__ import annotations

import json

import pytest

from zoo.core.checkpoint.config import CheckpointError
from zoo.core.export.plan import plan_export
from zoo.core.model.entry import get_entry
from zoo.reference import make_tiny_checkpoint

pytestmark = pytest.mark.unit  # the suite's tiers: pyproject.toml's markers

# each family's spelling of the count, as its released config.json has it
FAMILIES = {"mixtral": "num_local_experts", "gpt_oss": "num_local_experts", "qwen3_moe": None}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_million_experts_over_weights_of_a_few_is_refused_fast(family, tmp_path):
    checkpoint = make_tiny_checkpoint(family, tmp_path / family)
    config = json.loads((checkpoint / "config.json").read_text())
    field = FAMILIES[family] or next(f for f in ("num_experts", "num_local_experts") if f in config)
    stored = config[field]
    config[field] = 1_000_000
    (checkpoint / "config.json").write_text(json.dumps(config))
    # the field named as the file spells it (Qwen3 MoE: either spelling)
    said = rf"says 1,000,000 experts a layer \([a-z_ ]*{field}[a-z_ ]*\), the weights hold {stored}"
    with pytest.raises(CheckpointError, match=said):
        plan_export(checkpoint, tmp_path / "x.aimodel")
    with pytest.raises(CheckpointError, match=said):
        get_entry(family).load(checkpoint, capacity=32)
