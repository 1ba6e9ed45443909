from __future__ import annotations

import sys

import pytest

from zoo.core.isolate import Outcome, run_isolated, run_script

from . import isolate_targets as targets

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers


def test_ok_returns_the_result():
    outcome = run_isolated(targets.add, 2, b=3)
    assert outcome.status == "ok", outcome.detail
    assert outcome.result == {"sum": 5, "array": [0, 1, 2]}


def test_wrong_numbers():
    outcome = run_isolated(targets.off_by_a_bit)
    assert outcome.status == "wrong numbers"
    assert "logits: max abs error 0.1" in outcome.detail


def test_error_keeps_the_traceback():
    outcome = run_isolated(targets.raises)
    assert outcome.status == "error"
    assert "ValueError: bad input" in outcome.detail
    assert outcome.summary() == "error: ValueError: bad input: give me a .aimodel"


def test_failed_to_export():
    assert run_isolated(targets.export_fails).status == "failed to export"


@pytest.mark.parametrize("name", ["SIGILL", "SIGSEGV", "SIGTRAP", "SIGABRT"])
def test_crash_is_contained_and_named(name):
    outcome = run_isolated(targets.die, name)
    assert (outcome.status, outcome.signal) == ("crashed", name)
    assert outcome.summary() == f"crashed ({name})"
    assert "about to die" in outcome.stdout_tail


def test_timeout_kills_the_child():
    outcome = run_isolated(targets.sleep, 30, timeout=2)
    assert outcome.status == "timed out"
    assert outcome.seconds < 15


def test_refuses_what_a_child_cannot_find_again():
    with pytest.raises(ValueError, match="module-level function"):
        run_isolated(lambda: 1)


def test_script_outcomes(tmp_path):
    ok = tmp_path / "ok.py"
    ok.write_text("print('hello')\n")
    crash = tmp_path / "crash.py"
    crash.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    failing = tmp_path / "fail.py"
    failing.write_text("raise SystemExit('no checkpoint at ./ckpt')\n")
    assert run_script(ok).stdout_tail == "hello\n"
    assert run_script(crash).summary() == "crashed (SIGSEGV)"
    failed = run_script(failing)
    assert failed.status == "error" and "no checkpoint" in failed.detail


def test_outcome_round_trips_as_a_record():
    outcome = Outcome(
        status="crashed", seconds=1.0, returncode=-4, signal="SIGILL", command=[sys.executable]
    )
    assert Outcome(**outcome.to_dict()) == outcome


@pytest.mark.parametrize("unit, serialized", [("gpu", True), ("ane", True), ("cpu", False)])
def test_gpu_and_ane_runs_are_serialized(unit, serialized):
    from concurrent.futures import ThreadPoolExecutor

    env = {"ZOO_COMPUTE_UNIT": unit}
    with ThreadPoolExecutor(2) as pool:
        calls = [pool.submit(run_isolated, targets.interval, 1.0, env=env) for _ in range(2)]
        first, second = sorted((c.result().result for c in calls), key=lambda r: r["start"])
    overlapped = second["start"] < first["end"]
    assert overlapped is not serialized


def test_a_crashing_child_leaves_no_temporary_files(tmp_path, monkeypatch):
    import tempfile

    from zoo.core.isolate import run_isolated
    from zoo.core.tests import isolate_targets

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    outcome = run_isolated(isolate_targets.leave_temp_files_and_die)
    assert outcome.status == "crashed" and outcome.signal == "SIGKILL"
    assert list(tmp_path.iterdir()) == []


def test_a_script_that_isolates_its_own_function_at_top_level_is_named(tmp_path):
    """A recipe with the work at its top level: the child that loads it to find the function
    would run it again, and start a child of its own, without end; refused by name."""
    script = tmp_path / "recipe.py"
    script.write_text(
        "from zoo.core.isolate import run_isolated\n"
        "def work():\n    return 1\n"
        "outcome = run_isolated(work, timeout=60)\n"
        "print(outcome.status, outcome.detail)\n"
    )
    ran = run_script(script, timeout=120)
    assert ran.status == "ok", ran.detail
    assert ran.stdout_tail.startswith("error ")
    assert "calls run_isolated at its top level" in ran.stdout_tail
    assert 'under `if __name__ == "__main__":`' in ran.stdout_tail
