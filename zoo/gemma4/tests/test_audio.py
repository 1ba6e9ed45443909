"""Gemma 4 (E2B/E4B) hearing audio, against transformers 5.23 on tiny random checkpoints
with an audio tower, the feature extractor's settings and audio tokens
(`make_tiny_checkpoint(audio=True)`).

The reference: transformers' `Gemma4AudioFeatureExtractor` (numpy) for the host side, held
bit for bit; `get_audio_features` for the encoder (1e-5); `generate` with `input_features`
for the runtime's answers, token for token.
"""

from __future__ import annotations

import subprocess
import sys
import wave

import numpy as np
import pytest
import torch

from zoo.core.host.audio import gemma4_audio_features, read_wav
from zoo.core.host.generator import runtime_greedy
from zoo.core.host.media import MediaError, asset_prompt
from zoo.core.isolate import run_isolated
from zoo.gemma4 import audio as gemma4_audio
from zoo.reference import greedy_reference, make_tiny_checkpoint, reference_model
from zoo.testing_media import feature_extractor, write_wav

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers


def extractor(checkpoint):
    return feature_extractor(checkpoint, "Gemma4AudioFeatureExtractor")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    root = tmp_path_factory.mktemp("gemma4-audio")
    return make_tiny_checkpoint("gemma4", root / "ck", "kv-sharing", images=True, audio=True)


@pytest.fixture(scope="module")
def assets(checkpoint, tmp_path_factory):
    """KV strategy -> the asset of the checkpoint (decoder, vision, audio), on first use."""
    from zoo.core.export.plan import plan_export
    from zoo.core.export.run import run_plan

    root, made = tmp_path_factory.mktemp("gemma4-audio-assets"), {}

    def asset(strategy: str = "runtime-index"):
        if strategy not in made:
            path = root / f"{strategy}.aimodel"
            plan = plan_export(checkpoint, path, strategy=strategy, capacity=128, chunk=4)
            made[strategy] = run_plan(plan)
        return made[strategy]

    return asset


@pytest.fixture(scope="module")
def asset(assets):
    return assets()


def processor_of(checkpoint) -> dict:
    return gemma4_audio.processor(checkpoint)


