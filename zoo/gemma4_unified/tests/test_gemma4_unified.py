"""Gemma 4 12B (`gemma4_unified`) parity with transformers 5.23 on tiny random checkpoints.

Logits of the torch model vs transformers (`Gemma4UnifiedForCausalLM`, and
`Gemma4UnifiedForConditionalGeneration` for the multimodal layout): max abs error < 1e-4.
Greedy tokens on the Core AI runtime: 8/8 identical to transformers' `generate`, both KV
strategies, a 10-token prompt over two prefill chunks of 4 and two decode steps. The
encoder-free image embedder is not exported yet: the asset is the text decoder.
"""

from __future__ import annotations

import pytest

from zoo.core.io.files import UnsupportedConfig
from zoo.gemma4_unified import ENTRY, Gemma4UnifiedConfig
from zoo.testing import (
    check_cli_export_and_generate,
    check_logits_match_transformers,
    check_runtime_greedy,
)

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

PROMPT = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]


@pytest.mark.parametrize("variant", ["default", "multimodal"])
def test_logits_match_transformers(checkpoints, variant):
    check_logits_match_transformers("gemma4_unified", checkpoints[variant], PROMPT)


@pytest.mark.parametrize(
    "variant,strategy", [("default", "runtime-index"), ("multimodal", "input-mask-blend")]
)
def test_greedy_tokens_on_the_runtime_match_transformers(checkpoints, assets, variant, strategy):
    check_runtime_greedy("gemma4_unified", checkpoints, assets, variant, strategy, PROMPT)


def test_the_command_line_exports_and_generates(checkpoints, tmp_path):
    check_cli_export_and_generate("gemma4_unified", checkpoints["multimodal"], tmp_path)


def test_zoo_export_picks_this_entry_by_model_type(checkpoints):
    from zoo.core.model.entry import entry_for_checkpoint

    for variant in ("default", "multimodal"):
        assert entry_for_checkpoint(checkpoints[variant]).name == "gemma4_unified"


def test_what_the_12b_does_not_have_is_refused_by_name():
    with pytest.raises(ValueError, match="no per-layer embeddings and no experts"):
        Gemma4UnifiedConfig(num_hidden_layers=2, hidden_size_per_layer_input=8)
    with pytest.raises(UnsupportedConfig, match="use_bidirectional_attention='all'"):
        Gemma4UnifiedConfig(num_hidden_layers=2, use_bidirectional_attention="all")
    assert ENTRY.config.model_types()[1] == "gemma4_unified"
