from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from torch import nn

from zoo.core.asset.opened import read_metadata
from zoo.core.export.convert import ExportError, export

from .conftest import Accumulate, example_inputs

pytestmark = pytest.mark.export  # the suite's tiers: pyproject.toml's markers


class Scale(nn.Module):
    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.factor


class DataDependentBranch(nn.Module):
    """torch.export cannot trace a branch on tensor data."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x * 2
        return x


def export_scale(path, factor: float = 2.0, **kwargs):
    return export(
        Scale(factor), (torch.ones(4),), path, input_names=["x"], output_names=["y"], **kwargs
    )


def test_metadata_records_producer_entry_points_and_states(tiny_asset):
    metadata = read_metadata(tiny_asset)
    packages = metadata["producer"]["packages"]
    assert packages["coreai-torch"] == "0.4.3"
    assert packages["coreai-core"] == "1.0.0b3"
    assert packages["torch"].startswith("2.13.0")
    assert metadata["producer"]["platform"]
    assert metadata["entry_points"]["main"] == {
        "inputs": ["x", "ids"],
        "outputs": ["acc_out", "picked"],
        "states": ["acc"],
    }
    assert metadata["entry_points"]["read"]["states"] == ["acc"]
    # stored in the asset's own metadata.json, where any Core AI tool can read it
    on_disk = json.loads((tiny_asset / "metadata.json").read_text())
    assert on_disk["creatorDefinedMetadata"]["zoo"] == metadata


def test_accepts_str_and_path(tmp_path):
    assert export_scale(str(tmp_path / "a.aimodel")).is_dir()
    assert export_scale(tmp_path / "b.aimodel").is_dir()


def test_refuses_to_replace_an_existing_asset(tmp_path):
    path = export_scale(tmp_path / "s.aimodel", 2.0)
    before = (path / "main.hash").read_bytes()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export_scale(path, 3.0)
    assert (path / "main.hash").read_bytes() == before


def test_overwrite_replaces_and_leaves_no_staging_directory(tmp_path):
    path = export_scale(tmp_path / "s.aimodel", 2.0)
    before = (path / "main.hash").read_bytes()
    export_scale(path, 3.0, overwrite=True)
    assert (path / "main.hash").read_bytes() != before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.aimodel"]


def test_failed_export_leaves_nothing_and_keeps_the_existing_asset(tmp_path):
    with pytest.raises(ExportError, match="entry point 'main' failed to export"):
        export(
            DataDependentBranch(),
            (torch.ones(4),),
            tmp_path / "bad.aimodel",
            input_names=["x"],
            output_names=["y"],
        )
    assert list(tmp_path.iterdir()) == []

    path = export_scale(tmp_path / "s.aimodel")
    before = (path / "main.hash").read_bytes()
    with pytest.raises(ExportError):
        export(
            DataDependentBranch(),
            (torch.ones(4),),
            path,
            input_names=["x"],
            output_names=["y"],
            overwrite=True,
        )
    assert (path / "main.hash").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.aimodel"]


def test_path_must_end_in_aimodel(tmp_path):
    with pytest.raises(ValueError, match=r"must end in \.aimodel"):
        export_scale(tmp_path / "model.onnx")


def test_one_example_input_per_forward_argument(tmp_path):
    with pytest.raises(ValueError, match="one example tensor per forward argument"):
        export(
            Accumulate(),
            example_inputs()[:2],
            tmp_path / "a.aimodel",
            input_names=["x", "ids"],
            output_names=["acc_out", "picked"],
            state_names=["acc"],
        )


def test_entry_point_names_must_be_unique(tmp_path):
    from zoo.core.export.convert import EntryPoint

    twin = EntryPoint("main", Scale(1.0), (torch.ones(4),), ["x"], ["y"])
    with pytest.raises(ValueError, match="unique"):
        export_scale(tmp_path / "a.aimodel", extra_entry_points=[twin])


def test_read_metadata_of_a_foreign_asset(tmp_path):
    import coreai_torch
    from coreai_torch import TorchConverter

    converter = TorchConverter(mode=TorchConverter.Mode.RELEASE)
    converter.add_pytorch_module(
        Scale(2.0),
        export_fn=lambda m: torch.export.export(m, (torch.ones(4),)).run_decompositions(
            coreai_torch.get_decomp_table()
        ),
        input_names=["x"],
        output_names=["y"],
    )
    path = tmp_path / "foreign.aimodel"
    converter.to_coreai().save_asset(path)
    with pytest.raises(ValueError, match="not exported by the zoo"):
        read_metadata(path)


# A child that overwrites an asset and is SIGKILLed right after the old asset is moved
# aside (fault injection at the one moment an overwrite holds no asset at the destination).
KILLED_BETWEEN_RENAMES = """
import os, signal, sys
import torch
from zoo.core.tests.test_export import export_scale

rename = os.rename
def rename_then_die(source, destination):
    rename(source, destination)
    if os.path.basename(destination) == sys.argv[2]:
        os.kill(os.getpid(), signal.SIGKILL)
os.rename = rename_then_die
export_scale(sys.argv[1], 3.0, overwrite=True)
"""


@pytest.mark.parametrize("moment", ["previous", "s.aimodel"])
def test_an_overwrite_killed_between_its_renames_loses_nothing(tmp_path, moment):
    """Killed after the old asset went aside ('previous'): it is put back as it was; after
    the new one went into place: the new one stays. Neither is ever left missing."""
    path = export_scale(tmp_path / "s.aimodel", 2.0)
    before = (path / "main.hash").read_bytes()
    child = [sys.executable, "-c", KILLED_BETWEEN_RENAMES, str(path), moment]
    done = subprocess.run(child, capture_output=True, text=True, timeout=300)
    assert done.returncode == -9, done.stderr
    # the watcher shares the child's stderr: its line is in, so its work is done
    assert ("put back as it was" if moment == "previous" else "had already replaced") in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.aimodel"]
    after = (path / "main.hash").read_bytes()
    assert (after == before) if moment == "previous" else (after != before)
    read_metadata(path)  # a whole asset either way
