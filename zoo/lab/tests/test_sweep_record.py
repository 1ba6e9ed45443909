"""The sweep's record (docs/guides/bad-input.md shows it) lists every case the code has, by
surface and name, and every one ended clear or right when it was measured."""

from __future__ import annotations

import pytest

from zoo.core.io.records import load_record
from zoo.lab.sweep.__main__ import RECORD, SURFACES, cases_of, counts
from zoo.lab.sweep.harness import GOOD

pytestmark = pytest.mark.unit  # the suite's tiers: pyproject.toml's markers


def test_the_record_lists_the_cases_of_the_code_and_each_ended_clear_or_right():
    rows = load_record(RECORD)["results"]["cases"]
    recorded = [(row["surface"], row["case"]) for row in rows]
    coded = [(surface, case.name) for surface in SURFACES for case in cases_of(surface)]
    assert len(set(coded)) == len(coded), "two cases of one surface share a name"
    assert recorded == coded, "regenerate it: python -m zoo.core.io.records regenerate " + RECORD
    assert len(coded) >= 150
    assert [row for row in rows if row["class"] not in GOOD] == []


def test_the_record_counts_are_its_cases_counted():
    results = load_record(RECORD)["results"]
    assert results["counts"] == counts(results["cases"])
