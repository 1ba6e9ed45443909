"""What an asset's metadata keeps through save_asset and a reload, on the
pinned toolchain (coreai-torch 0.4.3, coreai-core 1.0.0b3).

Run: python snippets/asset_metadata.py
"""

# --8<-- [start:save]
import json
import tempfile
from pathlib import Path

import coreai_torch
import torch
from coreai.authoring.asset import AIModelAsset, AIModelAssetMetadata
from coreai_torch import TorchConverter


class Scale(torch.nn.Module):
    def forward(self, x):
        return x * 2.0


converter = TorchConverter(mode=TorchConverter.Mode.RELEASE)
converter.add_pytorch_module(
    Scale(),
    export_fn=lambda m: torch.export.export(
        m, (torch.ones(4),)
    ).run_decompositions(coreai_torch.get_decomp_table()),
    input_names=["x"],
    output_names=["y"],
)
metadata = AIModelAssetMetadata()
metadata.author, metadata.license = "the zoo", "Apache-2.0"
metadata.model_description = "doubles x"
metadata.set_custom("zoo", {"stop_token_ids": [1, 106], "zero": 0})
scratch = tempfile.TemporaryDirectory()  # removed, with the assets, at exit
path = Path(scratch.name) / "scale.aimodel"
converter.to_coreai().save_asset(path, metadata=metadata)

stored = json.loads((path / "metadata.json").read_text())
print("metadata.json:", stored)
# --8<-- [end:save]

# --8<-- [start:reload]
loaded = AIModelAsset.load(path).metadata
print(
    "author, license, description:",
    loaded.author,
    loaded.license,
    loaded.model_description,
)
print("custom, as coreai-core reads it:", loaded.creator_defined_metadata)
assert (stored["author"], stored["license"]) == ("the zoo", "Apache-2.0")
assert stored["creatorDefinedMetadata"]["zoo"]["stop_token_ids"] == [1, 106]
assert loaded.creator_defined_metadata["zoo"]["stop_token_ids"] == [True, 106]
# --8<-- [end:reload]

# --8<-- [start:zoo]
from zoo import export_module as export
from zoo import read_metadata

asset = export(
    Scale(),
    (torch.ones(4),),
    path.parent / "zoo.aimodel",
    input_names=["x"],
    output_names=["y"],
)
zoo = read_metadata(asset)  # metadata.json read with json: ints stay ints
print(
    "provenance:",
    zoo["producer"]["packages"]["coreai-core"],
    zoo["producer"]["date"],
)
print("files checked before a load:", sorted(zoo["files"]))
# --8<-- [end:zoo]
