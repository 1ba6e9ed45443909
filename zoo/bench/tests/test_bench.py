"""The bench measures what its records say, at tiny shapes (the real ones: `make bench`)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from zoo.bench.__main__ import run_bench, run_profiles
from zoo.bench.shapes import SHAPES, TINY, build_decoder, decode_weight_bytes
from zoo.core.model.entry import get_entry
from zoo.core.model.layout import apply_layout

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers


def test_decode_weight_bytes_counts_one_embedding_row_and_the_head():
    model = build_decoder(TINY["qwen3_5-tiny"], "runtime-index")
    table = model.embed_tokens.weight
    others = sum(p.nbytes for n, p in model.named_parameters() if n != "embed_tokens.weight")
    # tied head: the whole table is read by the head, one row by the lookup
    assert decode_weight_bytes(model) == others + table[0].nbytes + table.nbytes
    apply_layout(model, "transposed", "bhdt")  # the head is now a copy: counted once, as such
    assert decode_weight_bytes(model) == others + table[0].nbytes + table.nbytes


@pytest.mark.parametrize("name", list(SHAPES))
def test_every_real_shape_reads_and_builds(name):
    """Each real shape's config reads and its decoder builds (on the meta device: no
    memory), so `make bench` does not fail on a shape after minutes of others."""
    shape = SHAPES[name]
    with torch.device("meta"):
        model = get_entry(shape.model).build(shape.config, shape.strategies[0], shape.capacity)
    assert len(model.layers) == shape.config["num_hidden_layers"]


@pytest.fixture(scope="module")
def bench_records(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    results = run_bench(["qwen3_5-tiny", "gemma4-tiny"], str(out), quick=True, record_dir=out)
    return results, out


def test_bench_records_every_cell_with_provenance(bench_records):
    results, out = bench_records
    for name in ("qwen3_5-tiny", "gemma4-tiny"):
        record = json.loads((out / f"bench-{name}.json").read_text())
        assert record["provenance"]["compute_unit"] == "auto"
        assert record["results"] == json.loads(json.dumps(results[name]))
        shape = TINY[name]
        (cell,) = record["results"]["cells"]  # --quick: the default layout, one strategy
        assert (cell["strategy"], cell["layout"]) == (shape.strategies[0], "default")
        assert (cell["weights"], cell["keys"]) == ("blocked", "bhdt")  # the Linux default
        assert cell["decode ms"] > 0 and cell["eager decode ms"] > 0
        # the ratio of the unrounded times: within what rounding each to 0.1 ms allows
        decode, eager, half = cell["decode ms"], cell["eager decode ms"], 0.05
        low, high = (decode - half) / (eager + half), (decode + half) / max(eager - half, 1e-9)
        assert low - 0.005 <= cell["runtime / eager"] <= high + 0.005
        roofline = cell["weights MB/token"] / record["results"]["bandwidth_gb_s"]
        assert cell["roofline ms"] == pytest.approx(roofline, abs=0.06)
        positions = [p["context position"] for p in record["results"]["latency"]]
        assert positions == list(shape.positions)
        assert [o["outcome"] for o in record["results"]["outcomes"]] == ["ok"]
        first = record["results"]["first tokens"]  # runtime beside eager, per prompt length
        assert sorted({row["prompt tokens"] for row in first}) == list(shape.first_token_prompts)
        assert {row["side"].split(" (")[0] for row in first} == {"Core AI runtime", "torch eager"}
        assert all(row["first token ms"] > 0 for row in first)


def test_bench_command_refuses_unknown_shapes():
    done = subprocess.run(
        [sys.executable, "-m", "zoo.bench", "llama-70b"], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "unknown shape(s) ['llama-70b']" in done.stderr
    assert "qwen3_5-0.8b" in done.stderr  # it lists what it knows


def test_bench_models_compute_the_same_in_every_layout():
    model = build_decoder(TINY["gemma4-tiny"], "runtime-index")
    from zoo.core.model.eager import torch_logits

    ids = [3, 7, 11, 5]
    before = torch_logits(model, ids)
    apply_layout(model, "transposed", "bhdt")
    torch.testing.assert_close(torch_logits(model, ids), before)


def test_profile_records_where_a_step_spends_its_time(tmp_path):

    run_profiles(["qwen3_5-tiny"], str(tmp_path), str(tmp_path))
    record = json.loads((tmp_path / "bench-profile-qwen3_5-tiny.json").read_text())
    results = record["results"]
    for function in ("decode", "prefill"):
        ops = {row["op"]: row for row in results[function]}
        assert "coreai.broadcasting_batch_matmul" in ops  # the projections ran
        assert all(row["calls"] > 0 and row["ms"] >= 0 for row in ops.values())
    assert [row["decode step on"] for row in results["cores"]] == [
        "Core AI runtime",
        "torch eager",
    ]
    assert all(0 < row["cores busy"] < 8 for row in results["cores"])
    assert [row["torch threads"] for row in results["bandwidth"]][1] == 1
    assert not list(tmp_path.glob("*.aimodel"))  # the asset is removed


def test_chunk_sweep_records_prefill_at_each_chunk(tmp_path):
    from zoo.bench.__main__ import run_chunks

    run_chunks(["qwen3_5-tiny"], [2, 4], str(tmp_path), 1, str(tmp_path))
    record = json.loads((tmp_path / "bench-chunks-qwen3_5-tiny.json").read_text())
    rows = record["results"]["rows"]
    assert [row["chunk"] for row in rows] == [2, 4]
    for row in rows:
        assert row["prefill tok/s"] > 0 and row["eager prefill tok/s"] > 0
        ratio = row["prefill tok/s"] / row["eager prefill tok/s"]
        assert row["runtime / eager (prefill tok/s)"] == pytest.approx(ratio, abs=0.01)
    assert not list(tmp_path.glob("*.aimodel"))


def test_matmul_bench_times_every_formulation_at_every_row_count(tmp_path):
    from zoo.bench.__main__ import run_matmul
    from zoo.bench.matmul import FORMULATIONS

    rows = run_matmul(1, str(tmp_path), inputs=64, outputs=96, rows=(1, 4))
    assert [(r["formulation"], r["rows (T)"]) for r in rows] == [
        (name, count) for name in FORMULATIONS for count in (1, 4)
    ]
    assert all(r["runtime ms"] > 0 and r["eager ms"] > 0 for r in rows)
    record = json.loads((tmp_path / "bench-matmul.json").read_text())
    assert record["results"]["rows"] == rows


def test_matmul_formulations_compute_the_same_projection():
    from zoo.bench.matmul import CHANNELS_FIRST, FORMULATIONS, _Projection

    weight, x = torch.randn(96, 64), torch.randn(1, 5, 64)
    expected = x @ weight.t()
    for name, (store, forward) in FORMULATIONS.items():
        if name in CHANNELS_FIRST:  # activations [in, T] in, [out, T] out
            got = _Projection(store(weight), forward)(x[0].t()).t()[None]
        else:
            got = _Projection(store(weight), forward)(x)
        torch.testing.assert_close(got, expected)


def test_linux_default_chunk_is_what_the_committed_sweep_chooses():
    """The platform default (`zoo.core.model.layout.DEFAULT_CHUNK`) follows the measurement."""
    from pathlib import Path

    from zoo.bench.chunks import chunk_choice
    from zoo.core.model.layout import DEFAULT_CHUNK

    record = Path(__file__).resolve().parents[3] / "docs/records/bench-chunks-qwen3_5-0.8b.json"
    rows = json.loads(record.read_text())["results"]["rows"]
    assert DEFAULT_CHUNK["linux"] == chunk_choice(rows)


def test_chunk_choice_weighs_the_remainder_that_decode_reads():
    from zoo.bench.chunks import chunk_choice, first_token_s

    rows = [
        {"chunk": 8, "prefill tok/s": 4.0, "decode ms": 500.0},
        {"chunk": 64, "prefill tok/s": 6.0, "decode ms": 500.0},
    ]
    assert first_token_s(rows[1], 16) == 8.0  # 16 decode steps: no whole chunk
    assert first_token_s(rows[0], 20) == 16 / 4.0 + 4 * 0.5
    assert chunk_choice(rows, prompts=(512,)) == 64
    assert chunk_choice(rows, prompts=(16, 512)) == 8  # 64 doubles a short prompt's wait


def test_ranges_bench_times_prefill_over_layer_ranges(tmp_path):
    from zoo.bench.ranges import ranges_cell
    from zoo.core.isolate import run_isolated

    outcome = run_isolated(ranges_cell, "qwen3_5-tiny", 2, 4, str(tmp_path), (4, 16), timeout=600)
    assert outcome.ok, outcome.summary()
    row = outcome.result
    assert (row["ranges"], row["chunk"], row["layers per range"]) == (2, 4, "2, 2")
    assert row["prefill tok/s"] > 0 and row["eager prefill tok/s"] > 0
    assert row["first token ms (4)"] > 0 and row["decode ms"] > 0
    assert row["prefill runtime / eager"] == pytest.approx(
        row["prefill tok/s"] / row["eager prefill tok/s"], rel=0.02
    )
    assert not list(tmp_path.glob("*.aimodel"))  # each cell removes its asset


def test_the_host_bench_splits_a_step_into_the_runtime_call_and_the_host(tmp_path):
    """`python -m zoo.bench.host` at a tiny shape: every figure it records is there."""
    from zoo.bench.host import host_cell

    row = host_cell("qwen3_5-tiny", str(tmp_path), chunk=4, prompt_tokens=32, count=8)
    step, call = (
        row["decode step ms (Generator.feed)"],
        row["decode call ms (inputs built beforehand)"],
    )
    assert step > 0 and call > 0
    assert row["host ms per step"] == pytest.approx(step - call, abs=0.02)
    assert row["collector runs in steps"] >= 0 and row["prefill s (32 tokens)"] > 0
    assert not list(tmp_path.iterdir())  # the asset is removed


def test_a_mixture_of_experts_is_benched_chosen_against_all(tmp_path):
    """The MoE shape's cells: the default (every expert, the platform's layout), then the
    chosen experts only (GatherMM) and every expert weighted, in the same layout."""
    results = run_bench(["qwen3_moe-tiny"], str(tmp_path), repeats=1)
    cells = {cell["layout"]: cell for cell in results["qwen3_moe-tiny"]["cells"]}
    assert list(cells) == ["default", "chosen experts (GatherMM)", "every expert, weighted"]
    assert all(cell["decode ms"] > 0 and cell["eager decode ms"] > 0 for cell in cells.values())
