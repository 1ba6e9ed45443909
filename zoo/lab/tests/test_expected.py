"""Expected outcomes are data: a changed outcome fails, and a fixed crash says so loudly."""

from __future__ import annotations

import pytest

from zoo.lab.expected import (
    ANY,
    CRASHED,
    KV_WRITE,
    RAN_EXACT,
    TABLES,
    current_target,
    expected,
    mismatch,
    reported_column,
)

pytestmark = pytest.mark.unit  # the suite's tiers: pyproject.toml's markers


def test_an_expected_crash_that_still_crashes_passes():
    assert mismatch("KV write", "index-put", "crashed (SIGILL)", "crashed (SIGILL)") is None
    assert mismatch("KV write", "runtime-index", CRASHED, "crashed (SIGTRAP)") is None


def test_an_expected_crash_that_now_runs_is_reported_as_fixed():
    problem = mismatch("KV write", "index-put", "crashed (SIGILL)", "ran exact")
    assert "now runs exactly: the runtime may have been fixed" in problem
    assert "update zoo/lab/expected.py" in problem


def test_an_unexpected_crash_fails():
    problem = mismatch("KV write", "runtime-index", RAN_EXACT, "crashed (SIGTRAP)")
    assert problem == "KV write 'runtime-index': expected 'ran exact', got 'crashed (SIGTRAP)'"
    assert mismatch("KV write", "index-put", "crashed (SIGILL)", "crashed (SIGSEGV)")


def test_flipping_an_expectation_turns_the_pass_into_a_failure(monkeypatch):
    measured = "ran exact"  # what the Linux matrix records for runtime-index
    want = expected("kv-write", "runtime-index", "linux-cpu")
    assert mismatch("KV write", "runtime-index", want.outcome, measured) is None
    flipped = {**KV_WRITE["runtime-index"], "linux-cpu": want.__class__(CRASHED, "test")}
    monkeypatch.setitem(KV_WRITE, "runtime-index", flipped)
    want = expected("kv-write", "runtime-index", "linux-cpu")
    assert mismatch("KV write", "runtime-index", want.outcome, measured) is not None


def test_targets_this_run_and_a_mac(monkeypatch):
    assert current_target() == "linux-cpu"  # CI runs on Linux
    # a Mac GPU run expects what was reported there: runtime-index crashes, the blend runs
    assert expected("kv-write", "runtime-index", "macos-gpu").outcome == CRASHED
    assert expected("kv-write", "input-mask-blend", "macos-gpu").outcome == RAN_EXACT
    assert expected("toy-hybrid", "2/dynamic", "macos-gpu").outcome == CRASHED


@pytest.mark.parametrize("target", ["macos-cpu", "macos-ane", "macos-auto"])
def test_a_target_nobody_reported_expects_recipes_to_run(target):
    assert expected("kv-write", "runtime-index", target).outcome == RAN_EXACT
    assert expected("kv-write", "index-put", target).outcome == ANY  # a crash repro
    assert mismatch("KV write", "index-put", ANY, "crashed (SIGBUS)") is None


def test_every_cell_is_measured_here_and_reported_with_a_source():
    for name, table in TABLES.items():
        for cell, targets in table.items():
            assert {"linux-cpu", "macos-gpu"} <= set(targets), (name, cell)
            assert all(e.source for e in targets.values())
        column, source = reported_column(name)
        assert set(column) == set(table) and source


def test_reported_fixed_applies_to_release_builds_only(monkeypatch):
    from zoo.lab.expected import REPORTED_FIXED

    monkeypatch.setenv("ZOO_MACOS_BUILD", "26A5353q")  # beta 1: the reported crash
    assert expected("kv-write", "runtime-index", "macos-gpu").outcome == CRASHED
    monkeypatch.setenv("ZOO_MACOS_BUILD", "26A428")  # 27.0: Apple says fixed, unverified
    assert expected("kv-write", "runtime-index", "macos-gpu") == REPORTED_FIXED
    assert expected("kv-write", "runtime-index", "linux-cpu").source.startswith("measured")
    problem = mismatch(
        "KV write", "runtime-index", RAN_EXACT, "crashed (SIGTRAP)", reported_fixed=True
    )
    assert "Apple reported this fixed (unverified)" in problem


def test_the_status_box_follows_the_data(monkeypatch):
    import dataclasses

    from zoo.lab import expected as data
    from zoo.site.hooks import status_box

    record = {"provenance": {"platform": "linux", "machine": "x86_64", "date": "2026-12-01T00"}}
    page = status_box("kv-write", record, [])
    assert "reported fixed (unverified)" in page and "closed 2026-09-02" in page
    assert "never on Apple hardware" in page
    flipped = dataclasses.replace(data.STATUS["kv-write"], status="verified fixed")
    monkeypatch.setitem(data.STATUS, "kv-write", flipped)
    changed = status_box("kv-write", record, [])
    assert changed != page and changed.startswith('!!! success "Status: verified fixed')
