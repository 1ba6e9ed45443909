"""Tiny checkpoints and exported assets, built once per test session."""

from zoo.testing import entry_fixtures

CAPACITY, CHUNK = 64, 4
checkpoints, assets = entry_fixtures("gemma4_unified", CAPACITY, CHUNK)
