"""The apple/coreai-torch#2 isolation: NDELTA GatedDeltaNet layers + 1 attention layer,
dynamic or static context, each cell exported and run in a process of its own."""

from __future__ import annotations

import importlib.util

import pytest

from zoo.core.expected import LINUX_TOY_HYBRID, mismatch
from zoo.core.provenance import platform_name
from zoo.site.harness import ROOT
from zoo.testing import record


@pytest.fixture(scope="module")
def toy_rows():
    spec = importlib.util.spec_from_file_location("toy_hybrid", ROOT / "snippets/toy_hybrid.py")
    toy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(toy)
    rows = toy.run_matrix()
    record("toy-hybrid", {"outcomes": rows})
    return {row["key"]: row for row in rows}


@pytest.mark.skipif(platform_name() != "linux", reason="expected outcomes recorded for Linux")
@pytest.mark.parametrize("cell", sorted(LINUX_TOY_HYBRID))
def test_toy_hybrid_cell_has_its_expected_outcome(toy_rows, cell):
    problem = mismatch("toy hybrid", cell, LINUX_TOY_HYBRID[cell], toy_rows[cell]["outcome"])
    assert problem is None, problem
