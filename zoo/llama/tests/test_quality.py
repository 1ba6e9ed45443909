"""What `zoo.quality` builds on, on a tiny SmolLM2-shaped checkpoint: the `score` function
returns every row's logits as torch eager computes them, perplexity and bits per weight
are what their definitions say, and the mixed preset stores what it names."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from zoo.core.compression.presets import get_preset, mixed
from zoo.core.export.functions import export_model
from zoo.core.host.generator import Generator
from zoo.core.isolate import run_isolated
from zoo.core.model.eager import torch_logits
from zoo.llama import load_llama
from zoo.quality import perplexity, runtime_costs, runtime_logits
from zoo.targets import targets

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

IDS = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3, 44]  # two score chunks of 4, then 3 one by one


@pytest.fixture(scope="module")
def scored_asset(checkpoints, tmp_path_factory):
    model = load_llama(checkpoints["default"], "runtime-index", 32)
    path = tmp_path_factory.mktemp("score") / "tiny-score.aimodel"
    return export_model(model, path, chunk=4, score_chunk=4), model


def test_score_returns_every_rows_logits_like_eager(scored_asset):
    asset, model = scored_asset
    outcome = run_isolated(runtime_logits, str(asset), IDS, timeout=300)
    assert outcome.ok, outcome.summary()
    got = np.asarray(outcome.result)
    want = torch_logits(model, IDS)[0].numpy()
    assert got.shape == want.shape == (len(IDS), model.config.vocab_size)
    assert np.abs(got - want).max() < 1e-4


def test_runtime_costs_score_within_the_budget_and_skip_past_it(scored_asset):
    asset, model = scored_asset
    ids = IDS * 2  # 22 tokens: past the 4-row prefill probe and the 4 timed decode steps
    scored = run_isolated(runtime_costs, str(asset), ids, 600.0, timeout=300)
    assert scored.ok, scored.summary()
    want = torch_logits(model, ids)[0].numpy()
    assert np.abs(np.asarray(scored.result["logits"]) - want).max() < 1e-4
    assert scored.result["decode ms"] > 0 and scored.result["estimated score s"] > 0
    skipped = run_isolated(runtime_costs, str(asset), ids, 0.0, timeout=300)
    assert skipped.ok and skipped.result["logits"] is None


def test_an_asset_without_score_says_how_to_get_one(assets):
    # the "ranges" layout has no score_chunk (the default layout has one since prompt lookup)
    with Generator(assets["default", "runtime-index", "ranges"]) as generator:
        with pytest.raises(ValueError, match="score_chunk"):
            generator.score([2, 17])


def test_perplexity_follows_its_definition():
    vocab, ids = 10, [1, 2, 3, 4]
    assert perplexity(np.zeros((4, vocab)), ids) == pytest.approx(vocab)  # uniform: vocab
    sure = np.full((4, vocab), -30.0)
    for row, token in enumerate(ids[1:]):
        sure[row, token] = 30.0
    assert perplexity(sure, ids) == pytest.approx(1.0, abs=1e-6)
    half = np.zeros((4, vocab))
    half[:, 0] = math.log(vocab - 1)  # token 0 holds half the mass; ids never say 0
    assert perplexity(half, ids) == pytest.approx(2 * (vocab - 1), rel=1e-6)


def test_targets_are_judged_from_the_rows():
    def row(preset, bits, runtime, eager):
        return {
            "preset": preset,
            "bits per weight": bits,
            "perplexity (runtime)": runtime,
            "perplexity (eager)": eager,
        }

    rows = [
        row("fp32", 32.0, 50.0, 50.1),
        row("fp16", 16.0, None, None),  # not finite: no perplexity, judged on nothing
        row("int8", 8.0, 50.6, 50.6),
        row("int4-block32", 4.0, 60.0, 60.0),
        row("mixed:embed_tokens", 4.9, 54.0, 54.0),
    ]
    judged = {t["target"]: t for t in targets({"rows": rows})}
    assert judged["int8 perplexity within 1% of fp32"] == {
        "target": "int8 perplexity within 1% of fp32",
        "measured": "+1.20%",
        "met": "no",
    }
    assert judged["mixed at <= 5 bits per weight"]["met"] == "yes"
    assert judged["mixed perplexity at most +10% over fp32"]["measured"] == "+8.00%"
    assert judged["mixed below int4-block32"]["met"] == "yes"
    gap = judged["runtime and eager perplexity of one asset within 0.5%"]
    assert gap["met"] == "yes" and gap["measured"].startswith("largest gap 0.200% (fp32;")


def test_bits_per_weight_of_each_preset(checkpoints):
    model = load_llama(checkpoints["default"], "runtime-index", 32)
    bits = {name: get_preset(name).bits_per_weight(model) for name in ("fp32", "fp16", "int8")}
    assert bits == {"fp32": 32, "fp16": 16, "int8": 8}
    assert get_preset("int4-block32").bits_per_weight(model) == 4
    # palettize4 leaves the (tied) embedding table fp32
    assert 4 < get_preset("palettize4").bits_per_weight(model) < 32
    one_layer = mixed(["layers.0"])
    tables = {n: m for n, m in model.named_modules() if n.startswith("layers.0.")}
    share = sum(m.weight.numel() for m in tables.values() if hasattr(m, "in_features"))
    total = sum(
        m.weight.numel()
        for m in model.modules()
        if isinstance(m, torch.nn.Linear | torch.nn.Embedding)
    )
    assert one_layer.bits_per_weight(model) == pytest.approx(4 + 4 * share / total)


def test_mixed_stores_int8_where_it_says_and_records_it(checkpoints, tmp_path):
    preset = mixed(["embed_tokens", "layers.1"])
    model = load_llama(checkpoints["default"], "runtime-index", 32, compress=preset)
    int8 = dict(model.named_modules())["layers.1.mlp.down_proj"]
    int4 = dict(model.named_modules())["layers.0.mlp.down_proj"]
    levels = [len(torch.unique(m.weight[0, :32].detach())) for m in (int8, int4)]
    assert levels[0] > 16 >= levels[1]  # a block of 32: 8-bit codes vs 16 levels
    asset = export_model(model, tmp_path / "mixed.aimodel", chunk=4, compress=preset)
    with Generator(asset) as generator:
        assert generator.spec.compression == "mixed"
        assert "embed_tokens, layers.1" in generator.spec.compression_detail


def test_quality_command_refuses_an_unknown_preset():
    command = [sys.executable, "-m", "zoo.quality", "smollm2-135m-instruct", "--presets", "int3"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "int3" in done.stderr and "int4-block32" in done.stderr


@pytest.mark.parametrize("module", ["zoo.quality", "zoo.evaluation"])
def test_a_sweep_of_an_unknown_kind_is_refused_naming_the_kinds(module):
    command = [sys.executable, "-m", module, "smollm2-135m-instruct", "--sweep", "mixed4"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "mixed4" in done.stderr and "mixed-palettized" in done.stderr


@pytest.mark.parametrize(
    "options,says",
    [
        (["--record", "{tmp}/rec", "--name", "../x"], "record name '../x'"),
        (["--record", "{tmp}/rec", "--name", "a/b"], "no folders"),
        (["--record", "{tmp}/file/rec"], "cannot make that folder"),
        (["--windows", "1"], "needs at least 2"),
        (["--windows", "x"], "not a whole number"),
    ],
)
def test_evaluation_refuses_a_record_outside_its_folder_and_one_window_at_once(
    tmp_path, options, says
):
    """Refused before any scoring (after an hour of it on ffe1239: `--name ../x` wrote
    outside DIR, and one window gave a zero-width interval)."""
    (tmp_path / "file").write_text("a file, not a folder")
    options = [o.replace("{tmp}", str(tmp_path)) for o in options]
    command = [sys.executable, "-m", "zoo.evaluation", "smollm2-135m-instruct", *options]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) in (["file"], ["file", "rec"])


@pytest.mark.parametrize(
    "compress,says",
    [
        ("mixed:", "names no module"),
        ("mixed:layers.99", "no module layers.99"),
        ("int3", "unknown compression preset"),
    ],
)
def test_export_refuses_a_mixed_preset_naming_nothing_or_no_module(
    checkpoints, tmp_path, compress, says
):
    out = tmp_path / "refused.aimodel"
    command = [sys.executable, "-m", "zoo.llama", "export", str(checkpoints["default"])]
    command += [str(out), "--capacity", "32", "--compress", compress]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and not out.exists()


def test_export_with_a_mixed_preset_from_the_command_line(checkpoints, tmp_path):
    out = tmp_path / "mixed-cli.aimodel"
    command = [sys.executable, "-m", "zoo.llama", "export", str(checkpoints["default"])]
    command += [str(out), "--capacity", "32", "--chunk", "4"]
    command += ["--compress", "mixed:embed_tokens,layers.0"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    with Generator(out) as generator:
        assert generator.spec.compression_detail.startswith("int8: embed_tokens, layers.0")


def test_mixed_palettized_stores_lut_sizes_where_it_says_and_runs_like_eager(checkpoints, tmp_path):
    preset = get_preset("mixed-palettized:layers.1")
    assert preset.spelling == "mixed-palettized:layers.1"
    model = load_llama(checkpoints["default"], "runtime-index", 32, compress=preset)
    modules = dict(model.named_modules())

    def lut_entries(name):
        return modules[name].parametrizations.weight[0].lut.shape[-2]

    assert lut_entries("layers.1.mlp.down_proj") == 256  # promoted: one 256-entry LUT
    assert lut_entries("layers.0.mlp.down_proj") == 16  # the rest: 16 entries a group
    table = modules["embed_tokens"].weight[0, :32].detach()
    assert len(torch.unique(table)) <= 16  # coreai-opt palettizes no table: int4-block32
    asset = export_model(model, tmp_path / "lut.aimodel", chunk=4, compress=preset, score_chunk=4)
    with Generator(asset) as generator:
        assert generator.spec.compression == "mixed-palettized"
        detail = generator.spec.compression_detail
        assert detail.startswith("256-entry LUTs (int8 tables): layers.1")
    outcome = run_isolated(runtime_logits, str(asset), IDS, timeout=300)
    assert outcome.ok, outcome.summary()
    want = torch_logits(model, IDS)[0].numpy()
    assert np.abs(np.asarray(outcome.result) - want).max() < 1e-4
