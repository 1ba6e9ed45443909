"""Prompt-lookup speculative decoding (`zoo.core.speculative`): the greedy tokens are plain
greedy decoding's, token for token, on the runtime."""

from __future__ import annotations

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
