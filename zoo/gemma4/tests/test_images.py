"""Gemma 4 with images, against transformers 5.23 on tiny random checkpoints that ship an
image processor, image tokens and a chat template (`make_tiny_checkpoint(images=True)`).

transformers cannot build `Gemma4Processor` here (its video processor imports torchvision,
which has no wheel beside our CPU torch); its image processor's PIL path
(`Gemma4ImageProcessorPil`), the tokenizer and the chat template give the same inputs, and
are the reference: the host side is held to them bit for bit, the encoder's soft tokens and
the decoder's logits to 1e-4, the greedy answers on the runtime token for token.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

from zoo.core.asset.tokenizer import load_tokenizer
from zoo.core.export.components import image_processor_settings
from zoo.core.host.generator import runtime_greedy
from zoo.core.host.images import gemma4_patches
from zoo.core.host.media import MediaError
from zoo.core.isolate import run_isolated
from zoo.gemma4.vision import load_encoder
from zoo.reference import reference_model
from zoo.testing_media import asset_components as _components
from zoo.testing_media import check_answer_about_image, prompt_of, random_image
from zoo.testing_media import reference_processor as image_processor_of
from zoo.testing_media import transformers_greedy as greedy_with_images

from .conftest import CHUNK

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

# (height, width): wider, taller, thinner than a block of 3 x 16 pixels, smaller than a
# patch (resized up), larger than the budget of 70 soft tokens (resized down)
SIZES = [(40, 70), (300, 21), (10, 10), (500, 900), (47, 47)]


def reference_processor(checkpoint):
    return image_processor_of("gemma4", checkpoint)


def transformers_greedy(checkpoint, prompt, images, new_tokens=8, blocks=True):
    return greedy_with_images("gemma4", checkpoint, prompt, images, new_tokens, blocks)


@pytest.mark.parametrize("size", SIZES)
def test_host_prepares_images_as_transformers_does(image_checkpoints, size):
    checkpoint = image_checkpoints[0]
    image = random_image(*size, seed=sum(size))
    want = reference_processor(checkpoint)(image)
    got = gemma4_patches(image, image_processor_settings(checkpoint))
    assert np.array_equal(got["pixel_values"], want["pixel_values"])
    assert np.array_equal(got["pixel_position_ids"], want["image_position_ids"])
    assert got["soft_tokens"] == want["num_soft_tokens_per_image"][0]


@pytest.mark.parametrize("seed", [0, 2])
def test_vision_encoder_matches_transformers(image_checkpoints, seed):
    checkpoint = image_checkpoints[seed]
    reference = reference_model("gemma4", checkpoint)
    ours = load_encoder(checkpoint, reference.config.text_config.hidden_size)
    for size in SIZES[:3]:
        prepared = reference_processor(checkpoint)(random_image(*size, seed), return_tensors="pt")
        pixels, positions = prepared["pixel_values"], prepared["image_position_ids"]
        with torch.no_grad():
            want = reference.model.get_image_features(pixels, positions).pooler_output[0]
            got = ours(pixels.float(), positions.int())[0, : len(want)]
        assert (got - want).abs().max().item() < 1e-4, size
        assert want.std(0).mean() > 1e-3  # the features differ from token to token


@pytest.mark.parametrize(
    "seed, strategy", [(0, "runtime-index"), (0, "input-mask-blend"), (2, "runtime-index")]
)
def test_answers_about_an_image_like_transformers(
    image_checkpoints, image_assets, tmp_path, seed, strategy
):
    asset = image_assets(seed, strategy)
    for number, size in enumerate([(40, 70), (300, 21)]):
        image, path = random_image(*size, seed=seed + number), tmp_path / f"{number}.png"
        prompt = check_answer_about_image(
            "gemma4", image_checkpoints[seed], asset, image, path, "w5 w9 w17 w3"
        )
        assert len(prompt) % CHUNK, "the image tokens should not all fall in whole chunks"


@pytest.mark.parametrize("strategy", ["runtime-index", "input-mask-blend"])
def test_image_tokens_that_see_each_other_read_like_transformers(
    image_checkpoints, image_assets, tmp_path, strategy
):
    """The 31B's image tokens attend to each other both ways in the sliding layers: each
    image read in one `prefill_media` call whose sliding mask opens it to itself."""
    asset = image_assets("31B", strategy)
    assert "prefill_media" in _components(asset)["decoder"]["functions"]
    image = tmp_path / "image.png"
    random_image(40, 70, seed=4).save(image)
    opened = Image.open(image).convert("RGB")
    prompt = prompt_of(asset, "w5 w9 w17", [opened])
    want, want_logits = transformers_greedy(image_checkpoints["31B"], prompt, [opened])
    _, causal_logits = transformers_greedy(image_checkpoints["31B"], prompt, [opened], 8, False)
    assert np.abs(causal_logits - want_logits).max() > 1e-2  # the test sees the difference
    outcome = run_isolated(runtime_greedy, str(asset), prompt, 8, [str(image)], timeout=300)
    assert outcome.ok, outcome.summary()
    assert outcome.result["tokens"] == want
    assert np.abs(np.array(outcome.result["logits"][0]) - want_logits).max() < 1e-4


def test_the_mixture_of_experts_reads_images_like_transformers(
    image_checkpoints, image_assets, tmp_path
):
    """26B-A4B: experts beside each MLP, image tokens that attend to each other."""
    asset = image_assets("26B-A4B", "runtime-index")
    for number, size in enumerate([(40, 70), (300, 21)]):
        image, path = random_image(*size, seed=3 + number), tmp_path / f"{number}.png"
        check_answer_about_image("gemma4", image_checkpoints["26B-A4B"], asset, image, path, "w5")


def test_the_image_changes_the_answer(image_assets, tmp_path):
    asset = image_assets(0, "runtime-index")
    answers = []
    for seed in (5, 6):
        image = tmp_path / f"{seed}.png"
        random_image(40, 70, seed).save(image)
        prompt = prompt_of(asset, "w5 w9", [Image.open(image).convert("RGB")])
        outcome = run_isolated(runtime_greedy, str(asset), prompt, 8, [str(image)], timeout=300)
        assert outcome.ok, outcome.summary()
        answers.append(outcome.result["logits"][0])
    assert np.abs(np.array(answers[0]) - np.array(answers[1])).max() > 1e-3


def zoo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zoo", *map(str, args)], capture_output=True, text=True
    )


def test_zoo_generate_image_prints_the_answer_of_the_python_api(image_assets, tmp_path):
    asset = image_assets(0, "runtime-index")
    image = tmp_path / "cat.png"
    random_image(60, 45, 9).save(image)
    prompt = prompt_of(asset, "w7 w8", [Image.open(image).convert("RGB")])
    want = run_isolated(runtime_greedy, str(asset), prompt, 6, [str(image)], timeout=300)
    done = zoo("generate", asset, "--image", image, "--prompt", "w7 w8", "--max-new-tokens", 6)
    assert done.returncode == 0, done.stderr
    tokenizer = load_tokenizer(asset / "tokenizer.json")
    assert done.stdout.strip() == tokenizer.decode(want.result["tokens"]).strip()


def test_text_only_gives_the_decoder_alone(image_checkpoints, image_assets, checkpoints):
    asset = image_assets(0, "runtime-index", text_only=True)
    components = _components(asset)
    assert list(components) == ["decoder"]
    assert "vision" not in components["decoder"]["functions"]
    prompt = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]
    reference = reference_model("gemma4", image_checkpoints[0])
    from zoo.reference import greedy_reference

    outcome = run_isolated(runtime_greedy, str(asset), prompt, 8, timeout=300)
    assert outcome.ok and outcome.result["tokens"] == greedy_reference(reference, prompt)


def test_the_plan_lists_the_components(image_checkpoints, tmp_path):
    from zoo.core.export.plan import plan_export

    plan = plan_export(image_checkpoints[0], tmp_path / "a.aimodel", capacity=128)
    assert plan.components == ("decoder", "vision")
    assert "decoder + vision" in plan.describe()
    alone = plan_export(image_checkpoints[0], tmp_path / "a.aimodel", text_only=True)
    assert "the vision encoder left out (--text-only)" in alone.describe()
    bare = tmp_path / "bare"  # a vision tower, no image processor's settings
    shutil.copytree(image_checkpoints[0], bare)
    (bare / "preprocessor_config.json").unlink()
    plan = plan_export(bare, tmp_path / "a.aimodel")
    assert plan.components == ("decoder",) and "no preprocessor_config.json" in plan.describe()
    with pytest.raises(ValueError, match="--text-only for the text decoder alone"):
        plan_export(image_checkpoints[0], tmp_path / "a.aimodel", layers_per_function=2)


def test_images_at_the_edges_are_prepared_or_refused_by_name(image_checkpoints, tmp_path):
    """A 1 x 1 image is resized up and read; a truncated PNG, a text file named .png and a
    20,000 x 20,000 image (past PIL's guard against decompression bombs) are refused with
    the file's name, without a traceback."""
    from zoo.core.host.images import read_image

    settings = image_processor_settings(image_checkpoints[0])
    random_image(1, 1, seed=1).save(tmp_path / "dot.png")
    dot = gemma4_patches(read_image(tmp_path / "dot.png"), settings)
    assert (
        dot["soft_tokens"]
        == reference_processor(image_checkpoints[0])(
            read_image(tmp_path / "dot.png"), input_data_format="channels_last"
        )["num_soft_tokens_per_image"][0]
    )
    random_image(40, 50, seed=2).save(tmp_path / "whole.png")
    data = (tmp_path / "whole.png").read_bytes()
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 2])
    (tmp_path / "text.png").write_text("a text file, named .png")
    Image.new("1", (20000, 20000)).save(tmp_path / "huge.png")  # 48 kB on disk
    cases = {
        "cut.png": "not an image PIL can read (image file is truncated)",
        "text.png": "not an image PIL can read",
        "huge.png": "more than 178,956,970 pixels, more than PIL decodes (a guard",
    }
    for name, message in cases.items():
        with pytest.raises(MediaError, match=re.escape(message)) as refused:
            read_image(tmp_path / name)
        assert str(tmp_path / name) in str(refused.value)


