"""Exports larger than memory: range by range, one part per layer range.

A 20-30B mixture of experts holds 40-120 GB of float32 weights: more than a 16-24 GB machine
can load, and the converter holds every function's weights until it writes the program
(`zoo.core.export.convert`). So a streamed export (`zoo export --stream`, `ExportPlan.streamed`)
builds each layer range of the decoder from that range's tensors only (read lazily from the
safetensors files, compressed as they are read), converts and writes it as a complete
asset of its own, frees it, and goes on: peak memory follows the largest range, not the
model. The first range also reads the embeddings, the last the final norm and head.

The parts sit inside one asset folder, whose metadata.json holds the decode spec, the
tokenizer files and each part's metadata sha256; `zoo.core.host.runtime.Model` loads the parts
together and the host calls their functions in order, as it does the layer ranges of one
asset (`zoo.core.export.ranges`). Entries whose ranges share states or lookup tables (Gemma 4's
KV-shared layers and per-layer embeddings) export in one piece.
"""

from __future__ import annotations

import gc
import json
import shutil
from collections.abc import Callable
from pathlib import Path

from zoo.core.asset.opened import METADATA_KEY, component_of, file_digest, sealed
from zoo.core.checkpoint.weights import layer_of
from zoo.core.io.progress import still_working

PART = "range-{}.aimodel"


def range_tensors(start: int, stop: int, layers: int, tied: bool = False) -> Callable[[str], bool]:
    """Which tensors (our names) the range [start, stop) of `layers` computes with: its
    layers'; the embedding for the first (and the last, when the head is `tied` to it), the
    final norm and head for the last, any other tensor outside the layers for both."""

    def read(name: str) -> bool:
        layer = layer_of(name)
        if layer is not None:
            return start <= layer < stop
        if name.startswith(("norm.", "lm_head.")):
            return stop == layers
        if name.startswith("embed_tokens."):
            return start == 0 or (tied and stop == layers)
        return start == 0 or stop == layers

    return read


def write_streamed(plan, progress: Callable[[str], None] | None = None) -> Path:
    """Execute a streamed `ExportPlan`: each range loaded, compressed, converted, written
    and freed in turn, into one asset folder replaced atomically like any other."""
    from zoo.core.asset.tokenizer import generation_files
    from zoo.core.export.functions import write_asset
    from zoo.core.io.staging import replacing_directory
    from zoo.core.model.entry import get_entry, stores_a_head

    entry = get_entry(plan.entry)
    source = plan.checkpoint.resolve()
    tied = not stores_a_head(source, entry.checkpoint_name)  # the head reads the embedding
    parts: dict[str, str] = {}
    functions: dict = {}
    with replacing_directory(plan.output, plan.overwrite) as fresh:
        fresh.mkdir()
        for number, (start, stop) in enumerate(plan.ranges):
            if progress:
                progress(
                    f"range {number + 1} of {len(plan.ranges)} (layers {start} to {stop - 1}): "
                    f"reading, {plan.compress}, converting ..."
                )
            model = entry.load(
                source,
                plan.strategy,
                plan.capacity,
                compress=plan.compress,
                only=range_tensors(start, stop, plan.layers, tied),
                experts=plan.experts,
                config=plan.config,
            )
            name = PART.format(number)
            with still_working(progress, f"converting range {number + 1}"):
                part = write_asset(model, plan, fresh / name, part=number)
            del model
            gc.collect()  # this range's weights go before the next range's are read
            zoo = json.loads((part / "metadata.json").read_text())["creatorDefinedMetadata"]
            zoo = zoo[METADATA_KEY]  # each part carries the whole decode spec
            functions.update(zoo["entry_points"])
            parts[name] = file_digest(part / "metadata.json")
        for file in generation_files(source):
            shutil.copyfile(file, fresh / file.name)
        section = {
            "producer": zoo["producer"],
            "entry_points": functions,
            "decode": zoo["decode"],
            "parts": parts,
        }
        section["components"] = {"decoder": component_of(section)}  # every part's functions
        section = sealed(section, fresh)  # the tokenizer files listed (the parts: above)
        metadata = {"creatorDefinedMetadata": {METADATA_KEY: section}}
        (fresh / "metadata.json").write_text(json.dumps(metadata, indent=2))
    return plan.output
