"""The bad-input sweep's fixtures: its shared checkpoints and assets made once a session
(a worker), and a fresh folder for each case under a parent of the module's own."""

from __future__ import annotations

import itertools

import pytest

from zoo.lab.sweep.harness import GOOD, Bench, Case, run_case


@pytest.fixture(scope="session")
def sweep_bench(tmp_path_factory) -> Bench:
    return Bench(tmp_path_factory.mktemp("sweep-bench"))


@pytest.fixture(scope="module")
def sweep(sweep_bench, tmp_path_factory):
    """`sweep(case)`: the case run; fails unless it ended clear or right."""
    parent, numbers = tmp_path_factory.mktemp("sweep-cases"), itertools.count()

    def run(case: Case) -> str:
        kind, line, _ = run_case(case, sweep_bench, parent / f"{next(numbers):03d}")
        assert kind in GOOD, f"{case.key}: {kind}: {line}"
        return kind

    return run
