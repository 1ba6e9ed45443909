"""Phi-3 / Phi-4 parity with transformers 5.23 on tiny random checkpoints.

Logits of the re-authored torch model vs transformers: max abs error < 1e-4, for
Phi-3-mini's shape (fused projections, a sliding window no shorter than the cache) and
Phi-4-mini's (grouped KV heads, tied head, partial rotary, longrope). Greedy tokens on the
Core AI runtime: 8/8 identical to transformers' `generate` with a 10-token prompt that
spans two prefill chunks of 4 and two single decode steps.
"""

from __future__ import annotations

import copy
import json
import shutil

import pytest
import torch

from zoo.core.io.files import UnsupportedConfig
from zoo.core.model.eager import torch_logits
from zoo.phi3 import ENTRY, load_phi3
from zoo.testing import (
    check_cli_export_and_generate,
    check_layout_computes_the_same,
    check_logits_match_transformers,
    check_runtime_greedy,
    check_window_shorter_than_the_cache,
)

from .conftest import CAPACITY, CHUNK

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

PROMPT = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]


@pytest.mark.parametrize("variant", list(ENTRY.tiny.variants))
def test_logits_match_transformers(checkpoints, variant):
    check_logits_match_transformers("phi3", checkpoints[variant], PROMPT)


def test_partial_rotary_leaves_the_tail_of_each_head_alone(checkpoints):
    """Phi-4-mini's 0.75: RoPE turns 12 of 16 dims; longrope scales cos and sin."""
    ours = load_phi3(checkpoints["phi4-mini"], "runtime-index", CAPACITY)
    attention = ours.layers[0].self_attn
    assert ours.config.rotary_dim == 12 and attention.inv_freq.shape == (6,)
    assert attention.scaling == pytest.approx((1 + 1 / 3) ** 0.5)  # ln 4 / ln 64 = 1/3
    default = load_phi3(checkpoints["default"], "runtime-index", CAPACITY)
    assert default.config.rotary_dim == 16 and default.layers[0].self_attn.scaling == 1.0


@pytest.mark.parametrize(
    "variant,strategy",
    [("default", "runtime-index"), ("phi4-mini", "input-mask-blend")],
)
def test_greedy_tokens_on_the_runtime_match_transformers(checkpoints, assets, variant, strategy):
    assert len(PROMPT) > CHUNK  # the prompt spans prefill chunks and single steps
    check_runtime_greedy("phi3", checkpoints, assets, variant, strategy, PROMPT)


def test_a_cache_past_longrope_s_short_range_is_refused(checkpoints):
    """Within it the entry is exact (the greedy test runs at the edge: 64 = 64)."""
    with pytest.raises(UnsupportedConfig, match="original_max_position_embeddings=64 is"):
        load_phi3(checkpoints["phi4-mini"], "runtime-index", CAPACITY + 1)


def test_a_sliding_window_shorter_than_the_cache_decodes_like_transformers(checkpoints, tmp_path):
    """Phi-3-mini-4k's window (2047 of 4096) in small: 5 keys, a 64-token cache."""
    ckpt = shutil.copytree(checkpoints["default"], tmp_path / "window")
    config = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**config, "sliding_window": 5}))
    check_window_shorter_than_the_cache("phi3", ckpt, CAPACITY, PROMPT, tmp_path)


def test_unsupported_configs_are_refused_by_name(checkpoints, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(checkpoints["default"], ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    for change, named in [
        (dict(hidden_act="gelu_new"), "hidden_act='gelu_new'"),
        (dict(rope_parameters={"rope_type": "llama3", "rope_theta": 1e4}), "RoPE type 'llama3'"),
        (dict(attention_bias=True), "attention_bias=True"),
        (dict(model_type="phimoe"), "phimoe"),
    ]:
        (ckpt / "config.json").write_text(json.dumps({**config, **change}))
        with pytest.raises((UnsupportedConfig, ValueError), match=named):
            load_phi3(ckpt, capacity=CAPACITY)


def test_fused_projections_are_read_and_used(checkpoints):
    """One qkv_proj and one gate_up_proj per layer; scaling the value third changes logits."""
    ours = load_phi3(checkpoints["default"], "runtime-index", CAPACITY)
    layer, config = ours.layers[0], ours.config
    width = config.num_attention_heads * config.head_dim
    assert layer.self_attn.qkv_proj.weight.shape == (3 * width, config.hidden_size)
    assert layer.mlp.gate_up_proj.weight.shape == (2 * config.intermediate_size, width)
    before = torch_logits(ours, PROMPT)
    with torch.no_grad():
        layer.self_attn.qkv_proj.weight[2 * width :].mul_(3.0)
    assert (torch_logits(ours, PROMPT) - before).abs().max().item() > 1e-3


def test_cli_export_and_generate(checkpoints, tmp_path):
    check_cli_export_and_generate("phi3", checkpoints["phi4-mini"], tmp_path)


def test_layer_ranges_decode_like_transformers_and_like_one_function(checkpoints, assets):
    """One function per layer (`--layers-per-function 1`), prefill pipelined over them."""
    strategy = "runtime-index"
    check_runtime_greedy(
        "phi3", checkpoints, assets, "phi4-mini", strategy, PROMPT, layout="ranges"
    )
    check_layout_computes_the_same(assets, "phi4-mini", strategy, "ranges")


def test_the_old_su_spelling_is_refused_as_transformers_refuses_it():
    """Phi-3-mini-128k's first release spelled longrope `su`: transformers 5.23 fails on
    it, and the entry names it (rename it `longrope` to load the file)."""
    import transformers

    from zoo.phi3 import Phi3Config

    raw = dict(
        ENTRY.tiny.text,
        model_type="phi3",
        original_max_position_embeddings=64,
        rope_scaling=dict(type="su", short_factor=[1.0, 1.5] * 4, long_factor=[2.0] * 8),
    )
    with pytest.raises(KeyError, match="original_max_position_embeddings"):
        transformers.Phi3Config(**copy.deepcopy(raw))  # it edits the dicts it is given
    with pytest.raises(UnsupportedConfig, match="RoPE type 'su'"):
        Phi3Config.from_dict(raw)
    raw["rope_scaling"]["type"] = "longrope"
    theirs = transformers.Phi3Config(**copy.deepcopy(raw)).rope_parameters
    theirs.pop("type")  # transformers keeps the old key beside rope_type
    assert Phi3Config.from_dict(raw).rope_parameters == theirs
