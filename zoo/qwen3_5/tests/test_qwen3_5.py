"""Qwen3.5 parity with transformers 5.23 on tiny random checkpoints, loading, decode, CLI.

Logits of the re-authored torch model vs transformers: max abs error < 1e-4. Greedy tokens on
the Core AI runtime: 8/8 identical to transformers' `generate`, with a 10-token prompt that
spans two prefill chunks of 4 and two single decode steps.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from zoo.core.asset.decode_spec import ContextFullError
from zoo.core.checkpoint.config import CheckpointError
from zoo.core.host.generator import Generator
from zoo.core.model.layout import default_layout
from zoo.qwen3_5 import UnsupportedConfig, load_qwen3_5, torch_logits
from zoo.reference import reference_model
from zoo.testing import (
    check_cli_export_and_generate,
    check_layout_computes_the_same,
    check_runtime_greedy,
)
from zoo.testing_kv import check_int8_kv_cache

from .conftest import CAPACITY, CHUNK

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

PROMPT = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]


@pytest.mark.parametrize("variant", ["4-layer", "8-layer", "multimodal"])
def test_logits_match_transformers(checkpoints, variant):
    ours = load_qwen3_5(checkpoints[variant], "runtime-index", CAPACITY)
    with torch.no_grad():
        want = reference_model("qwen3_5", checkpoints[variant])(torch.tensor([PROMPT])).logits
    assert (torch_logits(ours, PROMPT) - want).abs().max().item() < 1e-4


@pytest.mark.parametrize("strategy", ["runtime-index", "input-mask-blend"])
@pytest.mark.parametrize("variant", ["4-layer", "8-layer"])
def test_greedy_tokens_on_the_runtime_match_transformers(checkpoints, assets, variant, strategy):
    assert len(PROMPT) > CHUNK  # the prompt spans prefill chunks and single steps
    check_runtime_greedy("qwen3_5", checkpoints, assets, variant, strategy, PROMPT)


def test_the_as_authored_layout_decodes_the_same(checkpoints, assets):
    """The layout the platform default replaces (nn.Linear weights, [B, H, T, D] keys)."""
    check_runtime_greedy(
        "qwen3_5", checkpoints, assets, "4-layer", "runtime-index", PROMPT, layout="as-authored"
    )


def test_four_kinds_of_state(assets):
    with Generator(assets["4-layer", "input-mask-blend"]) as generator:
        states = generator.functions["decode"][0].states
    assert sorted(states) == sorted(
        [
            "conv_state_0",
            "recurrent_state_0",
            "conv_state_1",
            "recurrent_state_1",
            "conv_state_2",
            "recurrent_state_2",
            "k_cache_3",
            "v_cache_3",
        ]
    )
    assert states["conv_state_0"][0] == (1, 3, 2 * 2 * 8 + 4 * 8)  # K - 1; q, k, v channels
    assert states["recurrent_state_0"][0] == (1, 4, 8, 8)  # value heads, Dk, Dv
    assert states["v_cache_3"][0] == (1, 2, CAPACITY, 16)  # kv heads, T, head dim
    # zoo.core.model.layout: keys are stored transposed on Linux, as authored elsewhere
    keys = (1, 2, 16, CAPACITY) if default_layout()["keys"] == "bhdt" else (1, 2, CAPACITY, 16)
    assert states["k_cache_3"][0] == keys


def test_mtp_weights_are_ignored_and_broken_tensors_listed(checkpoints, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(checkpoints["4-layer"], ckpt)
    tensors = load_file(ckpt / "model.safetensors")
    tensors["mtp.fc.weight"] = torch.zeros(4, 4)  # Qwen3.5 checkpoints ship MTP heads
    save_file(tensors, ckpt / "model.safetensors")
    load_qwen3_5(ckpt)
    del tensors["model.layers.0.linear_attn.A_log"]
    save_file(tensors, ckpt / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"missing tensors: layers.0.linear_attn.A_log\."):
        load_qwen3_5(ckpt)


def test_config_errors(checkpoints, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(checkpoints["4-layer"], ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**config, "model_type": "gemma4_text"}))
    with pytest.raises(ValueError, match="model_type 'gemma4_text'.*Qwen3.5"):
        load_qwen3_5(ckpt)
    (ckpt / "config.json").write_text(json.dumps({**config, "attention_bias": True}))
    with pytest.raises(UnsupportedConfig, match="attention_bias=True"):
        load_qwen3_5(ckpt)


def test_sampling_stop_tokens_and_a_full_context(assets):
    with Generator(assets["4-layer", "input-mask-blend"]) as generator:
        sampled = generator.generate(PROMPT, 5, temperature=0.7, seed=3, stop_token_ids=[])
        assert sampled == generator.generate(PROMPT, 5, temperature=0.7, seed=3, stop_token_ids=[])
        greedy = generator.generate(PROMPT, 8, stop_token_ids=[])
        assert generator.generate(PROMPT, 8, stop_token_ids=[greedy[2]]) == greedy[:3]
        with pytest.raises(ContextFullError, match="export with a larger --capacity"):
            generator.generate(PROMPT, CAPACITY, stop_token_ids=[])


def test_cli(checkpoints, tmp_path):
    check_cli_export_and_generate("qwen3_5", checkpoints["4-layer"], tmp_path)


@pytest.mark.parametrize("strategy", ["runtime-index", "input-mask-blend"])
def test_layer_ranges_decode_like_transformers_and_like_one_function(checkpoints, assets, strategy):
    """One function per layer (`--layers-per-function 1`), prefill pipelined over them."""
    check_runtime_greedy(
        "qwen3_5", checkpoints, assets, "4-layer", strategy, PROMPT, layout="ranges"
    )
    check_layout_computes_the_same(assets, "4-layer", strategy, "ranges")


def test_attention_spans_leave_the_linear_attention_layers_alone(checkpoints, assets):
    """Spans of 8 and 16 columns: the full-attention layers read fewer cache columns, the
    GatedDeltaNet layers (no mask, a fixed state) compute as before."""
    strategy = "runtime-index"
    check_runtime_greedy(
        "qwen3_5", checkpoints, assets, "4-layer", strategy, PROMPT, layout="spans"
    )
    check_layout_computes_the_same(assets, "4-layer", strategy, "spans")


def test_an_int8_kv_cache_beside_the_recurrent_states_decodes_like_eager(checkpoints, assets):
    check_int8_kv_cache("qwen3_5", checkpoints, assets, "4-layer", "input-mask-blend")
