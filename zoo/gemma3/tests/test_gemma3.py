"""Gemma 3 parity with transformers 5.23 on tiny random checkpoints.

Logits of the re-authored torch model vs transformers: max abs error < 1e-4, for the 270m /
1b shape (text-only), the `linear` RoPE scaling of the 4b+ full layers, a final softcap, and
the multimodal layout (`Gemma3ForConditionalGeneration`, text part). Greedy tokens on the
Core AI runtime: 8/8 identical to transformers' `generate`; the 10-token prompt reaches past
the sliding window of 4 and spans two prefill chunks of 4.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from zoo.core.io.files import UnsupportedConfig
from zoo.core.model.eager import torch_logits
from zoo.gemma3 import Gemma3Config, load_gemma3
from zoo.reference import reference_model
from zoo.testing import (
    check_cli_export_and_generate,
    check_layout_computes_the_same,
    check_runtime_greedy,
)

from .conftest import CHUNK

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

PROMPT = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]


@pytest.mark.parametrize("variant", ["default", "rope-scaling", "softcap", "multimodal"])
def test_logits_match_transformers(checkpoints, variant):
    ours = load_gemma3(checkpoints[variant], "runtime-index", 64)
    with torch.no_grad():
        want = reference_model("gemma3", checkpoints[variant])(torch.tensor([PROMPT])).logits
    assert (torch_logits(ours, PROMPT) - want).abs().max().item() < 1e-4


def test_the_window_and_the_scale_matter(checkpoints):
    """Without the sliding window, or with 1/sqrt(head_dim), the logits differ: the tiny
    checkpoint would not catch a model that ignored either."""
    model = load_gemma3(checkpoints["default"], "runtime-index", 64)
    want = torch_logits(model, PROMPT)
    model.config.sliding_window = 64
    assert (torch_logits(model, PROMPT) - want).abs().max() > 1e-3
    model.config.sliding_window = 4
    for layer in model.layers:
        layer.self_attn.scale = layer.self_attn.head_dim**-0.5
    assert (torch_logits(model, PROMPT) - want).abs().max() > 1e-3


@pytest.mark.parametrize(
    "variant,strategy",
    [
        ("default", "runtime-index"),
        ("default", "input-mask-blend"),
        ("rope-scaling", "runtime-index"),
    ],
)
def test_greedy_tokens_on_the_runtime_match_transformers(checkpoints, assets, variant, strategy):
    assert len(PROMPT) > CHUNK  # the prompt spans prefill chunks and single steps
    check_runtime_greedy("gemma3", checkpoints, assets, variant, strategy, PROMPT)


def test_released_spellings_are_read_as_transformers_reads_them():
    """`rope_theta` / `rope_local_base_freq` / `rope_scaling` and `sliding_window_pattern`
    (as published) give what transformers re-saves as `rope_parameters` and `layer_types`."""
    config = Gemma3Config.from_dict(
        {
            "model_type": "gemma3_text",
            "num_hidden_layers": 12,
            "rope_theta": 1_000_000,
            "rope_local_base_freq": 10_000,
            "rope_scaling": {"rope_type": "linear", "factor": 8.0},
            "sliding_window_pattern": 6,
        }
    )
    assert config.layer_types == (["sliding_attention"] * 5 + ["full_attention"]) * 2
    assert config.rope_parameters == {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1_000_000},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10_000},
    }


def test_unsupported_configs_are_refused_by_name(checkpoints, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(checkpoints["default"], ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    for field, value, named in [
        ("use_bidirectional_attention", True, "EmbeddingGemma"),
        ("attn_logit_softcapping", 50.0, "attn_logit_softcapping=50.0"),
    ]:
        (ckpt / "config.json").write_text(json.dumps({**config, field: value}))
        with pytest.raises(UnsupportedConfig, match=named):
            load_gemma3(ckpt)


def test_cli_export_and_generate(checkpoints, tmp_path):
    check_cli_export_and_generate("gemma3", checkpoints["default"], tmp_path)


@pytest.mark.parametrize("strategy", ["input-mask-blend"])
def test_layer_ranges_decode_like_transformers_and_like_one_function(checkpoints, assets, strategy):
    """One function per layer (`--layers-per-function 1`), prefill pipelined over them."""
    check_runtime_greedy(
        "gemma3", checkpoints, assets, "default", strategy, PROMPT, layout="ranges"
    )
    check_layout_computes_the_same(assets, "default", strategy, "ranges")


def test_attention_spans_narrow_the_sliding_and_the_full_masks_alike(checkpoints, assets):
    """Spans of 8 and 16 columns: both masks of a span are cut to its columns."""
    strategy = "input-mask-blend"
    check_runtime_greedy("gemma3", checkpoints, assets, "default", strategy, PROMPT, layout="spans")
    check_layout_computes_the_same(assets, "default", strategy, "spans")
