"""Compression presets on tiny checkpoints: each asset runs on the Core AI runtime and
matches the compressed model in torch eager; size and quality against fp32 within the
bounds docs/guides/compression.md states (random weights: no claim about real accuracy).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from zoo.core.compress import PRESETS
from zoo.lab.compression import compression_row

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
    assert size["palettize4"] < size["int4-block32"] < size["int8"]


@pytest.mark.parametrize("model,preset", [("gemma4", "palettize4"), ("qwen3_5", "int4-block32")])
def test_recommended_preset_with_the_other_kv_strategy(model, preset, workdir):
    blend = compression_row(model, preset, "input-mask-blend", workdir)
    index = compression_row(model, preset, "runtime-index", workdir)
    assert index["runtime vs compressed eager (max abs)"] < 1e-4
    assert index["greedy tokens"] == blend["greedy tokens"]


def test_fp16_refuses_qwen3_5_naming_the_cause(tmp_path):
    from zoo.qwen3_5 import export_qwen3_5, load_qwen3_5, make_tiny_checkpoint

    model = load_qwen3_5(make_tiny_checkpoint(tmp_path / "ck"), "input-mask-blend", 32)
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

    from zoo.core.export import read_metadata
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
    generate = subprocess.run(
        [*run, "generate", str(asset), "--prompt", "w5 w9 w13", "--max-new-tokens", "4"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert generate.returncode == 0, generate.stderr[-3000:]
    assert f"(weights {preset})" in generate.stderr
    assert generate.stdout.strip()
