"""Loading errors, the decode contract, and the command line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

from zoo.core.asset.decode_spec import ContextFullError
from zoo.core.checkpoint.config import CheckpointError
from zoo.core.host.generator import Generator
from zoo.gemma4 import UnsupportedConfig, load_gemma4
from zoo.gemma4.config import Gemma4Config

from .conftest import CAPACITY

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

PROMPT = [2, 17, 33, 91, 5]


def copy_checkpoint(source, tmp_path):
    target = tmp_path / "ckpt"
    shutil.copytree(source, target)
    return target


def edit_config(directory, **changes):
    path = directory / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))


def test_wrong_model_type(checkpoints, tmp_path):
    ckpt = copy_checkpoint(checkpoints["softcap"], tmp_path)
    edit_config(ckpt, model_type="llama")
    with pytest.raises(ValueError, match="model_type 'llama'.*Gemma 4"):
        load_gemma4(ckpt)


def test_unsupported_options_are_named(checkpoints, tmp_path):
    ckpt = copy_checkpoint(checkpoints["softcap"], tmp_path)
    edit_config(ckpt, use_bidirectional_attention="all")
    with pytest.raises(UnsupportedConfig, match="use_bidirectional_attention='all'"):
        load_gemma4(ckpt)
    edit_config(ckpt, use_bidirectional_attention=None, enable_moe_block=True, num_experts=4)
    with pytest.raises(ValueError, match="enable_moe_block needs top_k_experts >= 1"):
        load_gemma4(ckpt)


def test_per_layer_overrides_keyed_as_config_json_spells_them():
    # transformers writes zero-padded string keys once a model has 10 layers or more
    layer_types = (["sliding_attention"] * 4 + ["full_attention"]) * 2 + ["full_attention"]
    config = Gemma4Config.from_dict(
        {
            "model_type": "gemma4_text",
            "num_hidden_layers": 11,
            "layer_types": layer_types,
            "per_layer_config": {"04": {"head_dim": 512}, "09": {"head_dim": 512}, "10": {}},
        }
    )
    assert [config.layer_head_dim(i) for i in (3, 4, 9, 10)] == [256, 512, 512, 256]


def test_missing_and_misshaped_tensors_are_listed(checkpoints, tmp_path):
    ckpt = copy_checkpoint(checkpoints["softcap"], tmp_path)
    tensors = load_file(ckpt / "model.safetensors")
    del tensors["model.layers.0.self_attn.q_norm.weight"]
    tensors["model.norm.weight"] = torch.zeros(3)
    save_file(tensors, ckpt / "model.safetensors")
    with pytest.raises(CheckpointError) as error:
        load_gemma4(ckpt)
    assert "missing tensors: layers.0.self_attn.q_norm.weight;" in str(error.value)
    assert "model.norm.weight (3,), expected (64,)" in str(error.value)


def test_pickle_checkpoints_are_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gemma4_text"}))
    (tmp_path / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(FileNotFoundError, match="pickle checkpoints are not loaded"):
        load_gemma4(tmp_path)


def test_not_a_checkpoint_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_gemma4(tmp_path)


def test_strategies_that_cannot_serve_are_refused(checkpoints):
    import zoo.lab.kv_cells  # noqa: F401 - registers the isolation cells by name

    with pytest.raises(ValueError, match="'host-cache' cannot serve Gemma 4"):
        load_gemma4(checkpoints["softcap"], "host-cache")


@pytest.fixture(scope="module")
def generator(assets):
    # The host loop's contract, in this process: the strategy reported to run on a Mac GPU.
    with Generator(assets["softcap", "input-mask-blend"]) as loaded:
        yield loaded


def test_sampling_is_reproducible_with_a_seed(generator):
    first = generator.generate(PROMPT, 6, temperature=0.8, top_k=5, seed=7, stop_token_ids=[])
    again = generator.generate(PROMPT, 6, temperature=0.8, top_k=5, seed=7, stop_token_ids=[])
    other = generator.generate(PROMPT, 6, temperature=5.0, seed=8, stop_token_ids=[])
    assert first == again and len(first) == 6
    assert other != first


def test_stop_token_ends_generation(generator):
    greedy = generator.generate(PROMPT, 8, stop_token_ids=[])
    stop = greedy[3]
    stopped = generator.generate(PROMPT, 8, stop_token_ids=[stop])
    assert stopped == greedy[: greedy.index(stop) + 1]


def test_a_full_context_says_so(generator):
    with pytest.raises(ContextFullError, match=f"the context holds {CAPACITY} tokens"):
        generator.generate(PROMPT, CAPACITY, stop_token_ids=[])
    with pytest.raises(ContextFullError):
        generator.generate(list(range(CAPACITY + 1)), 1)


def cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "zoo.gemma4", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )


def test_cli_export_then_generate_text(checkpoints, tmp_path):
    out = tmp_path / "tiny.aimodel"
    export = cli("export", checkpoints["kv-sharing"], out, "--capacity", 32, "--chunk", 4)
    assert export.returncode == 0, export.stderr
    assert "saved" in export.stderr and out.is_dir()
    again = cli("export", checkpoints["kv-sharing"], out)
    assert again.returncode == 2 and "already exists; replace it with --overwrite" in again.stderr

    text = cli("generate", out, "--prompt", "w2 w17 w33 w91 w5", "--max-new-tokens", 5)
    assert text.returncode == 0, text.stderr
    assert len(text.stdout.split()) == 5 and all(w.startswith("w") for w in text.stdout.split())
    ids = cli("generate", out, "--prompt-ids", "2,17,33,91,5", "--max-new-tokens", 5)
    words = [f"w{i}" for i in ids.stdout.split()]
    assert words == text.stdout.split()  # the tokenizer maps wN <-> N
    assert "tok/s" in ids.stderr
