"""The `zoo` command (`python -m zoo`, installed as `zoo`): the entry comes from the
checkpoint's config.json `model_type` (export) or the asset's metadata (generate)."""

from __future__ import annotations

import json
import subprocess
import sys

from zoo.core.entry import all_entries
from zoo.core.spec import DecodeSpec


def zoo(*args) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "zoo", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def test_list_names_every_entry_and_its_model_types():
    done = zoo("list")
    assert done.returncode == 0, done.stderr
    for name, entry in all_entries().items():
        line = next(ln for ln in done.stdout.splitlines() if ln.startswith(f"zoo.{name} "))
        assert all(kind in line for kind in entry.config.model_types()), line


def test_mistral_and_qwen2_checkpoints_go_to_the_llama_entry(tmp_path):
    from zoo.core.entry import entry_for_checkpoint

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
