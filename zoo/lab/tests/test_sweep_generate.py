"""The bad-input sweep's generate cases (zoo/lab/sweep/generate.py), each clear or right."""

from __future__ import annotations

import pytest

from zoo.lab.sweep import generate

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers


@pytest.mark.parametrize("case", generate.CASES, ids=lambda case: case.name)
def test_the_case_ends_clear_or_right(case, sweep):
    assert sweep(case) in ("clear", "right")
