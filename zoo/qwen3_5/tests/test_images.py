"""Qwen3.5 (dense and mixture of experts) with images, against transformers 5.23 on tiny
random checkpoints that ship Qwen's image processor settings, image tokens and a chat
template (`make_tiny_checkpoint(images=True)`).

The Qwen3-VL processor cannot be built here (its video processor imports torchvision); its
image processor's PIL path (`Qwen2VLImageProcessorPil`), transformers' vision helpers, the
tokenizer and the chat template give the same inputs and are the reference: the host side
is held to them bit for bit, the encoder's soft tokens and a prompt's logits to 1e-4, the
greedy answers on the runtime token for token, with the image tokens placed in time,
height and width by multimodal RoPE.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from zoo.core.host.generator import Generator, runtime_greedy
from zoo.core.host.images import qwen_patches
from zoo.core.host.media import place_media
from zoo.core.isolate import run_isolated
from zoo.qwen3_5.vision import load_encoder
from zoo.testing_media import (
    asset_components,
    check_answer_about_image,
    prompt_of,
    random_image,
    reference_processor,
    transformers_greedy,
)

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

# wider, taller, far thinner than a 32-pixel block, smaller (resized up to the least
# pixels), larger than the budget of 64 soft tokens (resized down)
SIZES = [(50, 90), (300, 20), (3, 3), (1000, 700), (144, 240)]


@pytest.mark.parametrize("size", SIZES)
def test_host_prepares_images_as_transformers_does(image_checkpoints, size):
    from transformers.vision_utils import (
        get_vision_interpolation_indices_and_weights,
        get_vision_position_ids,
    )

    checkpoint = image_checkpoints[0]
    image = random_image(*size, seed=sum(size))
    want = reference_processor("qwen3_5", checkpoint)(image)
    settings = json.loads((checkpoint / "preprocessor_config.json").read_text())
    got = qwen_patches(image, settings | {"position_table": 2304})
    grid = torch.tensor(want["image_grid_thw"])
    patches = len(want["pixel_values"])
    taps, weights = get_vision_interpolation_indices_and_weights(
        grid, 48, mode="bilinear", align_corners=True, spatial_merge_size=2
    )
    assert got["grid"] == tuple(grid[0].tolist())
    assert np.array_equal(got["pixel_values"][:patches], want["pixel_values"])
    assert np.array_equal(got["taps"][:patches], taps.numpy())
    assert np.array_equal(got["tap_weights"][:patches], weights.numpy())
    assert np.array_equal(got["rows_columns"][:patches], get_vision_position_ids(grid, 2).numpy())
    assert (got["rows_columns"][patches:] == -1).all() and got["soft_tokens"] == patches // 4


def test_vision_encoder_matches_transformers(image_checkpoints):
    from zoo.reference import reference_model

    checkpoint = image_checkpoints[1]
    reference = reference_model("qwen3_5", checkpoint)
    ours = load_encoder(checkpoint, reference.config.text_config.hidden_size)
    settings = json.loads((checkpoint / "preprocessor_config.json").read_text())
    for size in SIZES[:3]:
        image = random_image(*size, seed=1)
        prepared = reference_processor("qwen3_5", checkpoint)(image, return_tensors="pt")
        with torch.no_grad():
            want = reference.model.get_image_features(
                prepared["pixel_values"], prepared["image_grid_thw"]
            ).pooler_output[0]
            host = qwen_patches(image, settings | {"position_table": 2304})
            inputs = [torch.from_numpy(host[n]) for n in ours.input_names]
            got = ours(*inputs)[0, : len(want)]
        assert (got - want).abs().max().item() < 1e-4, size
        assert want.std(0).mean() > 1e-3  # the soft tokens differ from one another


@pytest.mark.parametrize(
    "key, strategy", [(0, "runtime-index"), (0, "input-mask-blend"), (1, "runtime-index")]
)
def test_answers_about_an_image_like_transformers(
    image_checkpoints, image_assets, tmp_path, key, strategy
):
    asset = image_assets(key, strategy)
    for number, size in enumerate([(40, 70), (300, 21)]):
        image, path = random_image(*size, seed=key + number), tmp_path / f"{number}.png"
        text = "w5 w9 w17 w3"[: 12 - 3 * number]
        check_answer_about_image("qwen3_5", image_checkpoints[key], asset, image, path, text)


def test_the_image_tokens_positions_in_space_matter(image_assets):
    """Multimodal RoPE: the same soft tokens read at plain positions give other logits."""
    asset = image_assets(1, "runtime-index")
    image = random_image(200, 120, seed=7)
    prompt = prompt_of(asset, "w5 w9", [image])
    with Generator(asset) as generator:
        placed = generator.feed(prompt, [image])
        assert generator.rope_shift < 0  # an image of h x w tokens spans max(h, w) positions
        generator.reset()
        place_media(generator, prompt, {"vision": [image]})  # the same soft tokens, then
        generator.rope, generator.rope_shift = {}, 0  # every token at its plain position
        plain = generator.feed(prompt)
    assert np.abs(placed - plain).max() > 1e-3


def test_the_mixture_of_experts_answers_about_an_image_like_transformers(tmp_path):
    from zoo.core.export.plan import plan_export
    from zoo.core.export.run import run_plan
    from zoo.reference import make_tiny_checkpoint

    checkpoint = make_tiny_checkpoint("qwen3_5_moe", tmp_path / "moe", images=True)
    asset = run_plan(plan_export(checkpoint, tmp_path / "moe.aimodel", capacity=128, chunk=4))
    assert "vision" in asset_components(asset)
    image = random_image(300, 21, seed=1)
    # measured 1.6e-4 here (logits up to 5.8; 5e-5 with a shorter prompt): the experts'
    # float32 sums in another order than transformers'; the dense model stays within 1e-6
    check_answer_about_image(
        "qwen3_5_moe", checkpoint, asset, image, tmp_path / "i.png", "w5 w9 w17", 5e-4
    )


def test_image_tokens_sets_the_budget_as_the_processor_would(image_checkpoints, tmp_path):
    """`--image-tokens 16`: the processor's pixel budget lowered to 16 soft tokens; the
    answer is transformers' with that budget."""
    from zoo.core.export.plan import plan_export
    from zoo.core.export.run import run_plan

    checkpoint = image_checkpoints[0]
    plan = plan_export(checkpoint, tmp_path / "a.aimodel", capacity=128, image_tokens=16)
    assert "images up to 16 soft tokens (its processor allows 64" in plan.describe()
    asset = run_plan(plan)
    path = tmp_path / "big.png"
    random_image(400, 300, seed=5).save(path)
    image = random_image(400, 300, seed=5)
    prompt = prompt_of(asset, "w5 w9", [image])
    settings = asset_components(asset)["vision"]["processor"]["settings"]
    assert settings["size"]["longest_edge"] == 16 * 32 * 32
    budgeted = tmp_path / "budgeted"  # the checkpoint with the same processor settings
    budgeted.mkdir()
    for file in checkpoint.iterdir():
        (budgeted / file.name).symlink_to(file)
    (budgeted / "preprocessor_config.json").unlink()
    (budgeted / "preprocessor_config.json").write_text(json.dumps(settings))
    want, _ = transformers_greedy("qwen3_5", budgeted, prompt, [image])
    assert prompt.count(125) <= 16  # 12: 4 x 3 blocks of 32 pixels (54 at its own budget)
    outcome = run_isolated(runtime_greedy, str(asset), prompt, 8, [str(path)], timeout=300)
    assert outcome.ok and outcome.result["tokens"] == want, outcome.summary()
