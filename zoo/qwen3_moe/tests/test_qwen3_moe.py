"""Qwen3 MoE parity with transformers 5.23 on tiny random checkpoints.

Logits of the re-authored torch model vs transformers: max abs error < 1e-4, with the
router's weights renormalised or not and with dense layers among the sparse ones. Greedy
tokens and logits on the Core AI runtime: 8/8 like transformers with both KV strategies,
computing the chosen experts only (GatherMM) or every expert, and as layer ranges.
"""

from __future__ import annotations

import json
import shutil

import pytest

from zoo.core.io.files import UnsupportedConfig
from zoo.core.model.experts import MixtureOfExperts
from zoo.qwen3_moe import ENTRY, load_qwen3_moe
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
    check_logits_match_transformers("qwen3_moe", checkpoints[variant], PROMPT)


def test_sparse_and_dense_layers_follow_the_config(checkpoints):
    kinds = [
        isinstance(layer.mlp, MixtureOfExperts)
        for layer in load_qwen3_moe(checkpoints["dense-layers"], capacity=64).layers
    ]
    assert kinds == [False, False, False, True]  # step 2: layers 1 and 3; 1 is mlp-only


# greedy and logits like transformers (both KV strategies), all experts, layer ranges
globals().update(mixture_of_experts_tests("qwen3_moe", PROMPT, CHUNK))


def test_bad_expert_configs_are_refused_by_name(checkpoints, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(checkpoints["default"], ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    for change, named in [
        (dict(num_experts_per_tok=9), "num_experts_per_tok=9 is not 1 to"),
        (dict(decoder_sparse_step=0), "decoder_sparse_step=0"),
        (dict(mlp_only_layers=[7]), r"mlp_only_layers \[7\] are not layers"),
        (dict(use_sliding_window=True), "sliding-window layers"),
    ]:
        for name in ("num_experts", "num_local_experts"):
            config.pop(name, None)
        (ckpt / "config.json").write_text(json.dumps({**config, "num_experts": 6, **change}))
        with pytest.raises((ValueError, UnsupportedConfig), match=named):
            load_qwen3_moe(ckpt)


def test_experts_published_one_by_one_are_compressed_stacked(checkpoints, tmp_path):
    check_experts_compressed_stacked(checkpoints["default"], tmp_path, PROMPT)


def test_cli_export_and_generate(checkpoints, tmp_path):
    check_cli_export_and_generate("qwen3_moe", checkpoints["default"], tmp_path)


def test_equal_router_logits_route_to_the_lowest_experts_everywhere(checkpoints, tmp_path):
    """An all-zero router ties every expert. torch's CPU topk orders exact ties its own way
    (experts 6 and 5 of 8 equal ones), the runtime's another; the zoo takes the lowest
    indices, in torch and in the graph. With transformers' topk taking ties the same way,
    the runtime decodes like it, both formulations."""
    import numpy as np
    import torch
    from safetensors.torch import load_file, save_file

    from zoo.core.export.functions import export_model
    from zoo.core.host.generator import runtime_greedy
    from zoo.core.isolate import run_isolated
    from zoo.core.model.experts import top_k_ties_to_lowest
    from zoo.reference import greedy_reference_logits, reference_model

    values, indices = top_k_ties_to_lowest(torch.tensor([[0.1, 0.3, 0.3, 0.2, 0.3]]), 3)
    assert indices.tolist() == [[1, 2, 4]] and torch.allclose(values, torch.tensor(0.3))
    checkpoint = tmp_path / "tied"
    shutil.copytree(checkpoints["default"], checkpoint)
    tensors = load_file(checkpoint / "model.safetensors")
    for name in [n for n in tensors if n.endswith("mlp.gate.weight")]:
        tensors[name] = torch.zeros_like(tensors[name])
    save_file(tensors, checkpoint / "model.safetensors", metadata={"format": "pt"})
    reference = reference_model("qwen3_moe", checkpoint)
    original = torch.topk

    def ties_to_lowest(x, k, dim=-1, largest=True, sorted=True):
        torch.topk = original  # (top_k_ties_to_lowest calls it on distinct ranks)
        try:
            return torch.return_types.topk(top_k_ties_to_lowest(x, k))
        finally:
            torch.topk = ties_to_lowest

    torch.topk = ties_to_lowest
    try:
        want, rows = greedy_reference_logits(reference, PROMPT)
    finally:
        torch.topk = original
    for experts in ("all", "chosen"):
        model = load_qwen3_moe(checkpoint, "runtime-index", 64)
        asset = export_model(
            model,
            tmp_path / f"{experts}.aimodel",
            chunk=CHUNK,
            checkpoint=checkpoint,
            experts=experts,
        )
        outcome = run_isolated(runtime_greedy, str(asset), PROMPT, timeout=300)
        assert outcome.ok and outcome.result["tokens"] == want, (experts, outcome.summary())
        assert np.abs(np.array(outcome.result["logits"]) - rows).max() < 1e-4
