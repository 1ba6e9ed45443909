"""The apple/coreai-torch#2 isolation: NDELTA GatedDeltaNet layers + 1 attention layer,
dynamic or static context, each cell exported and run in a process of its own."""

from __future__ import annotations

import importlib.util

import pytest

from zoo.lab.expected import TOY_HYBRID, current_target, expected, mismatch
from zoo.site.harness import ROOT
from zoo.testing import record

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers


@pytest.fixture(scope="module")
def toy_rows():
    spec = importlib.util.spec_from_file_location("toy_hybrid", ROOT / "snippets/toy_hybrid.py")
    toy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(toy)
    rows = toy.run_matrix()
    record("toy-hybrid", {"outcomes": rows})
    return {row["key"]: row for row in rows}


@pytest.mark.parametrize("cell", sorted(TOY_HYBRID))
def test_toy_hybrid_cell_has_its_expected_outcome(toy_rows, cell):
    want = expected("toy-hybrid", cell)
    got = toy_rows[cell]["outcome"]
    problem = mismatch(
        f"toy hybrid on {current_target()}",
        cell,
        want.outcome,
        got,
        reported_fixed=want.detail.startswith("reported fixed"),
    )
    assert problem is None, f"{problem} (expectation: {want.source})"
