"""Tiny checkpoints and exported assets, built once per test session."""

from __future__ import annotations

import pytest

from zoo.llama import ENTRY
from zoo.testing import ExportedAssets, exported_assets

CAPACITY, CHUNK = 64, 4


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> dict:
    """Every tiny variant of the entry, and the default one in the multimodal layout where
    the family has one."""
    root = tmp_path_factory.mktemp("llama-checkpoints")
    made = {v: ENTRY.make_tiny_checkpoint(root / v, v) for v in ENTRY.tiny.variants}
    if not ENTRY.text_only:
        made["multimodal"] = ENTRY.make_tiny_checkpoint(root / "multimodal", multimodal=True)
    return made


@pytest.fixture(scope="session")
def assets(checkpoints, tmp_path_factory) -> ExportedAssets:
    """(variant, strategy[, layout]) -> an exported .aimodel, exported on first use."""
    directory = tmp_path_factory.mktemp("llama-assets")
    return exported_assets("llama", checkpoints, directory, CAPACITY, CHUNK)
