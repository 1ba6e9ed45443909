"""GPT-OSS parity with transformers 5.23 on tiny random checkpoints.

Logits of the re-authored torch model vs transformers: max abs error < 1e-4 with attention
sinks, yarn RoPE, sliding layers (a window of 4, shorter than the prompt) beside full ones,
and 8 stacked experts with biases and the clamped SwiGLU, 2 per token. Greedy tokens and
logits on the Core AI runtime: 8/8 like transformers with both KV strategies, computing the
chosen experts only (GatherMM) or every expert, and as layer ranges.
"""

from __future__ import annotations

import json
import shutil

import pytest

from zoo.core.checkpoint.config import CheckpointError
from zoo.core.io.files import UnsupportedConfig
from zoo.gpt_oss import ENTRY, load_gpt_oss
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
    check_logits_match_transformers("gpt_oss", checkpoints[variant], PROMPT)


# greedy and logits like transformers (both KV strategies), all experts, layer ranges
globals().update(mixture_of_experts_tests("gpt_oss", PROMPT, CHUNK))


def test_bad_configs_are_refused_by_name(checkpoints, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(checkpoints["default"], ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    for change, named in [
        (dict(num_experts_per_tok=9), "num_experts_per_tok=9 is not 1 to"),
        (dict(layer_types=["full_attention"]), "layer_types has 1 entries for 4 layers"),
        (dict(quantization_config={"quant_method": "awq"}), "experts stored awq"),
    ]:
        (ckpt / "config.json").write_text(json.dumps({**config, **change}))
        with pytest.raises((ValueError, UnsupportedConfig), match=named):
            load_gpt_oss(ckpt, capacity=64)


def test_experts_stored_mxfp4_as_released_are_read_like_transformers(checkpoints, tmp_path):
    """GPT-OSS is released with MXFP4 experts: read as stored and dequantized exactly, the
    weights equal transformers' own dequantization and the logits its model's."""
    import torch
    from safetensors import safe_open
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    from zoo.reference import store_experts_mxfp4

    released = shutil.copytree(checkpoints["default"], tmp_path / "mxfp4")
    store_experts_mxfp4(released)
    with safe_open(str(released / "model.safetensors"), "pt") as tensors:
        key = "model.layers.1.mlp.experts.down_proj"
        assert key not in tensors.keys()  # only the packed codes are stored
        blocks, scales = tensors.get_tensor(key + "_blocks"), tensors.get_tensor(key + "_scales")
    theirs = convert_moe_packed_tensors(blocks, scales, dtype=torch.float32)
    ours = load_gpt_oss(released, capacity=64)
    assert torch.equal(ours.layers[1].mlp.experts.down_proj, theirs)
    check_logits_match_transformers("gpt_oss", released, PROMPT)
    (released / "model.safetensors").rename(released / "model-00001-of-00001.safetensors")
    with safe_open(str(released / "model-00001-of-00001.safetensors"), "pt") as tensors:
        kept = {k: tensors.get_tensor(k) for k in tensors.keys()}  # noqa: SIM118
    from safetensors.torch import save_file

    scales = {k: kept.pop(k) for k in list(kept) if k.endswith("_scales")}
    save_file(kept, released / "model-00001-of-00001.safetensors")
    save_file(scales, released / "scales.safetensors")  # the scales in a shard of their own
    assert torch.equal(load_gpt_oss(released, capacity=64).layers[1].mlp.experts.down_proj, theirs)
    (released / "scales.safetensors").unlink()
    with pytest.raises(CheckpointError, match="no tensor .*down_proj_scales"):
        load_gpt_oss(released, capacity=64)


def test_sinks_and_the_window_are_read_and_used(checkpoints):
    ours = load_gpt_oss(checkpoints["default"], capacity=64)
    kinds = [layer.self_attn.window for layer in ours.layers]
    assert kinds == [4, None, 4, None] and ours.sliding_window == 4
    assert ours.layers[0].self_attn.sinks.abs().sum() > 0  # jittered, loaded


def test_experts_are_compressed_stacked_and_chosen_or_all_decode_alike(checkpoints, tmp_path):
    check_experts_compressed_stacked(checkpoints["default"], tmp_path, PROMPT)


def test_cli_export_and_generate(checkpoints, tmp_path):
    check_cli_export_and_generate("gpt_oss", checkpoints["default"], tmp_path)
