"""The per-layer-embedding table as an int8 sidecar: out of the graph, looked up by the host."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from zoo.core.asset.opened import AssetError, read_metadata
from zoo.core.asset.sidecar import SidecarTable
from zoo.core.host.generator import Generator
from zoo.core.model.eager import torch_logits
from zoo.gemma4 import export_gemma4, load_gemma4
from zoo.reference import greedy_reference, reference_model
from zoo.testing import TEST_LAYOUTS

from .conftest import CAPACITY, CHUNK

pytestmark = pytest.mark.runtime  # the suite's tiers: pyproject.toml's markers

PROMPT = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]
SIDECAR = "per_layer_embeddings.int8.safetensors"


@pytest.fixture(scope="module")
def sidecar_asset(checkpoints, tmp_path_factory):
    model = load_gemma4(checkpoints["kv-sharing"], "runtime-index", CAPACITY, ple_sidecar=True)
    path = tmp_path_factory.mktemp("sidecar") / "ple.aimodel"
    # the layout of the in-graph asset it is compared with, so only the table differs
    layout = TEST_LAYOUTS["default"]
    return model, export_gemma4(
        model, path, chunk=CHUNK, checkpoint=checkpoints["kv-sharing"], **layout
    )


def runtime_rows(asset, ids):
    with Generator(asset) as generator:
        return np.stack([generator.feed([token]) for token in ids])


def test_the_table_leaves_the_graph_for_an_int8_file_in_the_asset(sidecar_asset, assets):
    model, asset = sidecar_asset
    assert not hasattr(model, "embed_tokens_per_layer")
    spec = read_metadata(asset)["decode"]
    config = model.config
    width = config.num_hidden_layers * config.hidden_size_per_layer_input
    assert spec["sidecars"]["per_layer_embeddings"] == {
        "file": SIDECAR,
        "rows": config.vocab_size_per_layer_input,
        "width": width,
    }
    assert SIDECAR in read_metadata(asset)["files"]  # in the manifest: checked on load
    table = SidecarTable(asset / SIDECAR)
    assert (table.rows, table.width) == (config.vocab_size_per_layer_input, width)
    in_graph = assets["kv-sharing", "runtime-index"]
    table_bytes = config.vocab_size_per_layer_input * width * 4
    saved = (in_graph / "main.mlirb").stat().st_size - (asset / "main.mlirb").stat().st_size
    assert abs(saved - table_bytes) < 0.05 * table_bytes  # the fp32 table left the program
    assert (asset / SIDECAR).stat().st_size < table_bytes / 3  # int8 + one scale per row


def test_the_runtime_computes_what_eager_computes_with_the_same_int8_rows(
    sidecar_asset, checkpoints
):
    model, asset = sidecar_asset
    eager = torch_logits(model, PROMPT)[0].numpy()
    assert np.abs(runtime_rows(asset, PROMPT) - eager).max() < 1e-4
    # int8 rows move the logits a little from the bf16 table's, and no greedy token
    fp32 = torch_logits(load_gemma4(checkpoints["kv-sharing"], "runtime-index", CAPACITY), PROMPT)
    assert 0 < np.abs(eager - fp32[0].numpy()).max() < 1e-2
    with Generator(asset) as generator:
        tokens = generator.generate(PROMPT, 8, stop_token_ids=[])
    assert tokens == greedy_reference(reference_model("gemma4", checkpoints["kv-sharing"]), PROMPT)


def test_a_damaged_sidecar_is_refused_before_the_runtime(sidecar_asset, tmp_path):
    import shutil

    _, asset = sidecar_asset
    copy = tmp_path / "copy.aimodel"
    shutil.copytree(asset, copy)
    data = bytearray((copy / SIDECAR).read_bytes())
    data[-1] ^= 0xFF
    (copy / SIDECAR).write_bytes(data)
    with pytest.raises(AssetError, match="per_layer_embeddings.*altered"):
        Generator(copy)


def test_a_sidecar_lookup_outside_the_table_is_refused(sidecar_asset):
    _, asset = sidecar_asset
    table = SidecarTable(asset / SIDECAR)
    with pytest.raises(ValueError, match="outside the 128 rows"):
        table.lookup(np.array([[3, 128]]))
    with torch.no_grad():
        assert table.lookup(np.array([[3, 4]])).shape == (1, 2, table.width)


@pytest.mark.parametrize(
    "compress,choice,wanted",
    [("int8", "auto", True), ("palettize4", "auto", True), ("fp32", "auto", False)]
    + [("fp16", "auto", False), ("int8", "off", False), ("fp32", "on", True)],
)
def test_sidecar_auto_means_on_for_compressed_weights(compress, choice, wanted, checkpoints):
    from zoo.core.export.plan import plan_export

    plan = plan_export(checkpoints["kv-sharing"], "x.aimodel", compress=compress, sidecar=choice)
    assert plan.sidecar is wanted


def test_the_cli_keeps_the_table_out_of_a_compressed_export(checkpoints, tmp_path):
    out = tmp_path / "cli.aimodel"
    command = [sys.executable, "-m", "zoo.gemma4", "export", str(checkpoints["kv-sharing"])]
    command += [str(out), "--capacity", "32", "--chunk", "4", "--compress", "int8"]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (out / SIDECAR).exists() and read_metadata(out)["decode"]["sidecars"]
    generate = [sys.executable, "-m", "zoo.gemma4", "generate", str(out), "--prompt-ids", "2,17"]
    done = subprocess.run([*generate, "--max-new-tokens", "3"], capture_output=True, text=True)
    assert done.returncode == 0 and len(done.stdout.split()) == 3, done.stderr
