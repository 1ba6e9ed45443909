"""Gemma 4 12B hearing audio without an encoder (raw waveform frames through `embed_audio`),
against transformers 5.23 on a tiny random checkpoint with its feature extractor's settings
and audio tokens (`make_tiny_checkpoint(audio=True)`): the host's frames bit for bit
(`Gemma4UnifiedAudioFeatureExtractor`), the runtime's answers token for token."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zoo.core.host.audio import waveform_frames
from zoo.core.host.generator import runtime_greedy
from zoo.core.host.media import MediaError, asset_prompt
from zoo.core.isolate import run_isolated
from zoo.gemma4_unified import audio
from zoo.reference import greedy_reference, make_tiny_checkpoint, reference_model
from zoo.testing_media import feature_extractor, write_wav

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    root = tmp_path_factory.mktemp("gemma4_unified-audio")
    return make_tiny_checkpoint("gemma4_unified", root / "ck", audio=True)


def extractor(checkpoint):
    return feature_extractor(checkpoint, "Gemma4UnifiedAudioFeatureExtractor")


@pytest.mark.parametrize("samples", [1, 39, 40, 41, 1999])
def test_host_frames_are_transformers_frames(checkpoint, samples):
    clip = np.random.default_rng(samples).standard_normal(samples).astype(np.float32)
    want = extractor(checkpoint)([clip])
    got = waveform_frames(clip, 16000, audio.processor(checkpoint))
    frames = np.asarray(want["input_features"][0])
    assert got["soft_tokens"] == len(frames) == np.asarray(want["input_features_mask"]).sum()
    assert np.array_equal(got["input_features"][0, : len(frames)], frames)
    assert not got["input_features"][0, len(frames) :].any()


def test_a_clip_past_the_budget_is_refused(checkpoint):
    with pytest.raises(MediaError, match=r"longer than the asset reads in one clip \(0.12 s"):
        waveform_frames(np.zeros(3000, np.float32), 16000, audio.processor(checkpoint))


@pytest.mark.parametrize("strategy", ["runtime-index", "input-mask-blend"])
def test_answers_about_audio_like_transformers(checkpoint, tmp_path, strategy):
    from zoo.core.export.plan import plan_export
    from zoo.core.export.run import run_plan

    plan = plan_export(checkpoint, tmp_path / "a.aimodel", strategy=strategy, capacity=128, chunk=4)
    assert plan.components == ("decoder", "audio")
    assert "audio clips up to 0.125 s (50 soft tokens)" in plan.describe()
    asset = run_plan(plan)
    clip = tmp_path / "clip.wav"
    samples = write_wav(clip, 0.1, seed=4)
    prompt = asset_prompt(asset, "w5 w9", audio=[clip])
    reference = reference_model("gemma4_unified", checkpoint)
    features = dict(extractor(checkpoint)([samples], return_tensors="pt"))
    with torch.no_grad():
        want = greedy_reference(reference, prompt, 8, **features)
        logits = reference(torch.tensor([prompt]), **features).logits[0, -1].numpy()
        deaf = reference(torch.tensor([prompt])).logits[0, -1].numpy()
    outcome = run_isolated(runtime_greedy, str(asset), prompt, 8, (), [str(clip)], timeout=300)
    assert outcome.ok, outcome.summary()
    assert outcome.result["tokens"] == want
    assert np.abs(np.array(outcome.result["logits"][0]) - logits).max() < 1e-4
    assert np.abs(deaf - logits).max() > 1e-2  # the clip changes the answer
