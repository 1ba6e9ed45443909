"""Prompt-lookup speculative decoding (`zoo.core.speculative`): the greedy tokens are plain
greedy decoding's, token for token, on the runtime."""

from __future__ import annotations

import subprocess
import sys

import pytest

from zoo.core.speculative import lookup_draft
from zoo.lab.isolate import run_isolated
from zoo.reference import make_tiny_checkpoint


def test_lookup_proposes_what_followed_the_last_ngram():
    assert lookup_draft([5, 6, 7, 8, 9, 5, 6, 7], 3) == [8, 9, 5]
    assert lookup_draft([5, 6, 7, 8, 1, 7], 2) == []  # a single token predicts too little
    assert lookup_draft([5, 6, 7, 8, 1, 7], 2, shortest=1) == [8, 1]
    assert lookup_draft([1, 2, 3], 4) == []


@pytest.fixture(scope="module")
def asset(tmp_path_factory):
    from zoo.core.run import export

    root = tmp_path_factory.mktemp("speculative")
    checkpoint = make_tiny_checkpoint("llama", root / "llama")
    return export(checkpoint, root / "llama.aimodel", capacity=64, chunk=4, score_chunk=4)


@pytest.mark.parametrize(
    "prompt,guessed", [([3, 17, 5, 3, 17, 5, 3, 17], True), ([2, 40, 90, 11], False)]
)
def test_lookup_decodes_exactly_what_plain_greedy_decodes(asset, prompt, guessed):
    from zoo.core.speculative import compare_on_runtime

    outcome = run_isolated(compare_on_runtime, str(asset), prompt, 24, timeout=300)
    assert outcome.ok, outcome.summary()
    got = outcome.result
    assert got["lookup"] == got["plain"] and len(got["plain"]) == 24
    assert (got["verify calls"] > 0) == guessed  # a repeated prompt: guesses checked


def test_an_asset_without_a_score_function_or_with_recurrent_states_is_refused(tmp_path):
    from types import SimpleNamespace

    from zoo.core.speculative import check_rewindable

    spec = SimpleNamespace(score_chunk=None, state_shapes={}, model="llama")
    with pytest.raises(ValueError, match="--verify 8"):
        check_rewindable(spec)
    spec = SimpleNamespace(score_chunk=4, state_shapes={"recurrent_0": [1]}, model="qwen3_5")
    with pytest.raises(ValueError, match="recurrent and cannot be rewound"):
        check_rewindable(spec)


def zoo_generate(asset, *options: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "zoo", "generate", str(asset), "--prompt-ids"]
    return subprocess.run(
        [*command, "3,17,5,3,17,5,3,17", "--max-new-tokens", "24", *options],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_zoo_generate_speculate_lookup_prints_plain_greedy_tokens(asset):
    plain, looked = zoo_generate(asset), zoo_generate(asset, "--speculate", "lookup")
    assert plain.returncode == 0 and looked.returncode == 0, looked.stderr
    assert looked.stdout.split() == plain.stdout.split() and len(plain.stdout.split()) == 24
    assert "prompt lookup:" in looked.stderr and "verify calls kept" in looked.stderr


def test_zoo_generate_speculate_refuses_sampling_and_an_asset_without_verify(asset, tmp_path):
    from zoo.core.run import export

    sampled = zoo_generate(asset, "--speculate", "lookup", "--temperature", "0.7")
    assert sampled.returncode != 0 and "--temperature 0" in sampled.stderr
    checkpoint = asset.parent / "llama"
    bare = export(checkpoint, tmp_path / "bare.aimodel", capacity=64, chunk=4)
    refused = zoo_generate(bare, "--speculate", "lookup")
    assert refused.returncode != 0 and "--verify 8" in refused.stderr, refused.stderr
