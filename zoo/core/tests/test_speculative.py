"""Prompt-lookup speculative decoding (`zoo.core.host.speculative`): the greedy tokens are plain
greedy decoding's, token for token, on the runtime."""

from __future__ import annotations

import subprocess
import sys

import pytest

from zoo.core.host.speculative import lookup_draft
from zoo.core.isolate import run_isolated
from zoo.reference import make_tiny_checkpoint

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers


def test_lookup_proposes_what_followed_the_last_ngram():
    assert lookup_draft([5, 6, 7, 8, 9, 5, 6, 7], 3) == [8, 9, 5]
    assert lookup_draft([5, 6, 7, 8, 1, 7], 2) == []  # a single token predicts too little
    assert lookup_draft([5, 6, 7, 8, 1, 7], 2, shortest=1) == [8, 1]
    assert lookup_draft([1, 2, 3], 4) == []


@pytest.fixture(scope="module")
def asset(tmp_path_factory):
    from zoo.core.export.run import export

    root = tmp_path_factory.mktemp("speculative")
    checkpoint = make_tiny_checkpoint("llama", root / "llama")
    return export(  # verify calls of 4 tokens (`score`) and of 2 (`score_w2`)
        checkpoint, root / "llama.aimodel", capacity=64, chunk=4, score_chunk=4, verify_widths=[2]
    )


@pytest.mark.parametrize(
    "prompt,guessed", [([3, 17, 5, 3, 17, 5, 3, 17], True), ([2, 40, 90, 11], False)]
)
def test_lookup_decodes_exactly_what_plain_greedy_decodes(asset, prompt, guessed):
    from zoo.bench.speculative import compare_on_runtime

    outcome = run_isolated(compare_on_runtime, str(asset), prompt, 24, timeout=300)
    assert outcome.ok, outcome.summary()
    got = outcome.result
    assert got["speculative"] == got["plain"] and len(got["plain"]) == 24
    assert (got["verify calls"] > 0) == guessed  # a repeated prompt: guesses checked


def test_an_asset_without_a_score_function_or_with_recurrent_states_is_refused(tmp_path):
    from types import SimpleNamespace

    from zoo.core.host.speculative import check_rewindable

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


def test_one_guess_goes_to_the_narrower_verify_call(asset):
    from zoo.testing_speculative import narrow_and_wide

    outcome = run_isolated(narrow_and_wide, str(asset), [2, 40, 90, 11, 7], 16)
    assert outcome.ok, outcome.summary()
    got = outcome.result
    assert got["speculative"] == got["plain"]
    assert 0 < got["narrower verify calls"] < got["verify calls"], got


@pytest.fixture(scope="module")
def drafts(asset):
    """Draft assets without a verify function: the same tiny Llama, another one (the
    llama3 variant: its own head and RoPE; the same tokenizer), and the first 2 of the
    tiny Llama's 4 layers with its final norm and head (an early exit)."""
    from zoo.core.export.run import export

    root = asset.parent
    other = make_tiny_checkpoint("llama", root / "other", variant="llama3", seed=1)
    return {
        "same": export(root / "llama", root / "same.aimodel", capacity=64, chunk=4),
        "other": export(other, root / "other.aimodel", capacity=64, chunk=4),
        "first-layers": export(
            root / "llama", root / "early.aimodel", capacity=64, chunk=4, first_layers=2
        ),
    }


def test_zoo_generate_speculate_refuses_an_asset_without_verify(drafts):
    refused = zoo_generate(drafts["same"], "--speculate", "lookup")
    assert refused.returncode != 0 and "--verify 8" in refused.stderr, refused.stderr


@pytest.mark.parametrize("draft", ["same", "other", "first-layers"])
def test_a_draft_asset_decodes_exactly_what_plain_greedy_decodes(asset, drafts, draft):
    from zoo.bench.speculative import compare_on_runtime

    prompt = [2, 40, 90, 11, 7]  # nothing to look up: every guess is the draft's
    outcome = run_isolated(compare_on_runtime, str(asset), prompt, 24, str(drafts[draft]))
    assert outcome.ok, outcome.summary()
    got = outcome.result
    assert got["speculative"] == got["plain"] and len(got["plain"]) == 24
    assert got["verify calls"] > 0 and got["draft calls"] >= got["guesses"] > 0
    if draft == "same":  # the model guessing for itself: every guess is its own choice
        assert got["accepted"] == got["guesses"], got
    else:
        assert got["accepted"] < got["guesses"], got


def test_zoo_generate_speculate_with_a_draft_and_a_foreign_one(asset, drafts, tmp_path):
    import json
    import shutil

    plain = zoo_generate(asset)
    drafted = zoo_generate(asset, "--speculate", f"draft:{drafts['other']}")
    assert drafted.returncode == 0, drafted.stderr
    assert drafted.stdout.split() == plain.stdout.split()
    assert "draft other.aimodel:" in drafted.stderr and "draft calls" in drafted.stderr
    foreign = shutil.copytree(drafts["other"], tmp_path / "foreign.aimodel")
    tokenizer = json.loads((foreign / "tokenizer.json").read_text())
    tokenizer["model"]["vocab"] = {f"x{i}": i for i in range(len(tokenizer["model"]["vocab"]))}
    (foreign / "tokenizer.json").write_text(json.dumps(tokenizer))
    refused = zoo_generate(asset, "--speculate", f"draft:{foreign}")
    assert refused.returncode == 2 and "must share one tokenizer" in refused.stderr
    assert refused.stdout == ""


