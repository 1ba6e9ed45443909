"""torch module -> saved `.aimodel` asset, through torch.export and coreai-torch.

The asset is written into a temporary directory beside its destination and renamed into
place, so a failed export never leaves half an asset, and an existing asset is only replaced
when the caller says `overwrite=True` (coreai-torch's own `save_asset` replaces silently).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from zoo.core.asset.opened import METADATA_KEY, sealed
from zoo.core.export.session_cache import export_key, shared_export
from zoo.core.io.provenance import provenance
from zoo.core.io.shown import readable_bytes
from zoo.core.io.staging import replacing_directory

with warnings.catch_warnings():
    # coreai-torch compares torch's version with "2.13.0"; the local wheel is "2.13.0+cpu".
    warnings.filterwarnings("ignore", message="coreai-torch has only been validated")
    import coreai_torch
    from coreai_torch import TorchConverter

# torch.export's own pytree internals warn on every export; nothing a caller can change.
warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")

log = logging.getLogger(__name__)


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
    # rewrites the torch.export program before the conversion (e.g. an fp16 cast)
    program_pass: Callable[[torch.export.ExportedProgram], torch.export.ExportedProgram] | None = (
        None
    )


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
    extra_files: Mapping[str, Callable[[Path], Any]] | None = None,
) -> Path:
    """Export several functions into one asset; functions may share state names.

    `extra_files` maps a file name to a writer `write(path)`: files stored inside the asset
    beside the program (e.g. a sidecar table), listed in its manifest like the rest."""
    path = check_destination(path, overwrite)
    names = [e.name for e in entry_points]
    if not entry_points or len(set(names)) != len(names):
        raise ValueError(f"entry point names must be unique and non-empty, got {names}")
    _check_names(entry_points)
    _check_free_space(path, entry_points)
    key = export_key(entry_points, extra_metadata, extra_files)  # None outside a test session
    with shared_export(key, path) as shared:
        if shared.stored is not None:  # an identical export of this session: its asset
            with replacing_directory(path, overwrite) as fresh:
                shutil.copytree(shared.stored, fresh)
            return path
        _convert_and_save(entry_points, path, overwrite, extra_metadata, extra_files)
        shared.keep(path)
    return path


def _convert_and_save(
    entry_points: Sequence[EntryPoint],
    path: Path,
    overwrite: bool,
    extra_metadata: Mapping[str, Any] | None,
    extra_files: Mapping[str, Callable[[Path], Any]] | None,
) -> None:
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
    _save_atomically(program, path, metadata, overwrite, extra_files or {})
    log.info("saved %s in %.1f s", path, time.perf_counter() - started)


def program_text(path: str | os.PathLike) -> dict[str, str]:
    """The Core AI IR of each function of an asset, as text (to look for ops in it)."""
    from coreai.authoring.asset import AIModelAsset

    text = str(AIModelAsset.load(Path(path)).program)
    starts = [(m.start(), m.group(1)) for m in re.finditer(r"coreai\.graph @(\w+)", text)]
    ends = [start for start, _ in starts[1:]] + [len(text)]
    return {name: text[start:end] for (start, name), end in zip(starts, ends, strict=True)}


def check_destination(
    path: str | os.PathLike, overwrite: bool = False, source: str | os.PathLike | None = None
) -> Path:
    """Refuse, before any expensive work, an output that cannot or must not be written.

    It must end in .aimodel, not exist (unless `overwrite`), not be or sit inside the
    checkpoint `source` it is exported from (an overwrite would delete the weights), and its
    nearest existing parent directory must be writable.
    """
    path = Path(path)
    if path.suffix != ".aimodel":
        raise ValueError(f"an asset path must end in .aimodel, got {str(path)!r}")
    check_output_place(path, source)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"{path} exists and is not an asset directory; remove it first")
    if path.exists() and not overwrite:
        raise FileExistsError(
            f"{path} already exists; replace it with --overwrite (overwrite=True in Python), "
            "or choose another path"
        )
    if path.exists() and not written_by_the_zoo(path):
        raise FileExistsError(
            f"{path} exists and is not an asset the zoo wrote (no zoo metadata.json): "
            "--overwrite replaces only those; nothing was replaced, move it or choose "
            "another path"
        )
    if path.exists():
        kept = not_written_by_the_zoo(path)
        if kept:
            raise FileExistsError(
                f"{path} holds {', '.join(kept[:3])}{' ...' if len(kept) > 3 else ''}, which "
                "the zoo did not write there: --overwrite would delete it; move it out first"
            )
    return path


def not_written_by_the_zoo(path: Path) -> list[str]:
    """What an asset folder holds beside the files its manifest lists (a user's notes)."""
    try:
        zoo = json.loads((path / "metadata.json").read_text())["creatorDefinedMetadata"]
        section = zoo[METADATA_KEY]
        # a streamed asset lists its range-N.aimodel parts beside its files (zoo.core.export.stream)
        listed = set(section.get("files") or {}) | set(section.get("parts") or {})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []
    if not listed:  # an asset of a zoo before manifests: nothing to compare with
        return []
    return sorted(p.name for p in path.iterdir() if p.name not in listed | {"metadata.json"})


def written_by_the_zoo(path: Path) -> bool:
    """Whether a directory is an asset `export` wrote: its metadata.json says so."""
    try:
        metadata = json.loads((path / "metadata.json").read_text())
        return METADATA_KEY in (metadata.get("creatorDefinedMetadata") or {})
    except (OSError, ValueError, AttributeError):
        return False


def check_output_place(path: Path, source: str | os.PathLike | None) -> None:
    """An output folder must not be or sit inside the checkpoint `source` (an overwrite
    would delete the weights), and its nearest existing parent must be writable."""
    if source is not None:
        source_dir = Path(source).resolve()
        if path.resolve() == source_dir or source_dir in path.resolve().parents:
            raise ValueError(f"{path} is (inside) the checkpoint {source}: write it elsewhere")
        if path.resolve() in source_dir.parents:  # an overwrite would delete the checkpoint
            raise ValueError(f"the checkpoint {source} is inside {path}: write it elsewhere")
    parent = path.parent.resolve()
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(f"cannot write {path}: {parent} is not a writable directory")


def _check_names(entry_points: Sequence[EntryPoint]) -> None:
    for entry in entry_points:
        names = [*entry.input_names, *entry.output_names, *entry.state_names]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(
                f"entry point {entry.name!r}: {repeated} named more than once among its "
                "inputs, outputs and states; every name must be distinct"
            )


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
        program = program.run_decompositions(coreai_torch.get_decomp_table())
        return entry.program_pass(program) if entry.program_pass else program

    return export_fn


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_without_none(v) for v in value]
    return value


