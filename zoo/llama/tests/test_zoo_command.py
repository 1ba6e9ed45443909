"""The `zoo` command (`python -m zoo`, installed as `zoo`): the entry comes from the
checkpoint's config.json `model_type` (export) or the asset's metadata (generate)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from zoo.core.asset.decode_spec import DecodeSpec
from zoo.core.model.entry import all_entries

pytestmark = pytest.mark.export  # the suite's tiers: pyproject.toml's markers


def zoo(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "zoo", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)


def test_list_names_every_entry_and_its_model_types():
    done = zoo("list")
    assert done.returncode == 0, done.stderr
    for name, entry in all_entries().items():
        line = next(ln for ln in done.stdout.splitlines() if ln.startswith(f"zoo.{name} "))
        assert all(kind in line for kind in entry.config.model_types()), line
        assert ("text, images" in line) == ("vision" in entry.encoders), line


def test_mistral_and_qwen2_checkpoints_go_to_the_llama_entry(tmp_path):
    from zoo.core.model.entry import entry_for_checkpoint

    for kind in ("llama", "mistral", "qwen2"):
        (tmp_path / "config.json").write_text(json.dumps({"model_type": kind}))
        assert entry_for_checkpoint(tmp_path).name == "llama"


def test_export_picks_the_entry_from_model_type_and_generate_from_the_asset(checkpoints, tmp_path):
    out = tmp_path / "picked.aimodel"
    done = zoo("export", checkpoints["default"], out, "--capacity", 32, "--chunk", 4)
    assert done.returncode == 0, done.stderr
    assert DecodeSpec.of_asset(out).model == "llama"
    generated = zoo("generate", out, "--prompt-ids", "2,17,33", "--max-new-tokens", 3)
    assert generated.returncode == 0, generated.stderr
    assert len(generated.stdout.split()) == 3


def test_an_unknown_model_type_is_refused_with_the_entries(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "falcon"}))
    done = zoo("export", tmp_path, tmp_path / "x.aimodel")
    assert done.returncode == 2
    assert "model_type 'falcon'" in done.stderr and "mistral (zoo.llama)" in done.stderr
    assert not (tmp_path / "x.aimodel").exists()


@pytest.mark.parametrize("level", [[], ["export"], ["generate"], ["list"], ["fetch"], ["quality"]])
def test_help_works_at_every_level_and_shows_defaults(level):
    done = zoo(*level, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: zoo {' '.join(level)}".rstrip()), done.stdout[:200]
    text = " ".join(done.stdout.split())  # as a reader reads it, argparse's wrapping aside
    if level == ["export"]:
        assert "--dry-run" in text and "(default: 256)" in text  # --capacity
    if level == ["generate"]:
        assert "--system" in text and "as many as the context holds" in text


def test_options_go_before_or_after_the_asset_and_only_the_answer_is_on_stdout(assets):
    asset = assets["default", "runtime-index"]
    first = zoo("generate", "--max-new-tokens", 4, asset, "--prompt-ids", "2,17,33")
    second = zoo("generate", asset, "--prompt-ids", "2,17,33", "--max-new-tokens", 4)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert first.stdout == second.stdout and len(first.stdout.split()) == 4
    assert all(word.isdigit() for word in first.stdout.split())  # the ids, nothing else
    assert "converting" not in first.stdout and "loading" in first.stderr


def test_a_request_that_cannot_fit_is_refused_before_decoding(assets):
    asset = assets["default", "runtime-index"]
    done = zoo("generate", asset, "--prompt-ids", "2,17,33", "--max-new-tokens", 400)
    assert done.returncode == 2 and done.stdout == ""
    assert "leaves room for 62 new, not 400" in done.stderr  # 64 - 3 + 1
    whole = zoo("generate", asset, "--prompt-ids", "2,17,33", "--temperature", "0")
    assert whole.returncode == 0, whole.stderr
    assert 1 <= len(whole.stdout.split()) <= 62  # up to the context, or a stop id


def test_dry_run_prints_the_plan_and_writes_nothing(checkpoints, tmp_path):
    out = tmp_path / "sub" / "planned.aimodel"
    args = ["--capacity", 48, "--layers-per-function", 2, "--spans", "32", "--kv-cache", "int8"]
    args += ["--verify", "4,2", "--dry-run"]
    done = zoo("export", checkpoints["default"], out, *args)
    assert done.returncode == 0, done.stderr
    plan = dict(re.split(r"\s{2,}", row, maxsplit=1) for row in done.stdout.splitlines())
    assert plan["entry"] == "zoo.llama" and plan["capacity"] == "48 tokens", plan
    assert plan["functions"].endswith("2 ranges [[0, 2], [2, 4]]") and plan["spans"] == "32"
    assert plan["functions"].startswith("prefill + decode + verify of 2, 4 tokens")
    assert plan["KV cache"].startswith("int8 codes and a float32 scale")
    assert "asset size" in done.stdout and "model in memory" in done.stdout
    assert not (tmp_path / "sub").exists()  # nothing written, not even the folder


def test_export_takes_a_hugging_face_id_from_the_local_hub_cache(checkpoints, tmp_path):
    """`zoo export ORG/NAME`: the snapshot huggingface_hub resolves offline, as a hub
    download leaves it (refs/main -> snapshots/REVISION/)."""
    revision = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hf" / "hub" / "models--tiny-org--tiny-llama"
    shutil.copytree(checkpoints["default"], repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    out = tmp_path / "from-hub.aimodel"
    done = zoo("export", "tiny-org/tiny-llama", out, "--capacity", 32, "--chunk", 4, env=env)
    assert done.returncode == 0, done.stderr
    assert DecodeSpec.of_asset(out).model == "llama"
    generated = zoo("generate", out, "--prompt-ids", "2,17,33", "--max-new-tokens", 3)
    assert generated.returncode == 0 and len(generated.stdout.split()) == 3, generated.stderr
    missing = zoo("export", "tiny-org/not-there", tmp_path / "no.aimodel", env=env)
    assert missing.returncode == 2 and "hf download tiny-org/not-there" in missing.stderr


def test_options_refuse_digits_other_than_ascii(checkpoints, tmp_path):
    done = zoo("export", checkpoints["default"], tmp_path / "x.aimodel", "--capacity", "٦٤")
    assert done.returncode == 2 and "is not a whole number" in done.stderr


def test_a_reader_that_leaves_early_is_no_error():
    """`zoo list | true`: the reader is gone before the list is printed (broken pipe)."""
    command = f"{sys.executable} -m zoo list | true"
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr  # zoo's own exit status (pipefail)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_a_verify_width_past_the_capacity_names_verify(checkpoints, tmp_path):
    """ffe1239 named 'the score chunk', which no option of the command line is called."""
    out = tmp_path / "x.aimodel"
    done = zoo("export", checkpoints["default"], out, "--capacity", 32, "--verify", 100000)
    assert done.returncode == 2 and "--verify 100000" in done.stderr, done.stderr
    assert "within it" in done.stderr and not out.exists()


@pytest.fixture(scope="module")
def small_asset(checkpoints, tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "small.aimodel"
    done = zoo("export", checkpoints["default"], out, "--capacity", 32, "--chunk", 4)
    assert done.returncode == 0, done.stderr
    return out


def test_generate_says_when_the_context_is_full_and_reads_apart_prompt_and_answer(small_asset):
    """No --max-new-tokens: as many as the context holds, then a line that says so (ffe1239
    stopped silently); the summary gives the prompt's reading and the answer's speed apart;
    ids end without a trailing space; one prompt token is one token."""
    done = zoo("generate", small_asset, "--prompt-ids", "2")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.split()) == 32 and not done.stdout.rstrip("\n").endswith(" ")
    assert "1 prompt token\n" in done.stderr, done.stderr
    assert "the context is full after 32 new tokens (capacity 32)" in done.stderr
    assert re.search(r"32 tokens in [\d.]+ s: the prompt's 1 token read in [\d.]+ s", done.stderr)
    asked = zoo("generate", small_asset, "--prompt-ids", "2,3", "--max-new-tokens", 4)
    assert asked.returncode == 0 and "context is full" not in asked.stderr, asked.stderr


@pytest.mark.skipif(sys.platform == "darwin", reason="gpu exists on macOS 27+")
def test_a_compute_unit_this_platform_lacks_is_refused_before_loading(small_asset):
    done = zoo("generate", small_asset, "--prompt-ids", "2", "--compute-unit", "gpu")
    assert done.returncode == 2 and "needs macOS 27+" in done.stderr
    assert "loading" not in done.stderr, done.stderr


def test_help_shows_the_sampling_and_expert_defaults():
    generate = " ".join(zoo("generate", "--help").stdout.split())  # wrapped at any width
    assert "greedy (default: 0.0)" in generate and "(default: among every token)" in generate
    assert "(default: a fresh one each run)" in generate
    assert "otherwise) (default: auto)" in " ".join(zoo("export", "--help").stdout.split())


def test_a_capacity_past_the_model_s_positions_is_warned(checkpoints, tmp_path):
    """ffe1239 took --capacity 100000 for a model of 8192 positions without a word."""
    config = json.loads((checkpoints["default"] / "config.json").read_text())
    past = config["max_position_embeddings"] * 2
    done = zoo(
        "export", checkpoints["default"], tmp_path / "x.aimodel", "--capacity", past, "--dry-run"
    )
    assert done.returncode == 0, done.stderr
    assert f"--capacity {past} is past the {past // 2} positions" in " ".join(done.stdout.split())


@pytest.mark.parametrize("command", ["fetch", "list"])
def test_debug_is_taken_by_every_command(command):
    """`zoo fetch ... --debug` was refused as an unrecognized argument on ffe1239."""
    done = zoo(command, "--debug", *(["--list"] if command == "fetch" else []))
    assert done.returncode == 0 and "smollm2" in done.stdout.lower(), done.stderr
