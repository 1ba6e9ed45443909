"""A checkpoint reads only its own folder, an asset only its own files, its metadata is
covered by a hash, and an export never deletes what it reads (issue 38's first class)."""

from __future__ import annotations

import json
import shutil

import pytest

from zoo import export_model, get_entry
from zoo.core.asset.decode_spec import DecodeSpec
from zoo.core.asset.opened import AssetError, verify_asset
from zoo.core.export.plan import plan_export
from zoo.reference import make_tiny_checkpoint

pytestmark = pytest.mark.export  # the suite's tiers: pyproject.toml's markers


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("confined")
    checkpoint = make_tiny_checkpoint("llama", root / "ck")
    asset = export_model(get_entry("llama").load(checkpoint, capacity=32), root / "a.aimodel")
    return root, checkpoint, asset


def test_a_shard_index_naming_a_file_outside_the_checkpoint_is_refused(made, tmp_path):
    _, checkpoint, _ = made
    (tmp_path / "other").mkdir()
    shutil.copy(checkpoint / "model.safetensors", tmp_path / "other" / "evil.safetensors")
    ck = tmp_path / "ck"
    ck.mkdir()
    shutil.copy(checkpoint / "config.json", ck)
    index = {"weight_map": {"model.embed_tokens.weight": "../other/evil.safetensors"}}
    (ck / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="outside .* reads only the files of the folder"):
        get_entry("llama").load(ck, capacity=32)


def test_a_sidecar_name_outside_the_asset_is_refused(made):
    _, _, asset = made
    spec = DecodeSpec.of_asset(asset)
    spec.sidecars = {"rows": {"file": "../../../../etc/passwd", "rows": 1, "width": 1}}
    with pytest.raises(ValueError, match="outside"):
        spec.open_sidecars(asset)


@pytest.mark.parametrize("field,value", [("capacity", 5000), ("chunk", 3), ("vocab_size", 7)])
def test_an_edited_metadata_json_is_refused_before_the_runtime(made, tmp_path, field, value):
    _, _, asset = made
    edited = shutil.copytree(asset, tmp_path / "edited.aimodel")
    metadata = json.loads((edited / "metadata.json").read_text())
    metadata["creatorDefinedMetadata"]["zoo"]["decode"][field] = value
    (edited / "metadata.json").write_text(json.dumps(metadata))
    verify_asset(asset)  # the original passes
    with pytest.raises(AssetError, match="metadata.json was edited since the export"):
        verify_asset(edited)


def test_a_checkpoint_inside_the_output_is_never_overwritten(made, tmp_path):
    _, checkpoint, _ = made
    output = tmp_path / "out.aimodel"
    shutil.copytree(checkpoint, output / "mycheckpoint")
    with pytest.raises(ValueError, match="is inside .*write it elsewhere"):
        plan_export(output / "mycheckpoint", output, overwrite=True)
    assert (output / "mycheckpoint" / "model.safetensors").is_file()


def test_an_asset_of_an_older_zoo_is_named_as_such(made, tmp_path):
    _, _, asset = made
    older = shutil.copytree(asset, tmp_path / "older.aimodel")
    metadata = json.loads((older / "metadata.json").read_text())
    del metadata["creatorDefinedMetadata"]["zoo"]["sha256"]
    (older / "metadata.json").write_text(json.dumps(metadata))
    with pytest.raises(AssetError, match="exported by an older zoo .* export it again"):
        verify_asset(older)


def test_overwrite_replaces_a_zoo_asset_but_never_a_folder_of_the_user_s_inside_it(made, tmp_path):
    _, checkpoint, asset = made
    target = shutil.copytree(asset, tmp_path / "t.aimodel")
    (target / "my-notes").mkdir()
    (target / "my-notes" / "todo.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="holds my-notes, which the zoo did not write"):
        plan_export(checkpoint, target, overwrite=True)
    assert (target / "my-notes" / "todo.txt").read_text() == "keep me"
    shutil.rmtree(target / "my-notes")
    assert plan_export(checkpoint, target, overwrite=True).overwrite  # a zoo asset alone