def _check_free_space(path: Path, entry_points: Sequence[EntryPoint]) -> None:
    """A full disk aborts the process inside the runtime's writer (LLVM ERROR): refuse first.

    An asset stores each distinct weight once (shared between entry points)."""
    tensors = {
        id(t): t.numel() * t.element_size()
        for entry in entry_points
        for t in [*entry.module.parameters(), *entry.module.buffers()]
    }
    check_room(path, int(sum(tensors.values()) * 1.1) + (16 << 20))


def check_room(path: Path, needed: int) -> None:
    """Refuse to write `needed` bytes at `path` on a disk with less free."""
    parent = path.parent.resolve()
    while not parent.exists():
        parent = parent.parent
    if os.statvfs(parent).f_blocks == 0:  # /proc, /sys: no disk behind them
        raise OSError(
            f"{parent} is a virtual filesystem (no disk behind it): choose an output "
            "directory on a disk"
        )
    free = shutil.disk_usage(parent).free
    if free < needed:
        raise OSError(
            f"not enough space for {path}: about {readable_bytes(needed)} needed, "
            f"{readable_bytes(free)} free in {parent}"
        )


def _save_atomically(
    program, path: Path, metadata: dict, overwrite: bool, extra_files: Mapping[str, Callable]
) -> None:
    with replacing_directory(path, overwrite) as fresh:
        asset = program.save_asset(fresh)
        for name, write in extra_files.items():
            write(fresh / name)
        stored = _without_none(metadata)  # the asset's metadata has no null
        asset.update_metadata(lambda m: m.set_custom(METADATA_KEY, stored))
        # Every file's size and hash, checked before the runtime opens the asset
        # (zoo.core.host.runtime.verify_asset): a damaged program kills the process.
        stored = sealed(stored, fresh)
        asset.update_metadata(lambda m: m.set_custom(METADATA_KEY, stored))
