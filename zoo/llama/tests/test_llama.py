"""Llama (SmolLM2, Llama 3.x) parity with transformers 5.23 on tiny random checkpoints.

Logits of the re-authored torch model vs transformers: max abs error < 1e-4, for the tied
SmolLM2 shape, Llama 3.x's `llama3` RoPE with an untied head, and q/k/v/o biases. Greedy
tokens on the Core AI runtime: 8/8 identical to transformers' `generate` with a 10-token
prompt that spans two prefill chunks of 4 and two single decode steps.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from zoo.core.asset.kv_writes import get_strategy
from zoo.core.io.files import UnsupportedConfig
from zoo.llama import ENTRY, load_llama
from zoo.testing import (
    check_cli_export_and_generate,
    check_layout_computes_the_same,
    check_logits_match_transformers,
    check_runtime_greedy,
    check_window_shorter_than_the_cache,
)
from zoo.testing_kv import check_int8_kv_cache

from .conftest import CHUNK

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

PROMPT = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]


@pytest.mark.parametrize("variant", list(ENTRY.tiny.variants))
def test_logits_match_transformers(checkpoints, variant):
    check_logits_match_transformers("llama", checkpoints[variant], PROMPT)


def test_llama3_rope_scaling_changes_the_frequencies(checkpoints):
    """The tiny `llama3` variant engages all three bands (stretched, kept, ramped)."""
    scaled = load_llama(checkpoints["llama3"], "runtime-index", 64).layers[0].self_attn.inv_freq
    plain = 1.0 / 500_000.0 ** (torch.arange(0, 16, 2) / 16)
    ratio = (plain / scaled).tolist()
    assert ratio[0] == pytest.approx(1.0) and ratio[-1] == pytest.approx(8.0)
    assert any(1.01 < r < 7.99 for r in ratio)


@pytest.mark.parametrize(
    "variant,strategy",
    [
        ("default", "runtime-index"),
        ("default", "input-mask-blend"),
        ("llama3", "runtime-index"),
        ("bias", "input-mask-blend"),
    ],
)
def test_greedy_tokens_on_the_runtime_match_transformers(checkpoints, assets, variant, strategy):
    assert len(PROMPT) > CHUNK  # the prompt spans prefill chunks and single steps
    check_runtime_greedy("llama", checkpoints, assets, variant, strategy, PROMPT)


def test_unsupported_configs_are_refused_by_name(checkpoints, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(checkpoints["default"], ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    for field, value, named in [
        ("mlp_bias", True, "mlp_bias=True"),
        ("hidden_act", "gelu", "hidden_act='gelu'"),
        ("rope_parameters", {"rope_type": "yarn", "rope_theta": 1e4}, "RoPE type 'yarn'"),
    ]:
        (ckpt / "config.json").write_text(json.dumps({**config, field: value}))
        with pytest.raises(UnsupportedConfig, match=named):
            load_llama(ckpt)
    (ckpt / "config.json").write_text(json.dumps({**config, "model_type": "qwen3"}))
    named = "model_type 'qwen3'.*Llama checkpoints \\('llama', 'mistral', 'qwen2'\\)"
    with pytest.raises(ValueError, match=named):
        load_llama(ckpt)


def test_cli_export_and_generate(checkpoints, tmp_path):
    check_cli_export_and_generate("llama", checkpoints["default"], tmp_path)


@pytest.mark.parametrize("strategy", ["runtime-index", "input-mask-blend"])
def test_layer_ranges_decode_like_transformers_and_like_one_function(checkpoints, assets, strategy):
    """One function per layer (`--layers-per-function 1`), prefill pipelined over them."""
    check_runtime_greedy("llama", checkpoints, assets, "default", strategy, PROMPT, layout="ranges")
    check_layout_computes_the_same(assets, "default", strategy, "ranges")


@pytest.mark.parametrize("layout", ["spans", "ranges-spans"])
@pytest.mark.parametrize("strategy", ["runtime-index", "input-mask-blend"])
def test_attention_spans_decode_like_transformers_and_like_the_whole_context(
    checkpoints, assets, strategy, layout
):
    """Spans of 8 and 16 columns (`--spans 8,16`), alone and with one function per layer:
    each prefill chunk reads only the cache columns its span holds, and computes the same."""
    check_runtime_greedy("llama", checkpoints, assets, "default", strategy, PROMPT, layout=layout)
    check_layout_computes_the_same(assets, "default", strategy, layout)


def test_mistral_sliding_window_past_the_window_decodes_like_transformers(tmp_path):
    """Mistral 7B v0.1's config with a window of 5 and a 64-token cache: each token sees
    the last 5 keys (the host's sliding_mask), exact past the window."""
    from zoo.released import released_configs, scale_down, write_checkpoint

    config = scale_down(json.loads(released_configs("llama")["Mistral-7B-v0.1"].read_text()))
    checkpoint = write_checkpoint({**config, "sliding_window": 5}, tmp_path / "mistral")
    check_window_shorter_than_the_cache("llama", checkpoint, 64, PROMPT, tmp_path)


def test_qwen2_biases_are_on_q_k_v_only():
    config = ENTRY.config.from_dict({**ENTRY.tiny.text, "model_type": "qwen2"})
    attention = ENTRY.model(config, get_strategy("runtime-index"), 16).layers[0].self_attn
    assert [p.bias is not None for p in (attention.q_proj, attention.k_proj)] == [True, True]
    assert attention.v_proj.bias is not None and attention.o_proj.bias is None


@pytest.mark.parametrize("strategy", ["runtime-index", "input-mask-blend"])
def test_an_int8_kv_cache_decodes_like_eager_with_the_same_cache(checkpoints, assets, strategy):
    check_int8_kv_cache("llama", checkpoints, assets, "default", strategy)
