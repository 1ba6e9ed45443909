"""The bad-input sweep's experts cases (zoo/lab/sweep/experts.py), each clear or right."""

from __future__ import annotations

import pytest

from zoo.lab.sweep import experts

pytestmark = pytest.mark.export  # the suite's tiers: pyproject.toml's markers


@pytest.mark.parametrize("case", experts.CASES, ids=lambda case: case.name)
def test_the_case_ends_clear_or_right(case, sweep):
    assert sweep(case) in ("clear", "right")
