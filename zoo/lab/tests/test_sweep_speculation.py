"""The bad-input sweep's speculation cases (zoo/lab/sweep/speculation.py), each clear or right."""

from __future__ import annotations

import pytest

from zoo.lab.sweep import speculation

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers


@pytest.mark.parametrize("case", speculation.CASES, ids=lambda case: case.name)
def test_the_case_ends_clear_or_right(case, sweep):
    assert sweep(case) in ("clear", "right")
