"""`zoo export ORG/NAME` from the local Hugging Face hub cache as a download leaves it: the
snapshot's files are relative links into the repository's `blobs/` (named by their sha256),
and a real model of 20-35B parameters is sharded (model.safetensors.index.json). Reads stay
inside the repository's snapshot and blobs: a revision file or a link that leaves them is
refused by name, and so is a blob that is gone."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from zoo.llama.tests.test_zoo_command import zoo
from zoo.reference import as_hub_download

pytestmark = pytest.mark.export  # the suite's tiers: pyproject.toml's markers

REVISION = "0123456789abcdef0123456789abcdef01234567"


def sharded(checkpoint: Path, into: Path, shards: int = 2) -> Path:
    """`checkpoint` rewritten as `shards` safetensors files and their index."""
    into.mkdir(parents=True)
    tensors = load_file(checkpoint / "model.safetensors")
    names = sorted(tensors)
    weight_map = {}
    for i in range(shards):
        file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[i::shards]}
        save_file(part, into / file, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, file))
    index = {"metadata": {}, "weight_map": weight_map}
    (into / "model.safetensors.index.json").write_text(json.dumps(index))
    for other in checkpoint.iterdir():
        if other.name != "model.safetensors":
            (into / other.name).write_bytes(other.read_bytes())
    return into


def hub_cache(folder: Path, hf_home: Path, repo_id: str) -> Path:
    return as_hub_download(folder, hf_home, repo_id, REVISION)


def offline(hf_home: Path) -> dict:
    return {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1"}


def test_a_sharded_checkpoint_in_the_hub_cache_exports_and_decodes_alike(checkpoints, tmp_path):
    """The snapshot's shard links resolve into `blobs/`: the cache's own layout, not a read
    from elsewhere (refused as 'outside' on ffe1239)."""
    hf_home = tmp_path / "hf"
    shards = sharded(checkpoints["default"], tmp_path / "sharded")
    snapshot = hub_cache(shards, hf_home, "tiny-org/sharded")
    assert (snapshot / "model-00001-of-00002.safetensors").is_symlink()
    out, plain = tmp_path / "hub.aimodel", tmp_path / "plain.aimodel"
    options = ("--capacity", 32, "--chunk", 4)
    done = zoo("export", "tiny-org/sharded", out, *options, env=offline(hf_home))
    assert done.returncode == 0, done.stderr
    assert zoo("export", checkpoints["default"], plain, *options).returncode == 0
    answers = [
        zoo("generate", asset, "--prompt-ids", "2,17,33", "--max-new-tokens", 4)
        for asset in (out, plain)
    ]
    assert all(a.returncode == 0 for a in answers), [a.stderr for a in answers]
    assert len(answers[0].stdout.split()) == 4
    assert answers[0].stdout == answers[1].stdout  # the same weights, read from two shards


def hub_refusal(tmp_path: Path, repo_id: str, out_name: str = "x.aimodel"):
    out = tmp_path / out_name
    done = zoo("export", repo_id, out, "--capacity", 32, env=offline(tmp_path / "hf"))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert not out.exists()
    return done.stderr


@pytest.mark.parametrize("revision", ["relative", "absolute"])
def test_a_revision_file_that_leaves_the_repository_is_refused(checkpoints, tmp_path, revision):
    hf_home = tmp_path / "hf"
    hub_cache(checkpoints["default"], hf_home, "tiny-org/ours")
    other = hub_cache(checkpoints["default"], hf_home, "other/repo")
    refs = hf_home / "hub" / "models--tiny-org--ours" / "refs" / "main"
    refs.write_text(
        f"../../models--other--repo/snapshots/{REVISION}" if revision == "relative" else str(other)
    )
    stderr = hub_refusal(tmp_path, "tiny-org/ours")
    assert "revision file" in stderr and "outside" in stderr and "hf download" in stderr, stderr


def test_a_snapshot_link_that_leaves_the_cache_is_refused(checkpoints, tmp_path):
    hf_home = tmp_path / "hf"
    snapshot = hub_cache(checkpoints["default"], hf_home, "tiny-org/ours")
    elsewhere = tmp_path / "elsewhere.safetensors"
    elsewhere.write_bytes((checkpoints["default"] / "model.safetensors").read_bytes())
    (snapshot / "model.safetensors").unlink()
    (snapshot / "model.safetensors").symlink_to(elsewhere)
    stderr = hub_refusal(tmp_path, "tiny-org/ours")
    assert "'model.safetensors' leads to" in stderr and "outside" in stderr, stderr


def test_a_missing_tokenizer_blob_is_refused_not_dropped(checkpoints, tmp_path):
    """A tokenizer link whose blob is gone gave an asset without a tokenizer, silently."""
    hf_home = tmp_path / "hf"
    snapshot = hub_cache(checkpoints["default"], hf_home, "tiny-org/ours")
    assert (snapshot / "tokenizer.json").exists()
    (snapshot / "tokenizer.json").resolve().unlink()
    stderr = hub_refusal(tmp_path, "tiny-org/ours")
    assert "tokenizer.json links to a blob that is not in the cache" in stderr, stderr
