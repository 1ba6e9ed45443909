"""Tiny checkpoints and exported assets, built once per test session."""

from __future__ import annotations

import pytest

from zoo.gemma4 import export_gemma4, load_gemma4, make_tiny_checkpoint
from zoo.testing import ExportedAssets

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
def assets(checkpoints, tmp_path_factory) -> ExportedAssets:
    """(variant, strategy[, layout]) -> an exported .aimodel, exported on first use."""

    def export(variant, strategy, path, **layout):
        model = load_gemma4(checkpoints[variant], strategy, CAPACITY)
        return export_gemma4(model, path, chunk=CHUNK, checkpoint=checkpoints[variant], **layout)

    return ExportedAssets(tmp_path_factory.mktemp("gemma4-assets"), export)
