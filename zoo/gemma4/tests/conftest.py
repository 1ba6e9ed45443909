"""Tiny checkpoints and exported assets, built once per test session."""

from __future__ import annotations

import pytest

from zoo.reference import make_tiny_checkpoint
from zoo.testing import ExportedAssets, exported_assets
from zoo.testing_media import image_fixtures

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


# the image tests' checkpoints: two seeds, and the 31B's and 26B-A4B's designs
image_checkpoints, image_assets = image_fixtures(
    "gemma4",
    {
        0: dict(variant="kv-sharing", seed=0),
        2: dict(variant="kv-sharing", seed=2),
        "31B": dict(variant="kv-sharing", seed=3, use_bidirectional_attention="vision"),
        # 26B-A4B: experts beside each MLP, and image tokens that see each other
        "26B-A4B": dict(variant="moe", seed=1, use_bidirectional_attention="vision"),
    },
    capacity=128,  # an image of the tiny processor is up to 70 soft tokens
    chunk=CHUNK,
)
