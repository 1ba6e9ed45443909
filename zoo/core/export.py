"""torch module -> saved `.aimodel` asset, through torch.export and coreai-torch.

The asset is written into a temporary directory beside its destination and renamed into
place, so a failed export never leaves half an asset, and an existing asset is only replaced
when the caller says `overwrite=True` (coreai-torch's own `save_asset` replaces silently).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from zoo.core.provenance import provenance

with warnings.catch_warnings():
    # coreai-torch compares torch's version with "2.13.0"; the local wheel is "2.13.0+cpu".
    warnings.filterwarnings("ignore", message="coreai-torch has only been validated")
    import coreai_torch
    from coreai_torch import TorchConverter

# torch.export's own pytree internals warn on every export; nothing a caller can change.
warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")

log = logging.getLogger(__name__)

METADATA_KEY = "zoo"


class ExportError(RuntimeError):
    """torch.export or the Core AI conversion rejected the module."""


@dataclass
class EntryPoint:
    """One function of an asset: a module, its example inputs and the names of its I/O.

    `example_inputs` are the module's forward arguments in order. Arguments the module
    mutates in place are states: name them in `state_names`, the others in `input_names`.
    """

    name: str
    module: torch.nn.Module
    example_inputs: tuple[torch.Tensor, ...]
    input_names: Sequence[str]
    output_names: Sequence[str]
    state_names: Sequence[str] = ()
    dynamic_shapes: Mapping[str, Any] | Sequence[Any] | None = None
    description: dict = field(default_factory=dict)


def export(
    module: torch.nn.Module,
    example_inputs: tuple[torch.Tensor, ...],
    path: str | os.PathLike,
    *,
    input_names: Sequence[str],
    output_names: Sequence[str],
    state_names: Sequence[str] = (),
    dynamic_shapes: Mapping[str, Any] | Sequence[Any] | None = None,
    entry_point: str = "main",
    extra_entry_points: Sequence[EntryPoint] = (),
    overwrite: bool = False,
    extra_metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Export `module` (and any extra entry points) to the `.aimodel` asset at `path`.

    Returns the asset's path. Raises `FileExistsError` if it exists and `overwrite` is
    false, `ExportError` if torch.export or the conversion fails.
    """
    main = EntryPoint(
        entry_point,
        module,
        tuple(example_inputs),
        input_names,
        output_names,
        state_names,
        dynamic_shapes,
    )
    return export_entry_points(
        [main, *extra_entry_points], path, overwrite=overwrite, extra_metadata=extra_metadata
    )


def export_entry_points(
    entry_points: Sequence[EntryPoint],
    path: str | os.PathLike,
    *,
    overwrite: bool = False,
    extra_metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Export several functions into one asset; functions may share state names."""
    path = _check_destination(Path(path), overwrite)
    names = [e.name for e in entry_points]
    if not entry_points or len(set(names)) != len(names):
        raise ValueError(f"entry point names must be unique and non-empty, got {names}")

    started = time.perf_counter()
    converter = TorchConverter(mode=TorchConverter.Mode.RELEASE)
    for entry in entry_points:
        log.info("exporting %s: torch.export", entry.name)
        _check_example_inputs(entry)
        try:
            converter.add_pytorch_module(
                entry.module.eval(),
                export_fn=_export_fn(entry),
                input_names=list(entry.input_names),
                output_names=list(entry.output_names),
                state_names=list(entry.state_names),
                entrypoint_name=entry.name,
            )
        except Exception as exc:
            raise ExportError(f"entry point {entry.name!r} failed to export: {exc}") from exc
    log.info("converting %d entry point(s) to Core AI", len(entry_points))
    try:
        program = converter.to_coreai()
    except Exception as exc:
        raise ExportError(f"Core AI conversion failed: {exc}") from exc

    metadata = {
        "producer": provenance(),
        "entry_points": {
            e.name: {
                "inputs": list(e.input_names),
                "outputs": list(e.output_names),
                "states": list(e.state_names),
                **e.description,
            }
            for e in entry_points
        },
        **(extra_metadata or {}),
    }
    _save_atomically(program, path, metadata, overwrite)
    log.info("saved %s in %.1f s", path, time.perf_counter() - started)
    return path


def read_metadata(path: str | os.PathLike) -> dict:
    """What `export` recorded in the asset: producer versions, entry points, states."""
    from coreai.authoring.asset import AIModelAsset

    custom = AIModelAsset.load(Path(path)).metadata.creator_defined_metadata
    if METADATA_KEY not in custom:
        raise KeyError(f"{path} was not exported by zoo.core.export (no {METADATA_KEY!r} key)")
    return custom[METADATA_KEY]


def program_text(path: str | os.PathLike) -> dict[str, str]:
    """The Core AI IR of each function of an asset, as text (to look for ops in it)."""
    from coreai.authoring.asset import AIModelAsset

    text = str(AIModelAsset.load(Path(path)).program)
    starts = [(m.start(), m.group(1)) for m in re.finditer(r"coreai\.graph @(\w+)", text)]
    ends = [start for start, _ in starts[1:]] + [len(text)]
    return {name: text[start:end] for (start, name), end in zip(starts, ends, strict=True)}


def _check_destination(path: Path, overwrite: bool) -> Path:
    if path.suffix != ".aimodel":
        raise ValueError(f"an asset path must end in .aimodel, got {str(path)!r}")
    if path.exists() and not overwrite:
        raise FileExistsError(
            f"{path} already exists; pass overwrite=True to replace it, or choose another path"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _check_example_inputs(entry: EntryPoint) -> None:
    expected = len(entry.input_names) + len(entry.state_names)
    if len(entry.example_inputs) != expected:
        raise ValueError(
            f"entry point {entry.name!r}: {len(entry.example_inputs)} example inputs, but "
            f"{len(entry.input_names)} input names + {len(entry.state_names)} state names; "
            "give one example tensor per forward argument"
        )


def _export_fn(entry: EntryPoint):
    def export_fn(module: torch.nn.Module):
        # Export on clones: the trace may run the module, which mutates its state arguments.
        args = tuple(t.clone() for t in entry.example_inputs)
        program = torch.export.export(module, args, dynamic_shapes=entry.dynamic_shapes)
        return program.run_decompositions(coreai_torch.get_decomp_table())

    return export_fn


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_without_none(v) for v in value]
    return value


def _save_atomically(program, path: Path, metadata: dict, overwrite: bool) -> None:
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent))
    try:
        fresh = staging / path.name
        asset = program.save_asset(fresh)
        stored = _without_none(metadata)  # the asset's metadata has no null
        asset.update_metadata(lambda m: m.set_custom(METADATA_KEY, stored))
        if path.exists():
            if not overwrite:  # appeared while we were exporting
                raise FileExistsError(f"{path} appeared during the export; nothing replaced")
            previous = staging / "previous"
            os.rename(path, previous)
            try:
                os.rename(fresh, path)
            except BaseException:
                os.rename(previous, path)
                raise
        else:
            os.rename(fresh, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