def sampled_tokens(asset: str, prompt: list[int], seeds: int, speculate: bool) -> list[list]:
    """The first 4 new tokens of `seeds` samplings (temperature 0.8, top-k 4), plainly or
    speculatively; and the verify calls' kept and checked guesses (isolate it)."""
    from zoo.core.host.generator import Generator
    from zoo.core.host.request import GenerationRequest
    from zoo.core.host.speculative import generate_by_lookup

    runs, kept, checked = [], 0, 0
    with Generator(asset) as generator:
        # guesses the rule must keep or refuse: greedy decoding's tokens at each position
        # (a sampled context seldom repeats itself, so lookup alone would guess too rarely)
        greedy = generator.generate(prompt, 4, stop_token_ids=[])

        def draft(context: list[int], count: int) -> list[int]:
            return greedy[len(context) - len(prompt) :][:count]

        for seed in range(seeds):
            if speculate:
                tokens, stats = generate_by_lookup(
                    generator, prompt, 4, [], draft=draft, temperature=0.8, top_k=4, seed=seed
                )
                kept, checked = kept + stats["accepted"], checked + stats["guesses"]
            else:
                request = GenerationRequest(tuple(prompt), 4, (), 0.8, 4, seed)
                tokens = generator.run(request)
            runs.append(tokens)
    return [runs, kept, checked]


def test_speculative_sampling_draws_what_plain_sampling_draws(asset):
    """The accept/reject rule keeps the model's distribution: over 600 seeds, speculative
    and plain sampling agree on the first three tokens' frequencies and on the pairs of
    the first two (total variation below 0.08 and 0.1; 600 draws over a few to a few dozen
    outcomes leave about half that as noise). The seeds make it deterministic."""
    import collections

    prompt = [3, 17, 5, 3, 17, 5, 3, 17]
    plain = run_isolated(sampled_tokens, str(asset), prompt, 600, False, timeout=600)
    spec = run_isolated(sampled_tokens, str(asset), prompt, 600, True, timeout=600)
    assert plain.ok and spec.ok, (plain.summary(), spec.summary())
    (plain_runs, _, _), (spec_runs, kept, checked) = plain.result, spec.result
    assert checked > 100 and 0 < kept < checked, (kept, checked)  # guesses kept and refused

    def distance(outcome) -> float:
        a = collections.Counter(outcome(run) for run in plain_runs)
        b = collections.Counter(outcome(run) for run in spec_runs)
        return 0.5 * sum(abs(a[k] - b[k]) for k in a.keys() | b.keys()) / len(plain_runs)

    for position in range(3):
        assert distance(lambda run, i=position: run[i]) < 0.08, position
    assert distance(lambda run: tuple(run[:2])) < 0.1


def test_first_layers_exports_an_early_exit_and_refuses_what_it_cannot_cut(asset, drafts, tmp_path):
    from zoo.core.asset.decode_spec import DecodeSpec
    from zoo.core.export.plan import plan_export

    spec = DecodeSpec.of_asset(drafts["first-layers"])
    assert sorted(spec.state_shapes) == ["k_cache_0", "k_cache_1", "v_cache_0", "v_cache_1"]
    plan = plan_export(asset.parent / "llama", tmp_path / "a.aimodel", first_layers=2)
    assert plan.layers == 2 and "the first 2, then the final norm and head" in plan.describe()
    with pytest.raises(ValueError, match="takes 1 to 3 \\(of 4\\), got 4"):
        plan_export(asset.parent / "llama", tmp_path / "b.aimodel", first_layers=4)
    gemma4 = make_tiny_checkpoint("gemma4", tmp_path / "gemma4", variant="kv-sharing")
    with pytest.raises(ValueError, match="--first-layers: this Gemma 4 shares .* across its layer"):
        plan_export(gemma4, tmp_path / "c.aimodel", first_layers=1)


def test_a_guess_outside_the_model_s_vocabulary_is_a_wrong_guess(asset):
    """A draft with more embedding rows than the model (a padded vocabulary) may guess an
    id the model cannot hold: ffe1239 failed mid-answer ("token id 192 is outside the
    vocabulary"); now the guess and those after it are refused, the answer plain greedy's."""
    from zoo.core.host.generator import Generator
    from zoo.core.host.speculative import generate_by_lookup

    with Generator(asset) as generator:
        vocab = generator.spec.vocab_size
        prompt = [2, 40, 90, 11, 7]
        plain = generator.generate(prompt, max_new_tokens=12, stop_token_ids=[])
        tokens, stats = generate_by_lookup(
            generator,
            prompt,
            12,
            stop_token_ids=[],
            draft=lambda context, count: [context[-1], vocab + 64][:count],
        )
    assert tokens == plain and stats["verify calls"] > 0
    assert stats["guesses"] == stats["verify calls"]  # only the guess inside was verified
