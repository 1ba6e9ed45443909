"""Expected outcomes are data: a changed outcome fails, and a fixed crash says so loudly."""

from __future__ import annotations

from zoo.core.expected import LINUX_KV_WRITE, LINUX_TOY_HYBRID, REPORTED, mismatch


def test_an_expected_crash_that_still_crashes_passes():
    assert mismatch("KV write", "index-put", "crashed (SIGILL)", "crashed (SIGILL)") is None


def test_an_expected_crash_that_now_runs_is_reported_as_fixed():
    problem = mismatch("KV write", "index-put", "crashed (SIGILL)", "ran exact")
    assert "now runs exactly: the runtime may have been fixed" in problem
    assert "update zoo/core/expected.py" in problem


def test_an_unexpected_crash_fails():
    problem = mismatch("KV write", "runtime-index", "ran exact", "crashed (SIGTRAP)")
    assert problem == "KV write 'runtime-index': expected 'ran exact', got 'crashed (SIGTRAP)'"


def test_flipping_an_expectation_turns_the_pass_into_a_failure():
    measured = "ran exact"  # what the Linux matrix records for runtime-index
    assert mismatch("KV write", "runtime-index", LINUX_KV_WRITE["runtime-index"], measured) is None
    flipped = {**LINUX_KV_WRITE, "runtime-index": "crashed (SIGTRAP)"}
    assert mismatch("KV write", "runtime-index", flipped["runtime-index"], measured) is not None


def test_every_measured_cell_has_a_reported_counterpart_with_a_source():
    pairs = [(LINUX_KV_WRITE, "kv-write-mac-gpu"), (LINUX_TOY_HYBRID, "toy-hybrid-mac-gpu")]
    for measured, name in pairs:
        reported = REPORTED[name]
        assert set(reported.outcomes) == set(measured)
        assert reported.source and reported.platform
