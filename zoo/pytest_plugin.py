"""The zoo's pytest plugin (loaded with `-p zoo.pytest_plugin` from pyproject.toml): the
options `--record` and `--compute-unit`, the session's caches (isolated results, recipe
runs, identical exports), where the suite runs in the header, and one tier a test file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from zoo.core.export.session_cache import CACHE_ENV as EXPORT_CACHE_ENV
from zoo.core.export.session_cache import summary as export_summary
from zoo.core.host.runtime import COMPUTE_UNIT_ENV, COMPUTE_UNITS, default_compute_unit
from zoo.core.io.provenance import describe, provenance
from zoo.testing import CACHE_ENV, RECORD_ENV


def pytest_addoption(parser) -> None:
    parser.addoption(
        "--record",
        metavar="DIR",
        default=None,
        help="write a JSON record (with provenance) of each matrix and parity run into DIR",
    )
    parser.addoption(
        "--compute-unit",
        choices=COMPUTE_UNITS,
        default=None,
        help="Core AI compute unit for every model the suite loads (macOS 27+: cpu, gpu, "
        "ane; Linux: auto/cpu). Default: $ZOO_COMPUTE_UNIT, else auto.",
    )


def pytest_configure(config) -> None:
    # Nothing the suite does may reach a model hub: checkpoints are built locally.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    record_dir = config.getoption("--record", default=None)
    if record_dir:
        os.environ[RECORD_ENV] = os.path.abspath(record_dir)
    chosen = config.getoption("--compute-unit", default=None)
    if chosen:  # children (isolated runs, pages, CLIs) inherit it through the environment
        os.environ[COMPUTE_UNIT_ENV] = chosen
    if CACHE_ENV not in os.environ:
        os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="zoo-results-")
        config._zoo_cache_owner = True
    # recipes run once per session, shared by pages, the build and tests/test_snippets.py
    os.environ.setdefault("ZOO_RECIPE_RUNS", os.path.join(os.environ[CACHE_ENV], "recipes"))
    # identical exports too, wherever they run (zoo.core.export.session_cache); set empty: off
    if os.environ.setdefault(EXPORT_CACHE_ENV, os.path.join(os.environ[CACHE_ENV], "exports")):
        os.makedirs(os.environ[EXPORT_CACHE_ENV], exist_ok=True)


TIERS = ("unit", "export", "runtime", "real_weights", "site")  # pyproject.toml's markers


def pytest_collection_modifyitems(config, items) -> None:
    """Every test of this checkout in exactly one tier (its file's `pytestmark`): `make
    check` selects by tier, so a test without one would silently leave the fast loop or the
    suite. (Tests elsewhere that load this plugin, a device's own, are not the zoo's.)"""
    ours = Path(__file__).resolve().parents[1]
    wrong = sorted(
        {
            f"{item.nodeid.split('::')[0]} ({', '.join(tiers) or 'no tier'})"
            for item in items
            if Path(str(item.path)).resolve().is_relative_to(ours)
            and len(tiers := [m.name for m in item.iter_markers() if m.name in TIERS]) != 1
        }
    )
    if wrong:
        raise pytest.UsageError(
            "every test file names one tier (pytestmark = pytest.mark.unit | export | "
            f"runtime | real_weights | site): {'; '.join(wrong)}"
        )


def pytest_unconfigure(config) -> None:
    if getattr(config, "_zoo_cache_owner", False):
        shutil.rmtree(os.environ.pop(CACHE_ENV), ignore_errors=True)


def pytest_terminal_summary(terminalreporter) -> None:
    line = os.environ.get(EXPORT_CACHE_ENV) and export_summary(os.environ[EXPORT_CACHE_ENV])
    if line:
        terminalreporter.write_line(f"zoo: {line}")


def pytest_report_header(config) -> list[str]:
    info = provenance(default_compute_unit())
    return [f"zoo: {describe(info)}", f"zoo: os {info['os']}, processor {info['processor']}"]
