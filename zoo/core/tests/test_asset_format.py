"""Assets on disk across versions of the zoo: one opened asset (metadata.json read once),
components, and an asset written by an earlier zoo still decoding the same tokens."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from zoo.core.asset.decode_spec import DecodeSpec
from zoo.core.asset.opened import AssetError, OpenedAsset, open_asset
from zoo.core.host.generator import Generator

pytestmark = pytest.mark.export  # the suite's tiers: pyproject.toml's markers

FIXTURES = Path(__file__).parent / "fixtures"
# exported by main at 86cd0cf (before components): a tiny Llama, capacity 32, chunk 4, and
# the tokens it decoded then
EARLIER = FIXTURES / "tiny-llama-86cd0cf.aimodel"


@pytest.fixture(scope="module")
def tiny_llama_asset(tmp_path_factory) -> Path:
    """The same checkpoint (seed 0) exported by this zoo, as the fixture was."""
    from zoo.core.export.plan import plan_export
    from zoo.core.export.run import run_plan
    from zoo.reference import make_tiny_checkpoint

    folder = tmp_path_factory.mktemp("format")
    checkpoint = make_tiny_checkpoint("llama", folder / "ck")
    return run_plan(plan_export(checkpoint, folder / "now.aimodel", capacity=32, chunk=4))


def test_an_asset_of_an_earlier_zoo_decodes_the_tokens_it_did_then():
    recorded = json.loads((FIXTURES / "tiny-llama-86cd0cf.json").read_text())
    assert (
        "components"
        not in json.loads((EARLIER / "metadata.json").read_text())["creatorDefinedMetadata"]["zoo"]
    )
    with Generator(EARLIER) as generator:
        tokens = generator.generate(recorded["prompt_ids"], recorded["max_new_tokens"])
    assert [int(t) for t in tokens] == recorded["tokens"]


def test_an_earlier_asset_reads_as_one_decoder_component():
    opened = open_asset(EARLIER)
    assert opened.components == {
        "decoder": {
            "functions": ["decode", "prefill"],
            "states": sorted(f"{kv}_cache_{n}" for kv in "kv" for n in range(4)),
            "sidecars": [],
        }
    }
    assert opened.capacity == 32 and opened.checked


def test_a_new_asset_lists_its_components(tiny_llama_asset):
    section = json.loads((tiny_llama_asset / "metadata.json").read_text())
    stored = section["creatorDefinedMetadata"]["zoo"]["components"]
    assert list(stored) == ["decoder"]
    assert stored["decoder"]["functions"] == ["decode", "prefill"]
    # what an earlier asset is read as is what a new one says of itself
    assert open_asset(tiny_llama_asset).components == stored == open_asset(EARLIER).components
    recorded = json.loads((FIXTURES / "tiny-llama-86cd0cf.json").read_text())
    with Generator(tiny_llama_asset) as generator:  # and it decodes as the earlier one did
        tokens = generator.generate(recorded["prompt_ids"], recorded["max_new_tokens"])
    assert [int(t) for t in tokens] == recorded["tokens"]


def test_one_opened_asset_is_reused_not_read_again(tmp_path, monkeypatch):
    asset = shutil.copytree(EARLIER, tmp_path / "copy.aimodel")
    opened = open_asset(asset, verify=False)
    assert not opened.checked
    reads = []

    def counting(method):
        def read(path: Path, *args, **kwargs):
            if path.name == "metadata.json":
                reads.append(path)
            return method(path, *args, **kwargs)

        return read

    for name in ("read_bytes", "read_text", "open"):
        monkeypatch.setattr(Path, name, counting(getattr(Path, name)))
    spec = DecodeSpec.of_asset(opened)
    with Generator(opened) as generator:
        assert generator.spec == spec and generator.asset.checked
    assert reads == []  # the spec, the files' check and the load took the object


def test_the_files_are_checked_when_an_opened_asset_loads(tmp_path):
    asset = shutil.copytree(EARLIER, tmp_path / "copy.aimodel")
    opened = open_asset(asset, verify=False)  # read before the file is damaged
    with open(asset / "main.mlirb", "r+b") as program:
        program.seek(100)
        program.write(b"\xff")
    with pytest.raises(AssetError, match="main.mlirb was altered"):
        Generator(opened)
    assert isinstance(opened, OpenedAsset)


OPENS = """
import collections, json, os, sys
opened = collections.Counter()

def count(event, args):
    if event == "open" and isinstance(args[0], (str, os.PathLike)):
        path = os.path.abspath(args[0])
        if os.path.basename(path) in ("config.json", "metadata.json"):
            opened[path] += 1

sys.addaudithook(count)
from zoo.command import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "opened": opened}))
"""


def opens_of(*argv: str) -> dict:
    """What `zoo ARGV` opened (Python's audit hook: the zoo's reads, not the runtime's own
    native read of the asset)."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", OPENS, *argv], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_zoo_generate_reads_the_metadata_once_and_export_the_config_once(tmp_path):
    asset = shutil.copytree(EARLIER, tmp_path / "copy.aimodel")
    got = opens_of("generate", str(asset), "--prompt", "hi", "--max-new-tokens", "2")
    assert got["opened"] == {str(asset / "metadata.json"): 1}
    from zoo.reference import make_tiny_checkpoint

    checkpoint = make_tiny_checkpoint("llama", tmp_path / "ck")
    got = opens_of("export", str(checkpoint), str(tmp_path / "out.aimodel"), "--capacity", "32")
    assert got["opened"][str(checkpoint / "config.json")] == 1, got