def test_bad_images_and_assets_without_vision_are_refused(image_assets, assets, tmp_path):
    asset = image_assets(0, "runtime-index")
    broken = tmp_path / "broken.png"
    broken.write_text("not an image")
    done = zoo("generate", asset, "--image", broken, "--prompt", "w5")
    assert done.returncode != 0 and "not an image PIL can read" in done.stderr
    assert "Traceback" not in done.stderr
    done = zoo("generate", asset, "--image", tmp_path / "nope.png", "--prompt", "w5")
    assert "no such file" in done.stderr
    done = zoo("generate", asset, "--image", broken, "--prompt-ids", "2,3")
    assert "--image goes with --prompt text" in done.stderr
    text_asset = assets["kv-sharing", "runtime-index"]
    random_image(20, 20, 1).save(tmp_path / "ok.png")
    done = zoo("generate", text_asset, "--image", tmp_path / "ok.png", "--prompt", "w5")
    assert done.returncode != 0 and "has no vision component" in done.stderr
    with pytest.raises(MediaError, match="placeholder tokens"):
        runtime_greedy(str(asset), [2, 3, 4], 1, [str(tmp_path / "ok.png")])


def test_a_checkpoint_and_an_image_no_test_chose(tmp_path):
    """A seed and an image size drawn afresh each run (printed on failure, to replay)."""
    from zoo.core.export.plan import plan_export
    from zoo.core.export.run import run_plan
    from zoo.reference import make_tiny_checkpoint

    draw = np.random.default_rng()
    seed, height, width = (int(v) for v in draw.integers([0, 1, 1], [10_000, 700, 700]))
    replay = f"seed {seed}, image {height} x {width}"
    checkpoint = make_tiny_checkpoint("gemma4", tmp_path / "ck", "kv-sharing", seed, images=True)
    asset = run_plan(plan_export(checkpoint, tmp_path / "a.aimodel", capacity=128, chunk=4))
    image, path = random_image(height, width, seed), tmp_path / "image.png"
    try:
        check_answer_about_image("gemma4", checkpoint, asset, image, path, "w5 w9")
    except AssertionError as error:
        raise AssertionError(f"{replay}: {error}") from None


def test_gemma4_image_tokens_take_the_processors_budgets(image_checkpoints, tmp_path):
    from zoo.core.export.plan import plan_export

    plan = plan_export(image_checkpoints[0], tmp_path / "a.aimodel", image_tokens=140)
    assert "images up to 140 soft tokens (its processor allows 70" in plan.describe()
    with pytest.raises(ValueError, match="one of 70, 140, 280, 560, 1120"):
        plan_export(image_checkpoints[0], tmp_path / "a.aimodel", image_tokens=100)
