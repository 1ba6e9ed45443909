"""Every recipe in snippets/ runs as a reader runs it; records it makes match the committed ones.

Each recipe runs once per test session (`zoo.site.recipes.run_recipe`): the pages that show
it and the build reuse the same run."""

from __future__ import annotations

import json

import pytest

from zoo.core.io.records import GENERATORS, RECORDS_DIR
from zoo.site.harness import ROOT
from zoo.site.recipes import run_recipe

pytestmark = pytest.mark.site  # the suite's tiers: pyproject.toml's markers

# In the reverse of the pages' order: the worker running tests/test_pages.py starts at the
# other end, so the two share the recipe runs instead of waiting on one another.
SNIPPETS = sorted((ROOT / "snippets").glob("*.py"), reverse=True)
# what `python snippets/X.py --record DIR` writes (benchmarks take extra arguments)
RECORDS_OF: dict[str, list[str]] = {}
for name, (script, extra) in GENERATORS.items():
    if not extra:
        RECORDS_OF.setdefault(script, []).append(name)


def compare_records(name: str, fresh: dict, committed: dict) -> None:
    """What must hold on every run of this platform (timings vary; outcomes must not)."""
    if name == "conversion-gotchas":
        assert fresh["results"]["held"] == committed["results"]["held"]
        fp32, fp16 = fresh["results"]["fp16_vs_fp32"]
        assert (fp32["dtype"], fp16["dtype"]) == ("float32", "float16")
    elif name == "kv-write-matrix":
        outcomes = {row["strategy"]: row["outcome"] for row in fresh["results"]["outcomes"]}
        committed_outcomes = {
            row["strategy"]: row["outcome"] for row in committed["results"]["outcomes"]
        }
        assert outcomes == committed_outcomes
    elif name in ("hybrid-states", "gemma4-states", "qwen3_5-states"):
        assert fresh["results"] == committed["results"]
    elif name in ("gemma4-parity", "qwen3_5-parity"):

        def verdicts(record):
            return [
                (r["config"], r["KV strategy"], r["greedy tokens on the runtime"])
                for r in record["results"]["rows"]
            ]

        assert verdicts(fresh) == verdicts(committed)
        assert all(r["logits max abs error (torch)"] < 1e-4 for r in fresh["results"]["rows"])
    elif name.endswith("-released"):

        def outcomes(record):
            return [(r["released config"], r["outcome"]) for r in record["results"]["rows"]]

        assert outcomes(fresh) == outcomes(committed)
    elif name.startswith("real-"):  # real weights: the same text on every run

        def texts(record):
            return [
                {k: v for k, v in row.items() if k != "tokens"}
                for row in record["results"]["texts"]
            ]

        assert texts(fresh) == texts(committed)
    elif name == "compression":

        def sizes(record):
            return {(r["model"], r["preset"]): r["asset bytes"] for r in record["results"]["rows"]}

        fresh_sizes, committed_sizes = sizes(fresh), sizes(committed)
        assert fresh_sizes.keys() == committed_sizes.keys()
        for key, size in fresh_sizes.items():  # random init differs by nothing but noise
            assert abs(size - committed_sizes[key]) < 0.01 * committed_sizes[key], key
        assert all(
            r["runtime vs compressed eager (max abs)"] < 1e-4
            for r in fresh["results"]["rows"]
            if r["preset"] != "fp16"
        )
    elif name == "compression-profile":

        def shape(record):  # what is slow must stay what is slow; timings vary
            return {
                r["preset"]: (r["asset bytes"], r["most expensive op"])
                for r in record["results"]["rows"]
            }

        fresh_rows, committed_rows = shape(fresh), shape(committed)
        assert fresh_rows.keys() == committed_rows.keys()
        for preset, (size, op) in fresh_rows.items():
            assert abs(size - committed_rows[preset][0]) < 0.01 * size, preset
            assert op == committed_rows[preset][1], preset
    elif name == "toy-hybrid":

        def cells(record):
            return [
                (r["NDELTA"], r["context"], r["outcome"]) for r in record["results"]["outcomes"]
            ]

        assert cells(fresh) == cells(committed)
    elif name == "weight-grids":  # errors of stored weights: deterministic, seeded

        def errors(record):
            return {
                (r["model"], r["tensor"], r["preset"]): (
                    r["error, registry weights"],
                    r["error, Gaussian weights"],
                )
                for r in record["results"]["rows"]
            }

        fresh_errors, committed_errors = errors(fresh), errors(committed)
        assert fresh_errors.keys() == committed_errors.keys()
        for key, pair in fresh_errors.items():
            assert pair == pytest.approx(committed_errors[key], abs=2e-3), key
    elif name == "runtime-crash":
        outcomes = [row["outcome"] for row in fresh["results"]["outcomes"]]
        assert outcomes == [row["outcome"] for row in committed["results"]["outcomes"]]
    else:
        raise AssertionError(f"no comparison for record {name!r}: add one here")
    assert fresh["provenance"]["platform"] == committed["provenance"]["platform"]


# recipes whose files in $TMPDIR are what the reader runs them for
KEEP_THEIR_OUTPUT = {"snippets/run_on_your_mac.py": "its records, to copy back from the Mac"}


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda p: p.name)
def test_snippet_runs(snippet):
    relative = f"snippets/{snippet.name}"
    run = run_recipe(relative)
    assert run.ok, f"python {relative}: {run.summary()}\n{run.traceback}\n{run.stderr_tail}"
    # a reader who pastes it keeps a clean /tmp: TemporaryDirectory, not mkdtemp
    assert relative in KEEP_THEIR_OUTPUT or not run.left_in_tmp, run.left_in_tmp
    for name in RECORDS_OF.get(relative, []):
        fresh = json.loads((run.records / f"{name}.json").read_text())
        committed = json.loads((RECORDS_DIR / f"{name}.json").read_text())
        compare_records(name, fresh, committed)
