"""The export for Apple's macOS engine contract (zoo.core.export.apple_engine), on a tiny
checkpoint.

The bundle is checked against the contract as read from Apple's code (names, shapes, the
dynamic context, metadata.json schema 0.2), then run on the Core AI runtime the way Apple's
runner is reported to drive it: a context longer than the traced 2,048 tokens, the prompt
through `prefill` in chunks, decode through `main` with one token. Apple's engine itself has
not run these bundles (no Mac here).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from zoo.core.asset.decode_spec import ContextFullError
from zoo.core.asset.opened import read_metadata
from zoo.core.export.apple_engine import EngineRunner, PackedPrefixWrite, export_engine_bundle
from zoo.core.host.runtime import Model
from zoo.reference import make_tiny_checkpoint, reference_model
from zoo.testing import engine_greedy_on_runtime, record

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

CAPACITY = 2100  # past the traced 2,048: the KV caches' context length stays dynamic
PROMPT = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zoo.qwen3_5", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def bundle(checkpoints, tmp_path_factory):
    out = tmp_path_factory.mktemp("engine") / "Qwen3.5-tiny"
    done = cli(
        "export", checkpoints["4-layer"], out, "--target", "apple-engine",
        "--capacity", CAPACITY, "--model-id", "Qwen/Qwen3.5-tiny",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


def test_the_bundle_follows_apples_contract(bundle, checkpoints):
    assert sorted(p.name for p in bundle.iterdir()) == [
        "Qwen3.5-tiny.aimodel",
        "metadata.json",
        "tokenizer",
    ]
    assert (bundle / "tokenizer" / "tokenizer.json").is_file()
    metadata = json.loads((bundle / "metadata.json").read_text())
    compilation = metadata.pop("compilation")
    assert set(compilation) == {"date", "targets"} and compilation["targets"] == []
    assert metadata == {
        "metadata_version": "0.2",
        "kind": "llm",
        "name": "Qwen3.5-tiny",
        "assets": {"main": "Qwen3.5-tiny.aimodel"},
        "language": {
            "tokenizer": "Qwen/Qwen3.5-tiny",
            "vocab_size": 128,
            "max_context_length": CAPACITY,
            "embedded_tokenizer": True,
            "function_map": {"main": ["main"]},
        },
        "source": {"model_definition": "torch", "hf_model_id": "Qwen/Qwen3.5-tiny"},
        "compression": None,
    }
    config = json.loads((checkpoints["4-layer"] / "config.json").read_text())
    text = config.get("text_config", config)
    conv_dim = 2 * text["linear_num_key_heads"] * text["linear_key_head_dim"] + (
        text["linear_num_value_heads"] * text["linear_value_head_dim"]
    )
    with Model.load(bundle / "Qwen3.5-tiny.aimodel") as model:
        assert sorted(model.function_names) == ["main", "prefill"]
        main, prefill = model.function("main"), model.function("prefill")
        for function in (main, prefill):
            assert function.input_names == ["input_ids", "position_ids"]
            assert {n: s[1] for n, s in function.inputs.items()} == {
                "input_ids": np.int32,
                "position_ids": np.int32,
            }
            assert function.inputs["input_ids"][0] == (1, None)  # the runner picks T
            assert function.inputs["position_ids"][0] == (1, None)
            assert sorted(function.state_names) == [  # the runner passes them by name
                "convStates",
                "keyCache",
                "recurrentStates",
                "valueCache",
            ]
            assert {n: s[0] for n, s in function.states.items()} == {
                # one row per full-attention layer; the context length is dynamic
                "keyCache": (1, 1, text["num_key_value_heads"], None, text["head_dim"]),
                "valueCache": (1, 1, text["num_key_value_heads"], None, text["head_dim"]),
                # one row per GatedDeltaNet layer (3 of the 4)
                "convStates": (3, 1, text["linear_conv_kernel_dim"], conv_dim),
                "recurrentStates": (
                    3,
                    1,
                    text["linear_num_value_heads"],
                    text["linear_key_head_dim"],
                    text["linear_value_head_dim"],
                ),
            }
        assert main.output_names == ["logits"]
        assert prefill.output_names == []  # no LM head: it only fills the states


def test_the_bundle_decodes_like_transformers(bundle, checkpoints):
    """Context 2,100 (traced at 2,048), prefill chunks of 4, decode through `main`."""
    from zoo.core.isolate import run_isolated
    from zoo.lab.expected import RAN_EXACT, current_target, expected, mismatch

    reference = reference_model("qwen3_5", checkpoints["4-layer"])
    with torch.no_grad():
        want_logits = reference(torch.tensor([PROMPT])).logits[0, -1].numpy()
    from zoo.reference import greedy_reference

    want = greedy_reference(reference, PROMPT)
    outcome = run_isolated(engine_greedy_on_runtime, str(bundle), PROMPT, CAPACITY, 4)
    if outcome.ok:
        tokens = outcome.result["tokens"]
        error = float(np.abs(np.array(outcome.result["logits"]) - want_logits).max())
        got = RAN_EXACT if tokens == want and error < 1e-4 else f"wrong numbers: {tokens}"
        row = {
            "greedy tokens": f"{sum(a == b for a, b in zip(tokens, want, strict=True))}/8 identical"
        }
        row["logits max abs error"] = f"{error:.1e}"
    else:
        got = outcome.summary()
        row = {"greedy tokens": got}
    record("qwen3_5-engine-bundle", {"rows": [row]})
    # 3 GatedDeltaNet layers over a dynamic context: the toy hybrid's "3/dynamic" cell
    want_outcome = expected("toy-hybrid", "3/dynamic")
    problem = mismatch(
        f"engine bundle on {current_target()}", "3/dynamic", want_outcome.outcome, got
    )
    assert problem is None, f"{problem}: {outcome.detail} (expectation: {want_outcome.source})"


def test_generate_runs_a_bundle_and_the_runner_refuses_past_its_context(bundle):
    done = cli("generate", bundle, "--prompt", "w2 w17 w33 w91 w5", "--max-new-tokens", 4)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.split()) == 4 and all(w.startswith("w") for w in done.stdout.split())
    with pytest.raises(ValueError, match="exactly|2 to 2100"):
        EngineRunner(bundle, context=CAPACITY + 1)
    with EngineRunner(bundle, context=8) as runner:
        runner.feed(PROMPT[:6])
        with pytest.raises(ContextFullError, match="6 are used and 3 more do not fit"):
            runner.feed(PROMPT[6:9])
        assert runner.position == 6  # nothing of the refused feed was run
        runner.feed(PROMPT[6:8])
        with pytest.raises(ValueError, match="text only"):
            runner.feed(PROMPT[:1], images=["photo.png"])


@pytest.mark.parametrize(
    "output, extra, fragment",
    [
        ("BUNDLE", [], "already exists; pass --overwrite"),
        ("x.aimodel", [], "bundle folder"),
        ("b", ["--keys-layout", "bhdt"], "drop --keys-layout"),
        ("b", ["--no-tokenizer"], "no tokenizer.json"),
    ],
)
def test_an_engine_export_refuses_before_it_loads(
    bundle, checkpoints, tmp_path, capsys, output, extra, fragment
):
    from zoo.core.cli.commands import run

    checkpoint = checkpoints["4-layer"]
    if "--no-tokenizer" in extra:
        extra, checkpoint = [], tmp_path / "no-tokenizer"
        shutil.copytree(checkpoints["4-layer"], checkpoint)
        (checkpoint / "tokenizer.json").unlink()
    out = bundle if output == "BUNDLE" else tmp_path / output
    before = {p: p.stat().st_mtime_ns for p in bundle.rglob("*")}
    argv = ["export", str(checkpoint), str(out), "--target", "apple-engine", *extra]
    assert run("qwen3_5", argv) == 2
    assert fragment in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in bundle.rglob("*")} == before
    assert output == "BUNDLE" or not out.exists()


def test_gemma4_does_not_fit_the_packed_states(tmp_path):
    from zoo.gemma4 import ENTRY

    checkpoint = make_tiny_checkpoint(ENTRY, tmp_path / "gemma")
    model = ENTRY.load(checkpoint, PackedPrefixWrite(), 64)
    with pytest.raises(ValueError, match="does not fit Apple's engine contract"):
        export_engine_bundle(model, tmp_path / "g", checkpoint)
    assert not (tmp_path / "g").exists()


def test_the_asset_records_how_it_packs_the_states(bundle):
    engine = read_metadata(bundle / "Qwen3.5-tiny.aimodel")["engine"]
    assert engine["states"]["convStates"]["layers"] == [
        "conv_state_0",
        "conv_state_1",
        "conv_state_2",
    ]
    assert engine["states"]["keyCache"]["layers"] == ["k_cache_3"]
