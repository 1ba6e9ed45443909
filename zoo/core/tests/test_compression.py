"""Compression presets on tiny checkpoints: each asset runs on the Core AI runtime and
matches the compressed model in torch eager; size and quality against fp32 within the
bounds docs/guides/compression.md states (random weights: no claim about real accuracy).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from zoo.core.compression.presets import PRESETS
from zoo.lab.compression import compression_row
from zoo.reference import make_tiny_checkpoint

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

pytest.importorskip("coreai_opt")

CASES = [
    (model, preset)
    for model in ("gemma4", "qwen3_5")
    for preset in PRESETS
    if (model, preset) != ("qwen3_5", "fp16")
]
# Lower bounds of the mean cosine similarity to the fp32 logits, over 72 positions.
COSINE = {"fp32": 0.99999, "fp16": 0.999, "int8": 0.99, "int4-block32": 0.6, "palettize4": 0.6}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("compression")


@pytest.mark.parametrize("model,preset", CASES, ids=[f"{m}-{p}" for m, p in CASES])
def test_preset_runs_on_the_runtime_and_matches_its_eager_model(model, preset, workdir):
    row = compression_row(model, preset, "input-mask-blend", workdir)
    assert row["positions"] >= 64
    if preset == "fp16":  # the cast acts on the exported program: eager stays fp32
        assert row["max abs error"] < 0.1
    else:
        assert row["runtime vs compressed eager (max abs)"] < 1e-4, row
    assert row["cosine"] >= COSINE[preset], row
    assert len(row["greedy tokens"]) == 8


@pytest.mark.parametrize("model", ["gemma4", "qwen3_5"])
def test_compressed_assets_are_smaller(model, workdir):
    size = {
        preset: compression_row(model, preset, "input-mask-blend", workdir)["asset bytes"]
        for preset in ("fp32", "int8", "int4-block32", "palettize4")
    }
    assert size["int8"] < 0.5 * size["fp32"]
    # both 4-bit presets below int8 (which is the smaller depends on the tables: palettize4
    # leaves the embedding fp32, int4-block32 compresses it)
    assert size["palettize4"] < size["int8"] and size["int4-block32"] < size["int8"]


@pytest.mark.parametrize("model,preset", [("gemma4", "palettize4"), ("qwen3_5", "int4-block32")])
def test_recommended_preset_with_the_other_kv_strategy(model, preset, workdir):
    blend = compression_row(model, preset, "input-mask-blend", workdir)
    index = compression_row(model, preset, "runtime-index", workdir)
    assert index["runtime vs compressed eager (max abs)"] < 1e-4
    assert index["greedy tokens"] == blend["greedy tokens"]


def test_fp16_refuses_qwen3_5_naming_the_cause(tmp_path):
    from zoo.qwen3_5 import export_qwen3_5, load_qwen3_5
    from zoo.reference import make_tiny_checkpoint

    model = load_qwen3_5(make_tiny_checkpoint("qwen3_5", tmp_path / "ck"), "input-mask-blend", 32)
    with pytest.raises(ValueError, match="GatedDeltaNet prefill loop"):
        export_qwen3_5(model, tmp_path / "x.aimodel", chunk=4, compress="fp16")
    assert not (tmp_path / "x.aimodel").exists()


@pytest.mark.parametrize(
    "model,released,preset",
    [("qwen3_5", "Qwen3.5-0.8B", "int4-block32"), ("gemma4", "gemma-4-E2B-it", "palettize4")],
)
def test_cli_exports_a_released_config_compressed_and_generates(model, released, preset, tmp_path):
    """The done-when of the compression issue, on checkpoints no other test exports."""
    import json

    from zoo.core.asset.opened import read_metadata
    from zoo.released import released_configs, scale_down, write_checkpoint

    config = scale_down(json.loads(released_configs(model)[released].read_text()))
    checkpoint = write_checkpoint(config, tmp_path / "ck", seed=3)
    asset = tmp_path / f"{preset}.aimodel"
    run = [sys.executable, "-m", f"zoo.{model}"]
    export = subprocess.run(
        [*run, "export", str(checkpoint), str(asset), "--compress", preset, "--capacity", "64"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert export.returncode == 0, export.stderr[-3000:]
    assert read_metadata(asset)["decode"]["compression"] == preset
    from zoo.core.model.layout import default_chunk  # no --chunk: the platform's measured default

    assert read_metadata(asset)["decode"]["chunk"] == min(default_chunk(), 64)
    generate = subprocess.run(
        [*run, "generate", str(asset), "--prompt", "w5 w9 w13", "--max-new-tokens", "4"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert generate.returncode == 0, generate.stderr[-3000:]
    assert f"(weights {preset})" in generate.stderr
    assert generate.stdout.strip()


@pytest.mark.parametrize(
    "model,preset,options",
    [("qwen3_5", "int4-block32", {}), ("gemma4", "palettize4", {"ple_sidecar": True})],
)
def test_compressing_while_loading_equals_compressing_after(model, preset, options, tmp_path):
    """The memory-bounded path (each module compressed as it is read, its weights
    memory-mapped) stores what compressing the loaded fp32 model stores, bit for bit."""
    import torch
    from torch.nn.utils import parametrize

    from zoo.core.compression.presets import get_preset
    from zoo.core.model.eager import torch_logits
    from zoo.core.model.entry import get_entry

    entry = get_entry(model)
    checkpoint = make_tiny_checkpoint(entry, tmp_path / "ck")
    ids = list(range(3, 40))
    after = get_preset(preset).apply(entry.load(checkpoint, "runtime-index", 64, **options))
    told = []
    while_loading = entry.load(
        checkpoint, "runtime-index", 64, compress=preset, progress=told.append, **options
    )
    assert while_loading.compression == preset
    assert torch.equal(torch_logits(after, ids), torch_logits(while_loading, ids))

    def dense(decoder) -> list[str]:
        return [
            name
            for name, module in decoder.named_modules()
            if isinstance(module, torch.nn.Linear) and not parametrize.is_parametrized(module)
        ]

    # the same projections compressed (coreai-opt leaves the few it cannot group alone)
    assert dense(while_loading) == dense(after)
    assert len(dense(after)) <= 1, dense(after)
    stored = list(Path(while_loading.weight_store.name).rglob("*.safetensors"))
    assert stored, "compressed weights are memory-mapped from the model's weight store"
    assert told and told[0].startswith(f"{preset}: reading layer 1 of")
    with pytest.raises(ValueError, match="loaded compressed with"):
        from zoo.core.export.functions import export_model

        export_model(while_loading, tmp_path / "x.aimodel", chunk=4, compress="int8")
    assert not (tmp_path / "x.aimodel").exists()


def test_a_loaded_checkpoint_keeps_no_meta_parameter(tmp_path):
    """Parameters are built on the meta device and replaced as tensors are read: a
    checkpoint that lacks one fails naming it, before anything is built."""
    from safetensors.torch import load_file, save_file

    from zoo.core.checkpoint.config import CheckpointError
    from zoo.core.model.entry import get_entry

    entry = get_entry("qwen3_5")
    checkpoint = make_tiny_checkpoint(entry, tmp_path / "ck")
    model = entry.load(checkpoint, "runtime-index", 64)
    assert all(p.device.type == "cpu" for p in model.parameters())
    file = next(checkpoint.glob("*.safetensors"))
    tensors = load_file(file)
    missing = next(key for key in tensors if key.endswith("mlp.down_proj.weight"))
    del tensors[missing]
    save_file(tensors, file, {"format": "pt"})
    with pytest.raises(CheckpointError, match="missing tensors: .*down_proj"):
        entry.load(checkpoint, "runtime-index", 64, compress="int8")


def test_int4_block32_stores_fp16_scales_for_an_fp32_graph():
    """coreai-opt gives scales the weight's dtype: the preset compresses an fp16 copy (half
    the scale bytes) and casts the dequantized weight back to fp32."""
    import torch

    from zoo.core.compression.presets import get_preset

    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 96, bias=False)
    weight = linear.weight.detach().clone()
    compressed = get_preset("int4-block32").compress_module("proj", linear)
    buffers = dict(compressed.named_buffers())
    scale = next(v for k, v in buffers.items() if k.endswith(".scale"))
    assert scale.dtype == torch.float16 and tuple(scale.shape) == (96, 2)  # 64 / 32 blocks
    assert compressed.weight.dtype == torch.float32
    x = torch.randn(3, 64)
    error = (compressed(x) - x @ weight.t()).abs().max() / (x @ weight.t()).abs().max()
    assert error < 0.1  # 4-bit rounding, not a broken dequantization
    kept = get_preset("int4-block32").compress_module("with_bias", torch.nn.Linear(64, 96))
    assert kept.weight.dtype == torch.float32 and kept.bias.dtype == torch.float32


@pytest.mark.parametrize(
    "preset,bits",
    [
        ("fp32", 32 * 6144),
        # 4-bit codes, an fp16 scale and an fp16 minimum per 32: 5.0 bits a weight
        ("int4-block32", 6144 * 4 + 2 * (96 * 2) * 16),
        # 8-bit codes, an fp32 scale and an int8 zero point per output channel
        ("int8", 6144 * 8 + 96 * 32 + 96 * 8),
        # 4-bit indices and a 16-entry fp32 table per 32 output channels
        ("palettize4", 6144 * 4 + 3 * 16 * 32),
    ],
)
def test_bits_per_weight_count_codes_scales_offsets_and_tables(preset, bits):
    """Apple's bits per weight: what the asset stores, scales and tables included."""
    import torch

    from zoo.core.compression.presets import get_preset
    from zoo.core.compression.stores import stored_bits

    model = torch.nn.Sequential(torch.nn.Linear(64, 96, bias=False), torch.nn.LayerNorm(96))
    get_preset(preset).apply(model)
    assert stored_bits(model) == (bits + 2 * 96 * 32, 6144 + 2 * 96)  # the norm: fp32


def test_perplexity_intervals_resample_windows_paired_with_fp32():
    import numpy as np

    from zoo.evaluation import summarize

    fp32 = np.array([[90.0, 50, 0, 50]] * 4)
    scores = np.array([[100.0, 50, 1.0, 40]] * 3 + [[120.0, 50, 2.0, 45]])
    row = summarize(scores, fp32)
    assert row["perplexity"] == pytest.approx(np.exp(420 / 200), abs=1e-3)
    low, high = row["95% interval"]
    assert np.exp(100 / 50) - 1e-3 <= low < row["perplexity"] < high <= np.exp(120 / 50) + 1e-3
    assert row["KL vs fp32"] == pytest.approx(5 / 200) and row["top-1 vs fp32"] == 165 / 200
    same = summarize(fp32, fp32)
    assert same["change vs fp32 %"] == 0 and same["change 95% interval"] == [0, 0]
