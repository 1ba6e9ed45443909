"""GPTQ's codes (`zoo.core.compression.gptq`): on coreai-opt's grid, lower output error than
rounding, and an asset that answers like its eager model. Quality on real weights: zoo.evaluation's
records (random weights say nothing about it)."""

from __future__ import annotations

import random
import subprocess
import sys

import numpy as np
import pytest
import torch

from zoo.core.compression.gptq import gptq_codes, search_grid

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

pytest.importorskip("coreai_opt")


def min_max_grid(weight: torch.Tensor, block: int):
    w = weight.reshape(weight.shape[0], -1, block)
    low, high = w.amin(-1), w.amax(-1)
    return ((high - low) / 15).half().float(), low.half().float()


def dequantized(codes, scale, low, block):
    grid = codes.float().reshape(codes.shape[0], -1, block)
    return (grid * scale[..., None] + low[..., None]).reshape(codes.shape)


def correlated_inputs(columns: int, tokens: int = 2048) -> torch.Tensor:
    """Inputs whose columns correlate, as a layer's do: what GPTQ exploits."""
    generator = torch.Generator().manual_seed(1)
    mixing = torch.randn(columns, columns, generator=generator) / columns**0.5
    scales = torch.logspace(-1, 1, columns)  # some inputs matter far more than others
    return torch.randn(tokens, columns, generator=generator) @ mixing * scales


def test_gptq_codes_stay_on_the_grid_and_lower_the_output_error():
    torch.manual_seed(0)
    weight, block = torch.randn(48, 128), 32
    x = correlated_inputs(128)
    hessian = (x.T @ x / len(x)).double()
    scale, low = min_max_grid(weight, block)
    codes = gptq_codes(weight, hessian, scale, low)
    assert codes.dtype == torch.uint8 and int(codes.max()) <= 15
    rounded = (weight - low.repeat_interleave(block, 1)) / scale.repeat_interleave(block, 1)
    rounded = rounded.round().clamp(0, 15).to(torch.uint8)

    def output_error(c):
        return float(((weight - dequantized(c, scale, low, block)) @ x.T).norm())

    assert output_error(codes) < 0.8 * output_error(rounded), (
        output_error(codes),
        output_error(rounded),
    )


def test_searched_grid_is_never_worse_than_min_max_in_weighted_error():
    torch.manual_seed(0)
    weight = torch.randn(16, 128) * torch.logspace(-2, 0, 128)
    weight[3, 5] = 8.0  # an outlier: min/max wastes the grid on it
    importance = torch.rand(128) + 0.1

    def error(scale, low):
        codes = (weight.reshape(16, -1, 64) - low[..., None]) / scale[..., None]
        codes = codes.round().clamp(0, 15).reshape(16, 128)
        return float(((dequantized(codes, scale, low, 64) - weight) ** 2 * importance).sum())

    scale, low = search_grid(weight, importance, 64)
    assert scale.dtype == torch.float16 and scale.shape == (16, 2)
    assert error(scale.float(), low.float()) < error(*min_max_grid(weight, 64))


@pytest.fixture(scope="module")
def calibrated_case(tmp_path_factory):
    from zoo.reference import make_tiny_checkpoint

    directory = tmp_path_factory.mktemp("gptq")
    checkpoint = make_tiny_checkpoint(
        "llama", directory / "ck", hidden_size=128, intermediate_size=256, num_attention_heads=8
    )
    rng = random.Random(0)
    text = directory / "calibration.txt"
    text.write_text(" ".join(f"w{rng.randrange(3, 128)}" for _ in range(600)))
    return checkpoint, text, directory


def test_a_gptq_asset_answers_as_its_eager_model_at_the_size_of_rounding(calibrated_case):
    from zoo.core.asset.opened import read_metadata
    from zoo.core.compression.gptq import calibration_windows
    from zoo.core.export.run import export
    from zoo.core.host.generator import runtime_greedy
    from zoo.core.isolate import run_isolated
    from zoo.core.model.eager import torch_logits
    from zoo.core.model.entry import load

    checkpoint, text, directory = calibrated_case
    asset = export(
        checkpoint,
        directory / "gptq.aimodel",
        compress="gptq:int4-block64",
        calibration=text,
        capacity=64,
    )
    assert read_metadata(asset)["decode"]["compression"] == "gptq:int4-block64"
    rounded = export(checkpoint, directory / "rtn.aimodel", compress="int4-block64", capacity=64)

    def size(path):
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())

    assert abs(size(asset) - size(rounded)) < 0.01 * size(rounded)  # the same format

    model = load(
        checkpoint,
        capacity=64,
        compress="gptq:int4-block64",
        calibration=calibration_windows(checkpoint, text),
    )
    assert model.calibration["calibrated modules"] == 4 * 7 + 1  # 7 projections a layer, table
    prompt = [5, 9, 13, 17]
    got = run_isolated(runtime_greedy, str(asset), prompt, timeout=300)
    assert got.ok, got.summary()
    eager = torch_logits(model, prompt + got.result["tokens"][:-1])[0].numpy()
    runtime = np.array(got.result["logits"])
    assert np.abs(runtime - eager[len(prompt) - 1 :]).max() < 1e-4
    codes = {
        name: module.parametrizations.weight[0].quantized_data
        for name, module in model.named_modules()
        if name.endswith("up_proj")
    }
    plain = load(checkpoint, capacity=64, compress="int4-block64")
    assert any(
        not torch.equal(
            codes[name], plain.get_submodule(name).parametrizations.weight[0].quantized_data
        )
        for name in codes
    )


@pytest.mark.parametrize(
    "options,message",
    [
        ([], "chooses its codes on calibration text"),
        (["--calibration", "missing.txt"], "missing.txt: no such file"),
        (["--calibration", "calibration.txt", "--stream", "on"], "--stream off"),
    ],
)
def test_zoo_export_refuses_a_calibrated_preset_without_its_text(calibrated_case, options, message):
    checkpoint, text, directory = calibrated_case
    command = [sys.executable, "-m", "zoo", "export", str(checkpoint), "out.aimodel"]
    done = subprocess.run(
        [*command, "--compress", "gptq:int4-block64", *options],
        capture_output=True,
        text=True,
        cwd=directory,
        timeout=120,
    )
    assert done.returncode != 0 and message in done.stderr, done.stderr
    assert not (directory / "out.aimodel").exists()


def test_calibration_text_is_refused_for_a_preset_that_does_not_use_it(calibrated_case):
    from zoo.core.export.plan import plan_export

    checkpoint, text, directory = calibrated_case
    with pytest.raises(ValueError, match="--calibration is for a calibrated preset"):
        plan_export(checkpoint, directory / "x.aimodel", compress="int8", calibration=text)
    with pytest.raises(ValueError, match="GPTQ chooses codes of int4-block32 or int4-block64"):
        plan_export(checkpoint, directory / "x.aimodel", compress="gptq:int8")
