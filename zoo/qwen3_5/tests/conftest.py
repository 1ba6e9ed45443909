"""Tiny checkpoints and exported assets, built once per test session."""

from __future__ import annotations

import pytest

from zoo.reference import make_tiny_checkpoint
from zoo.testing import ExportedAssets, exported_assets
from zoo.testing_media import image_fixtures

CAPACITY, CHUNK = 64, 4


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("qwen3_5-checkpoints")
    return {
        "4-layer": make_tiny_checkpoint("qwen3_5", root / "4-layer"),
        "8-layer": make_tiny_checkpoint("qwen3_5", root / "8-layer", seed=1, num_hidden_layers=8),
        "multimodal": make_tiny_checkpoint("qwen3_5", root / "multimodal", multimodal=True),
    }


@pytest.fixture(scope="session")
def assets(checkpoints, tmp_path_factory) -> ExportedAssets:
    """(variant, strategy[, layout]) -> an exported .aimodel, exported on first use."""
    directory = tmp_path_factory.mktemp("qwen3_5-assets")
    return exported_assets("qwen3_5", checkpoints, directory, CAPACITY, CHUNK)


# the image tests' checkpoints: two seeds; 8 layers (two attention layers) for the second
image_checkpoints, image_assets = image_fixtures(
    "qwen3_5",
    {0: dict(seed=0), 1: dict(seed=1, num_hidden_layers=8)},
    capacity=128,  # an image of the tiny processor is up to 64 soft tokens
    chunk=CHUNK,
)
