"""A Mac's records merge into the site: checked first, kept unless replaced, rendered."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from zoo.core.io.records import DEVICES_DIR, RecordError, merge, write_record
from zoo.site.harness import ROOT
from zoo.site.hooks import render_marker

pytestmark = pytest.mark.site  # the suite's tiers: pyproject.toml's markers

MAC = {
    "platform": "macos-27.0",
    "os": "macOS-27.0-arm64-arm-64bit",
    "machine": "arm64",
    "processor": "arm",
    "python": "3.11.7",
    "zoo": "0.1.0",
    "packages": {"coreai-core": "1.0.0b3", "coreai-torch": "0.4.3", "torch": "2.13.0"},
    "date": "2026-11-30T09:00:00Z",
    "compute_unit": "gpu",
}


def mac_record(directory, name, results, **provenance):
    """A record as `pytest --record` writes it on a Mac (provenance replaced)."""
    path = write_record(directory, name, results, compute_unit="gpu")
    record = json.loads(path.read_text())
    record["provenance"] = {**MAC, **provenance}
    path.write_text(json.dumps(record))
    return path


def test_merge_files_records_by_device_and_keeps_what_exists(tmp_path, capsys):
    out, site = tmp_path / "out", tmp_path / "records" / "devices"
    rows = [{"strategy": "runtime-index", "outcome": "crashed (SIGTRAP)"}]
    mac_record(out, "kv-write-matrix", {"outcomes": rows})
    write_record(out, "linux-run", {"rows": []}, compute_unit="auto")  # this machine's

    written = merge(out, site)
    assert [p.relative_to(site).as_posix() for p in written] == [
        "macos-27.0-gpu/kv-write-matrix.json"
    ]
    assert "skip linux-run.json" in capsys.readouterr().out

    mac_record(out, "kv-write-matrix", {"outcomes": [{**rows[0], "outcome": "ran exact"}]})
    assert merge(out, site) == []  # nothing lost: the first record stays
    assert "pass --replace" in capsys.readouterr().out
    kept = json.loads((site / "macos-27.0-gpu/kv-write-matrix.json").read_text())
    assert kept["results"]["outcomes"][0]["outcome"] == "crashed (SIGTRAP)"
    merge(out, site, replace=True)
    replaced = json.loads((site / "macos-27.0-gpu/kv-write-matrix.json").read_text())
    assert replaced["results"]["outcomes"][0]["outcome"] == "ran exact"


def test_merge_checks_every_record_before_copying_any(tmp_path):
    out, site = tmp_path / "out", tmp_path / "devices"
    mac_record(out, "good", {"rows": []})
    broken = mac_record(out, "broken", {"rows": []})
    record = json.loads(broken.read_text())
    del record["provenance"]["compute_unit"]
    broken.write_text(json.dumps(record))
    with pytest.raises(RecordError, match="missing provenance.compute_unit"):
        merge(out, site)
    assert not site.exists()
    with pytest.raises(RecordError, match=r"no \*.json records"):
        merge(tmp_path / "empty", site)


def test_merge_command_fails_loudly_on_a_bad_directory(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "zoo.core.io.records", "merge", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "no *.json records" in done.stderr
    assert not DEVICES_DIR.exists() or list(DEVICES_DIR.glob("*"))  # untouched


def test_a_merged_device_record_becomes_a_measured_column(tmp_path):
    records = tmp_path / "records"
    linux = [
        {"strategy": "runtime-index", "outcome": "ran exact"},
        {"strategy": "input-mask-blend", "outcome": "ran exact"},
    ]
    write_record(records, "kv-write-matrix", {"outcomes": linux})
    page = "gotchas/mpsgraph-kv-write.md"
    before = render_marker("outcomes", ["kv-write-matrix", "outcomes", "kv-write"], records, page)
    assert "(measured)" in before and "reported" in before and "macos-27.0" not in before

    mac = [{"strategy": "runtime-index", "outcome": "crashed (SIGTRAP)"}]
    mac_record(records / "devices" / "macos-27.0-gpu", "kv-write-matrix", {"outcomes": mac})
    after = render_marker("outcomes", ["kv-write-matrix", "outcomes", "kv-write"], records, page)
    header = after.splitlines()[0]
    assert "macos-27.0 gpu (measured)" in header
    assert ":material-close: crashed (SIGTRAP)" in after
    assert "not run" in after  # the Mac record has no input-mask-blend row


def test_device_tables_say_when_no_device_contributed(tmp_path):
    records = tmp_path / "records"
    write_record(records, "bench-x", {"cells": [{"decode_ms": 1.0}]})
    page = "performance.md"
    assert "No device records yet" in render_marker("devices", ["bench-x", "cells"], records, page)
    mac_record(records / "devices" / "macos-27.0-gpu", "bench-x", {"cells": [{"decode_ms": 2.5}]})
    table = render_marker("devices", ["bench-x", "cells"], records, page)
    assert "macos-27.0 gpu (measured)" in table and "2.5" in table
    assert "records/devices/macos-27.0-gpu/bench-x.json" in table


class _Page:
    class file:  # noqa: N801 - the shape of mkdocs' page.file
        src_uri = "performance.md"


def test_markers_keep_their_block_indentation_and_must_start_a_line(tmp_path):
    from mkdocs.exceptions import PluginError

    from zoo.site.hooks import on_page_markdown

    records = tmp_path / "records"
    write_record(records, "bench-x", {"cells": [{"op": "matmul", "share": "80%"}]})
    config = {"docs_dir": str(tmp_path)}
    page = '=== "Decode"\n\n    <!-- zoo:table bench-x cells -->\n'
    rendered = on_page_markdown(page, _Page, config, None)
    table_lines = [line for line in rendered.splitlines() if line.strip().startswith("|")]
    assert len(table_lines) == 3 and all(line.startswith("    |") for line in table_lines)
    with pytest.raises(PluginError, match="must start its own line"):
        on_page_markdown("See <!-- zoo:table bench-x cells -->\n", _Page, config, None)


def test_library_source_is_shown_by_name_verbatim(tmp_path):
    import inspect
    import textwrap

    from mkdocs.exceptions import PluginError

    from zoo.gemma4.model import Attention
    from zoo.site.hooks import on_page_markdown

    config = {"docs_dir": str(tmp_path)}
    page = "<!-- zoo:source zoo.gemma4.model.Attention.forward -->\n"
    rendered = on_page_markdown(page, _Page, config, None)
    assert rendered.startswith('```python title="zoo/gemma4/model.py · Attention.forward"\n')
    assert textwrap.dedent(inspect.getsource(Attention.forward)).strip() in rendered
    for wrong in ("zoo.gemma4.model.Attention.backward", "zoo.nowhere.thing"):
        with pytest.raises(PluginError, match="zoo:source"):
            on_page_markdown(f"<!-- zoo:source {wrong} -->\n", _Page, config, None)


def test_a_value_not_measured_shows_as_a_dash_and_stays_off_the_plot(tmp_path):
    rows = [
        {"preset": "fp32", "bits": 32.0, "perplexity": 45.4},
        {"preset": "fp16", "bits": 16.0, "perplexity": None},  # overflowed: no perplexity
        {"preset": "int8", "bits": 8.0, "perplexity": 45.9},
    ]
    records = tmp_path / "records"
    write_record(records, "quality-x", {"rows": rows})
    table = render_marker("table", ["quality-x", "rows"], records, "guides/x.md")
    assert "| fp16 | 16 | — |" in table
    plot = render_marker(
        "plot", ["quality-x", "rows", "bits", "perplexity", "preset"], records, "x.md"
    )
    assert ">fp32<" in plot and ">int8<" in plot and ">fp16<" not in plot
    with pytest.raises(ValueError, match="no rows with both"):
        render_marker("plot", ["quality-x", "rows", "bits", "missing", "preset"], records, "x.md")


def test_the_quality_plot_sets_measured_rows_beside_apples_labelled_as_theirs(tmp_path):
    from zoo.site.reported import APPLE, RATIO, quality_points

    rows = [
        {"preset": p, "text": "t", "perplexity": v, "bits per weight (with scales)": b}
        for p, v, b in [("fp32", 40.0, 32.0), ("int4-block64", 50.0, 4.5), ("gptq:x", 44.0, 4.5)]
    ]
    rows.append({**rows[1], "preset": "int4-block64+int8-kv"})  # the same bits: left out
    records = tmp_path / "records"
    write_record(records, "calibrated-x", {"model": "m", "rows": rows})
    points = quality_points([json.loads((records / "calibrated-x.json").read_text())])
    measured = {(p["series"], p[RATIO]) for p in points if "Apple" not in p["series"]}
    assert measured == {("m, t, rounded", 1.0), ("m, t, rounded", 1.25), ("m, t, GPTQ", 1.0)} | {
        ("m, t, GPTQ", 1.1)
    }
    apple = [p for p in points if p["series"].endswith("(reported by Apple)")]
    assert len(apple) == 2 * len(APPLE)  # fp16 at 1.0, then the preset
    plot = render_marker("quality_plot", ["calibrated-x"], records, "guides/x.md")
    assert "<svg" in plot and ">m, t, GPTQ<" in plot and "Reported by Apple" in plot


PAGES = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))


@pytest.mark.parametrize("page", PAGES)
def test_every_marker_of_the_page_renders_from_the_committed_records(page):
    """The markers alone, in seconds: the strict build finds the same errors after minutes."""
    import shlex

    from zoo.site.hooks import MARKER

    text = (ROOT / "docs" / page).read_text()
    for match in MARKER.finditer(text):
        rendered = render_marker(
            match["kind"], shlex.split(match["args"]), ROOT / "docs" / "records", page
        )
        assert rendered.strip(), f"{match[0].strip()} rendered nothing"
