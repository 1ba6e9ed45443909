"""Tiny checkpoints and exported assets, built once per test session."""

from __future__ import annotations

import pytest

from zoo.reference import make_tiny_checkpoint
from zoo.testing import ExportedAssets, exported_assets

CAPACITY, CHUNK = 64, 4


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("gemma4-checkpoints")
    return {
        "kv-sharing": make_tiny_checkpoint("gemma4", root / "kv-sharing", "kv-sharing"),
        "softcap": make_tiny_checkpoint("gemma4", root / "softcap", "softcap", seed=1),
        "multimodal": make_tiny_checkpoint(
            "gemma4", root / "multimodal", "kv-sharing", multimodal=True
        ),
        "moe": make_tiny_checkpoint("gemma4", root / "moe", "moe", seed=1),
    }


@pytest.fixture(scope="session")
def assets(checkpoints, tmp_path_factory) -> ExportedAssets:
    """(variant, strategy[, layout]) -> an exported .aimodel, exported on first use."""
    directory = tmp_path_factory.mktemp("gemma4-assets")
    return exported_assets("gemma4", checkpoints, directory, CAPACITY, CHUNK)


@pytest.fixture(scope="session")
def image_checkpoints(tmp_path_factory) -> dict:
    """Seed -> a tiny checkpoint that reads images (its processor, image tokens, template);
    "31B": one whose image tokens attend to each other both ways, as the 31B's do."""
    root = tmp_path_factory.mktemp("gemma4-image-checkpoints")
    made = {
        seed: make_tiny_checkpoint("gemma4", root / f"seed{seed}", "kv-sharing", seed, images=True)
        for seed in (0, 2)
    }
    made["31B"] = make_tiny_checkpoint(
        "gemma4", root / "31B", "kv-sharing", 3, images=True, use_bidirectional_attention="vision"
    )
    return made


@pytest.fixture(scope="session")
def image_assets(image_checkpoints, tmp_path_factory):
    """(checkpoint key, strategy[, text_only]) -> the asset `zoo export` writes, exported on first
    use: the decoder and the vision encoder, or the decoder alone."""
    from zoo.core.plan import plan_export
    from zoo.core.run import run_plan

    root, made = tmp_path_factory.mktemp("gemma4-image-assets"), {}

    def asset(seed: int | str, strategy: str, text_only: bool = False):
        key = (seed, strategy, text_only)
        if key not in made:
            path = root / f"seed{seed}-{strategy}{'-text' * text_only}.aimodel"
            plan = plan_export(
                image_checkpoints[seed],
                path,
                strategy=strategy,
                capacity=IMAGE_CAPACITY,
                chunk=CHUNK,
                text_only=text_only,
            )
            made[key] = run_plan(plan)
        return made[key]

    return asset


IMAGE_CAPACITY = 128  # an image of the tiny processor is up to 70 soft tokens
