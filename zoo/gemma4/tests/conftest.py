"""Tiny checkpoints and exported assets, built once per test session."""

from __future__ import annotations

import pytest

from zoo.gemma4 import export_gemma4, load_gemma4
from zoo.gemma4.tiny import make_tiny_checkpoint

CAPACITY, CHUNK = 64, 4


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("gemma4-checkpoints")
    return {
        "kv-sharing": make_tiny_checkpoint(root / "kv-sharing", "kv-sharing"),
        "softcap": make_tiny_checkpoint(root / "softcap", "softcap", seed=1),
        "multimodal": make_tiny_checkpoint(root / "multimodal", "kv-sharing", multimodal=True),
    }


@pytest.fixture(scope="session")
def assets(checkpoints, tmp_path_factory) -> dict:
    """(variant, strategy) -> an exported .aimodel, exported on first use."""
    root = tmp_path_factory.mktemp("gemma4-assets")
    cache: dict = {}

    class Assets(dict):
        def __missing__(self, key):
            variant, strategy = key
            model = load_gemma4(checkpoints[variant], strategy, CAPACITY)
            path = export_gemma4(
                model,
                root / f"{variant}-{strategy}.aimodel",
                chunk=CHUNK,
                checkpoint=checkpoints[variant],
            )
            self[key] = path
            return path

    return Assets(cache)