@pytest.mark.parametrize("seconds", [0.03, 0.5, 1.3, 1.99])
def test_host_features_are_transformers_features(checkpoint, tmp_path, seconds):
    samples = write_wav(tmp_path / "a.wav", seconds, seed=int(seconds * 100))
    read, rate = read_wav(tmp_path / "a.wav")
    assert rate == 16000 and np.array_equal(read, samples)
    want = extractor(checkpoint)([samples])
    features = np.asarray(want["input_features"][0])
    mask = np.asarray(want["input_features_mask"][0])
    got = gemma4_audio_features(samples, rate, processor_of(checkpoint))
    frames = len(features)
    assert np.array_equal(got["input_features"][0, :frames], features)
    assert np.array_equal(got["input_features_mask"][0, :frames], mask.astype(np.float32))
    assert not got["input_features_mask"][0, frames:].any()  # padded to the budget
    counted = mask
    for _ in range(2):  # transformers' processor counts the tokens so
        counted = counted[::2][: (len(counted) - 1) // 2 + 1]
    assert got["soft_tokens"] == counted.sum() > 0


def test_wav_files_are_read_in_their_formats(tmp_path):
    for width in (1, 2, 4):
        want = write_wav(tmp_path / f"{width}.wav", 0.2, seed=width, width=width)
        got, _ = read_wav(tmp_path / f"{width}.wav")
        assert np.abs(got - want).max() < 1e-6, width
    stereo = write_wav(tmp_path / "stereo.wav", 0.2, seed=1, channels=2)
    got, _ = read_wav(tmp_path / "stereo.wav")
    assert np.array_equal(got, stereo)  # both channels alike: their mean


def test_bad_audio_is_refused_by_name(checkpoint, tmp_path):
    processor = processor_of(checkpoint)
    (tmp_path / "text.wav").write_text("not audio")
    cases = {
        tmp_path / "nope.wav": "no such file",
        tmp_path: "is a directory",
        tmp_path / "text.wav": "not a PCM WAV file",
    }
    for path, message in cases.items():
        with pytest.raises(MediaError, match=message):
            read_wav(path)
    with wave.open(str(tmp_path / "empty.wav"), "wb") as file:
        file.setnchannels(1), file.setsampwidth(2), file.setframerate(16000)
    with pytest.raises(MediaError, match="holds no samples"):
        read_wav(tmp_path / "empty.wav")
    with wave.open(str(tmp_path / "24.wav"), "wb") as file:
        file.setnchannels(1), file.setsampwidth(3), file.setframerate(16000)
        file.writeframes(b"\0" * 300)
    with pytest.raises(MediaError, match="24-bit samples; convert it to 16-bit PCM"):
        read_wav(tmp_path / "24.wav")
    samples = write_wav(tmp_path / "fast.wav", 0.5, seed=1, rate=44100)
    with pytest.raises(MediaError, match="44100 Hz; this model reads 16000 Hz: resample"):
        gemma4_audio_features(samples, 44100, processor)
    with pytest.raises(MediaError, match="longer than the asset reads in one clip"):
        gemma4_audio_features(np.zeros(16000 * 3, np.float32), 16000, processor)
    with pytest.raises(MediaError, match="shorter than one 320-sample frame"):
        gemma4_audio_features(np.zeros(100, np.float32), 16000, processor)


def test_audio_encoder_matches_transformers(checkpoint, tmp_path):
    reference = reference_model("gemma4", checkpoint)
    with torch.no_grad():  # per_dim_scale is zero at init: jittered so it matters
        for name, parameter in reference.model.audio_tower.named_parameters():
            if "per_dim_scale" in name:
                parameter.normal_()
    reference.save_pretrained(tmp_path / "ck")
    for name in ("tokenizer.json", "processor_config.json"):
        (tmp_path / "ck" / name).write_bytes((checkpoint / name).read_bytes())
    processor = processor_of(tmp_path / "ck")
    ours = gemma4_audio.load_encoder(tmp_path / "ck", 64, processor)
    for seconds in (0.4, 1.3, 1.99):  # the clip, then padding to the budget of 2 s
        samples = write_wav(tmp_path / "a.wav", seconds, seed=7)
        want = extractor(checkpoint)([samples], return_tensors="pt")
        prepared = gemma4_audio_features(samples, 16000, processor)
        with torch.no_grad():
            out = reference.model.get_audio_features(
                want["input_features"], want["input_features_mask"], return_dict=True
            )
            expected = out.pooler_output[0][out.attention_mask[0]]
            got = ours(
                torch.from_numpy(prepared["input_features"]),
                torch.from_numpy(prepared["input_features_mask"]),
            )[0, : prepared["soft_tokens"]]
        assert len(expected) == prepared["soft_tokens"]
        assert (got - expected).abs().max().item() < 1e-5, seconds
        assert expected.std(0).mean() > 1e-3  # the tokens differ from one another


def transformers_answer(checkpoint, prompt, clips):
    reference = reference_model("gemma4", checkpoint)
    features = extractor(checkpoint)(clips, return_tensors="pt")
    media = dict(features)
    with torch.no_grad():
        tokens = greedy_reference(reference, prompt, 8, **media)
        logits = reference(torch.tensor([prompt]), **media).logits[0, -1].numpy()
        deaf = reference(torch.tensor([prompt])).logits[0, -1].numpy()
    return tokens, logits, deaf


@pytest.mark.parametrize(
    "seconds, strategy", [(0.7, "runtime-index"), (1.3, "runtime-index"), (1.1, "input-mask-blend")]
)
def test_answers_about_audio_like_transformers(checkpoint, assets, tmp_path, seconds, strategy):
    asset = assets(strategy)
    clip = tmp_path / "clip.wav"
    samples = write_wav(clip, seconds, seed=int(10 * seconds))
    prompt = asset_prompt(asset, "w5 w9 w17", audio=[clip])
    want, want_logits, deaf = transformers_answer(checkpoint, prompt, [samples])
    outcome = run_isolated(runtime_greedy, str(asset), prompt, 8, (), [str(clip)], timeout=300)
    assert outcome.ok, outcome.summary()
    assert outcome.result["tokens"] == want
    got = np.array(outcome.result["logits"][0])
    assert np.abs(got - want_logits).max() < 1e-4
    assert np.abs(deaf - want_logits).max() > 1e-2  # the audio tokens change the answer


def test_an_image_and_a_clip_in_one_turn(checkpoint, asset, tmp_path):
    """Both encoders in one prompt: images first, then audio, then the text."""
    from zoo.testing_media import random_image, reference_processor

    clip, picture = tmp_path / "clip.wav", tmp_path / "p.png"
    samples = write_wav(clip, 0.6, seed=3)
    image = random_image(40, 70, seed=4)
    image.save(picture)
    prompt = asset_prompt(asset, "w5 w9", images=[image], audio=[clip])
    outcome = run_isolated(
        runtime_greedy, str(asset), prompt, 8, [str(picture)], [str(clip)], timeout=300
    )
    assert outcome.ok, outcome.summary()
    reference = reference_model("gemma4", checkpoint)
    media = dict(reference_processor("gemma4", checkpoint)([image], return_tensors="pt"))
    media.pop("num_soft_tokens_per_image", None)
    media |= dict(extractor(checkpoint)([samples], return_tensors="pt"))
    with torch.no_grad():
        want = greedy_reference(reference, prompt, 8, **media)
    assert outcome.result["tokens"] == want


def zoo(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zoo", *map(str, args)], capture_output=True, text=True
    )


def test_zoo_generate_audio_prints_the_answer_of_the_python_api(asset, tmp_path):
    from zoo.core.asset.tokenizer import load_tokenizer

    clip = tmp_path / "clip.wav"
    write_wav(clip, 0.9, seed=2)
    prompt = asset_prompt(asset, "w7 w8", audio=[clip])
    want = run_isolated(runtime_greedy, str(asset), prompt, 6, (), [str(clip)], timeout=300)
    done = zoo("generate", asset, "--audio", clip, "--prompt", "w7 w8", "--max-new-tokens", 6)
    assert done.returncode == 0, done.stderr
    tokenizer = load_tokenizer(asset / "tokenizer.json")
    assert done.stdout.strip() == tokenizer.decode(want.result["tokens"]).strip()
    long = tmp_path / "long.wav"
    write_wav(long, 2.5, seed=1)
    done = zoo("generate", asset, "--audio", long, "--prompt", "w7")
    assert done.returncode != 0 and "longer than the asset reads in one clip" in done.stderr
    assert "--audio-tokens" in done.stderr and "Traceback" not in done.stderr
    done = zoo("generate", asset, "--audio", clip, "--prompt-ids", "2,3")
    assert "--audio goes with --prompt text" in done.stderr


def test_an_asset_without_audio_refuses_it(checkpoint, tmp_path):
    from zoo.core.export.plan import plan_export
    from zoo.core.export.run import run_plan

    plan = plan_export(checkpoint, tmp_path / "t.aimodel", capacity=64, text_only=True)
    assert plan.components == ("decoder",)
    assert "the vision encoder left out (--text-only); the audio encoder left out" in (
        plan.describe()
    )
    asset = run_plan(plan)
    clip = tmp_path / "clip.wav"
    write_wav(clip, 0.5, seed=1)
    done = zoo("generate", asset, "--audio", clip, "--prompt", "w5")
    assert done.returncode != 0 and "has no audio component" in done.stderr
    assert "takes no audio clips (--audio)" in done.stderr


def test_the_plan_lists_the_audio_encoder_and_its_budget(checkpoint, tmp_path):
    from zoo.core.export.plan import plan_export

    plan = plan_export(checkpoint, tmp_path / "a.aimodel", capacity=128)
    assert plan.components == ("decoder", "vision", "audio")
    assert "audio clips up to 2 s (50 soft tokens)" in plan.describe()
    plan = plan_export(checkpoint, tmp_path / "a.aimodel", capacity=128, audio_tokens=25)
    assert "audio clips up to 1 s (25 soft tokens) (its processor allows 50" in plan.describe()
    assert plan.processors["audio"]["audio_seq_length"] == 25
    with pytest.raises(ValueError, match="reads 1 to 750 soft tokens a clip"):
        plan_export(checkpoint, tmp_path / "a.aimodel", audio_tokens=751)
    bare = tmp_path / "bare"  # an audio tower, no feature extractor's settings
    bare.mkdir()
    for file in checkpoint.iterdir():
        if file.name != "processor_config.json":
            (bare / file.name).write_bytes(file.read_bytes())
    plan = plan_export(bare, tmp_path / "a.aimodel", capacity=128)
    assert plan.components == ("decoder", "vision")
    assert "the audio encoder left out: the checkpoint has no processor_config.json" in (
        plan.describe()
    )


def test_a_checkpoint_and_a_clip_no_test_chose(tmp_path):
    """A seed and a clip length drawn afresh each run (printed on failure, to replay)."""
    from zoo.core.export.plan import plan_export
    from zoo.core.export.run import run_plan

    draw = np.random.default_rng()
    seed, milliseconds = (int(v) for v in draw.integers([0, 25], [10_000, 2_000]))
    replay = f"seed {seed}, a clip of {milliseconds} ms"
    checkpoint = make_tiny_checkpoint(
        "gemma4", tmp_path / "ck", "kv-sharing", seed, images=True, audio=True
    )
    asset = run_plan(plan_export(checkpoint, tmp_path / "a.aimodel", capacity=128, chunk=4))
    clip = tmp_path / "clip.wav"
    samples = write_wav(clip, milliseconds / 1000, seed=seed % 50)
    prompt = asset_prompt(asset, "w5 w9", audio=[clip])
    want, want_logits, _ = transformers_answer(checkpoint, prompt, [samples])
    outcome = run_isolated(runtime_greedy, str(asset), prompt, 8, (), [str(clip)], timeout=300)
    assert outcome.ok, f"{replay}: {outcome.summary()}"
    assert outcome.result["tokens"] == want, replay
    error = np.abs(np.array(outcome.result["logits"][0]) - want_logits).max()
    assert error < 1e-4, f"{replay}: {error}"
