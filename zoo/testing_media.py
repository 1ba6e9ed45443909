"""What the image and audio tests of the entries that read them share: random images and
WAV clips, prompts through an asset's own template, transformers' image processor (its PIL
path) and its greedy answer as the reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def random_image(height: int, width: int, seed: int):
    """A PIL image of random RGB pixels."""
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    return Image.fromarray(pixels)


def write_wav(path, seconds: float, seed: int, rate=16000, width=2, channels=1) -> np.ndarray:
    """A WAV file of a tone plus noise (PCM of `width` bytes, `channels` alike); returns
    the samples as `zoo.core.host.audio.read_wav` should read them."""
    import wave

    rng = np.random.default_rng(seed)
    t = np.arange(int(rate * seconds)) / rate
    x = 0.3 * np.sin(2 * np.pi * (200 + 50 * seed) * t) + 0.05 * rng.standard_normal(len(t))
    full = {1: 127, 2: 32767, 4: 2**31 - 1}[width]
    kind = {1: np.uint8, 2: np.int16, 4: np.int32}[width]
    pcm = np.round(x * full).astype(np.int64)
    pcm = np.repeat(pcm[:, None], channels, axis=1)
    stored = (pcm + 128 if width == 1 else pcm).astype(kind)
    with wave.open(str(path), "wb") as file:
        file.setnchannels(channels)
        file.setsampwidth(width)
        file.setframerate(rate)
        file.writeframes(stored.tobytes())
    return (pcm[:, 0] / (full + 1)).astype(np.float32)


def feature_extractor(checkpoint: Path, name: str):
    """transformers' audio feature extractor `name` (e.g. "Gemma4AudioFeatureExtractor"),
    from the settings the checkpoint ships (processor_config.json's `feature_extractor`)."""
    import json

    import transformers

    settings = json.loads((Path(checkpoint) / "processor_config.json").read_text())
    names = ("feature_extractor_type", "processor_class")
    found = {k: v for k, v in settings["feature_extractor"].items() if k not in names}
    return getattr(transformers, name)(**found)


def asset_components(asset: str | Path) -> dict:
    from zoo.core.asset.opened import open_asset

    return open_asset(asset).components


def prompt_of(asset: str | Path, text: str, images: list) -> list[int]:
    """Prompt ids of `images` then `text` in one user turn of the asset's chat template."""
    from zoo.core.host.media import asset_prompt

    return asset_prompt(asset, text, images=images)


def reference_processor(entry: str, checkpoint):
    """transformers' image processor of the checkpoint (the PIL path the tiny ones write)."""
    import importlib

    from zoo.core.model.entry import get_entry

    found = get_entry(entry)
    name = found.transformers_name
    where = found.tiny.images.get("processor_class") or (
        f"transformers.models.{name.lower()}.image_processing_pil_{name.lower()}."
        f"{name}ImageProcessorPil"
    )
    module, _, cls = where.rpartition(".")
    return getattr(importlib.import_module(module), cls).from_pretrained(checkpoint)


def transformers_greedy(
    entry: str, checkpoint, prompt: list[int], images: list, new_tokens: int = 8, typed=True
):
    """transformers' greedy tokens and its logits after the prompt, with the images and
    the image tokens typed as the processor types them (`mm_token_type_ids`; not `typed`:
    left out, so a model whose image tokens attend both ways reads them causally)."""
    import torch

    from zoo.reference import greedy_reference, reference_model

    reference = reference_model(entry, checkpoint)
    prepared = reference_processor(entry, checkpoint)(images, return_tensors="pt")
    media = {k: v for k, v in prepared.items() if k != "num_soft_tokens_per_image"}
    ids = torch.tensor([prompt])
    if typed:
        media["mm_token_type_ids"] = (ids == reference.config.image_token_id).int()
    with torch.no_grad():
        tokens = greedy_reference(reference, prompt, new_tokens, **media)
        logits = reference(ids, **media).logits[0, -1].numpy()
    return tokens, logits


def image_fixtures(entry: str, checkpoints: dict[object, dict], capacity: int, chunk: int):
    """The session fixtures of an entry's image tests: `image_checkpoints` (key -> a tiny
    checkpoint that reads images, made with `make_tiny_checkpoint(entry, images=True,
    **checkpoints[key])`) and `image_assets(key, strategy, text_only=False)` (the asset
    `zoo export` writes of it, exported on first use)."""
    import pytest

    from zoo.reference import make_tiny_checkpoint

    @pytest.fixture(scope="session")
    def image_checkpoints(tmp_path_factory) -> dict:
        root = tmp_path_factory.mktemp(f"{entry}-image-checkpoints")
        return {
            key: make_tiny_checkpoint(entry, root / str(key), images=True, **options)
            for key, options in checkpoints.items()
        }

    @pytest.fixture(scope="session")
    def image_assets(image_checkpoints, tmp_path_factory):
        from zoo.core.export.plan import plan_export
        from zoo.core.export.run import run_plan

        root, made = tmp_path_factory.mktemp(f"{entry}-image-assets"), {}

        def asset(key, strategy: str, text_only: bool = False):
            if (key, strategy, text_only) not in made:
                path = root / f"{key}-{strategy}{'-text' * text_only}.aimodel"
                plan = plan_export(
                    image_checkpoints[key],
                    path,
                    strategy=strategy,
                    capacity=capacity,
                    chunk=chunk,
                    text_only=text_only,
                )
                made[key, strategy, text_only] = run_plan(plan)
            return made[key, strategy, text_only]

        return asset

    return image_checkpoints, image_assets


def check_answer_about_image(
    entry: str, checkpoint, asset, image, path, text: str, tolerance: float = 1e-4
) -> list[int]:
    """8 greedy tokens about `image` (saved at `path`) on the runtime, in a process of
    their own, identical to transformers' on `checkpoint`, the logits after the prompt
    within `tolerance`; returns the prompt."""
    from zoo.core.host.generator import runtime_greedy
    from zoo.core.isolate import run_isolated

    image.save(path)
    prompt = prompt_of(asset, text, [image])
    want, want_logits = transformers_greedy(entry, checkpoint, prompt, [image])
    outcome = run_isolated(runtime_greedy, str(asset), prompt, 8, [str(path)], timeout=300)
    assert outcome.ok, outcome.summary()
    assert outcome.result["tokens"] == want, (outcome.result["tokens"], want)
    error = np.abs(np.array(outcome.result["logits"][0]) - want_logits).max()
    assert error < tolerance, error
    return prompt
