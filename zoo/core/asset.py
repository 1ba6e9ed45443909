"""An exported asset on disk: checked before the runtime opens it (a damaged program kills
the process that loads it), and what its zoo metadata says."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from zoo.core.files import inside, read_json

METADATA_KEY = "zoo"  # the asset metadata's section the zoo writes


def decode_capacity(path: Path) -> int | None:
    """The KV capacity a zoo decoder was exported with, if the asset says."""
    try:
        metadata = json.loads((path / "metadata.json").read_text())
        return int(metadata["creatorDefinedMetadata"]["zoo"]["decode"]["capacity"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def asset_parts(path: Path) -> list[Path]:
    """The parts of an asset exported range by range (`zoo.core.stream`), in order: each a
    complete asset of its own inside this one; [] for an asset in one piece."""
    try:
        metadata = json.loads((path / "metadata.json").read_text())
        parts = metadata["creatorDefinedMetadata"][METADATA_KEY].get("parts") or {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []
    return [inside(path, name, f"{path}/metadata.json") for name in parts]


def read_metadata(path: str | os.PathLike) -> dict:
    """What `export` recorded in the asset: producer versions, entry points, states.

    Read from the asset's metadata.json with `json`: coreai-core 1.0.0b3's metadata reader
    turns a stored 1 into True (a stop id of 1 came back as `[true]`).
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(
            f"no asset at {path}: export one first (zoo export CHECKPOINT {path.name})"
        )
    metadata = read_json(path / "metadata.json", f": {path} is not a complete .aimodel asset")
    custom = metadata.get("creatorDefinedMetadata") or {}
    if METADATA_KEY not in custom:
        raise ValueError(
            f"{path} was not exported by the zoo (its metadata has no {METADATA_KEY!r})"
        )
    return custom[METADATA_KEY]


def file_digest(path: Path) -> str:
    """sha256 of a file, read in 8 MB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(8 << 20):
            digest.update(block)
    return digest.hexdigest()


def section_digest(section: dict) -> str:
    """sha256 of an asset's zoo metadata (its decode spec, functions, provenance), the list
    of files and this digest aside: an edited capacity or vocabulary is refused on load."""
    kept = {k: v for k, v in section.items() if k not in ("files", "sha256")}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()


def sealed(section: dict, folder: Path) -> dict:
    """An asset's zoo section as stored: every file of `folder` (but metadata.json) listed
    with its size and sha256, and the section's own sha256 (`section_digest`), computed on
    the section as it will be read back (JSON)."""
    stored = json.loads(json.dumps(section))
    stored["files"] = {
        file.name: {"size": file.stat().st_size, "sha256": file_digest(file)}
        for file in sorted(folder.iterdir())
        if file.is_file() and file.name != "metadata.json"
    }
    stored["sha256"] = section_digest(stored)
    return stored


class AssetError(ValueError):
    """An asset's files are missing, truncated or altered: the runtime would crash on it."""


# Files up to this size are hashed on every load; larger ones have their size checked
# (ZOO_VERIFY=full hashes them too). Hashing reads at ~1 GB/s.
HASH_LIMIT = 256 * 1024 * 1024


def verify_asset(path: Path, full: bool | None = None) -> None:
    """Check an asset before the runtime opens it.

    Assets the zoo exported carry a manifest (every file's size and sha256) in their
    metadata: a missing, truncated or altered file is refused here with its name. Other
    assets only get a presence check (metadata.json and a non-empty program file).
    """
    if not path.is_dir():
        raise FileNotFoundError(
            f"{path} is not a Core AI asset (a directory with metadata.json, as written by "
            "zoo.core.export); export one first"
        )
    hint = ": the asset is damaged; export it again"
    metadata = read_json(path / "metadata.json", f" ({path} is not a complete asset{hint[1:]})")
    zoo = (metadata.get("creatorDefinedMetadata") or {}).get(METADATA_KEY)
    manifest = zoo.get("files") if isinstance(zoo, dict) else None
    if zoo is not None and not isinstance(manifest, dict):  # the zoo always writes one
        raise AssetError(f"{path}/metadata.json has lost its list of files{hint}")
    if manifest is None:  # an asset exported elsewhere
        programs = [p for p in path.glob("*.mlirb") if p.stat().st_size > 0]
        if not programs:
            raise AssetError(f"{path} has no program (*.mlirb){hint}")
        return
    if "sha256" not in zoo:
        raise AssetError(
            f"{path} was exported by an older zoo (its metadata.json carries no sha256 of "
            "itself, so an edit cannot be told apart): export it again"
        )
    if zoo.get("sha256") != section_digest(zoo):
        raise AssetError(
            f"{path}/metadata.json was edited since the export (the sha256 of its zoo section "
            f"differs){hint}"
        )
    full = verify_mode() == "full" if full is None else full
    parts = zoo.get("parts") or {}
    unlisted = sorted(
        p.name
        for p in path.iterdir()
        if p.is_file() and p.name != "metadata.json" and p.name not in manifest
    )
    if unlisted:
        raise AssetError(f"{path}: {', '.join(unlisted)} not in its list of files{hint}")
    for name, recorded in manifest.items():
        file = path / name
        if not file.is_file():
            raise AssetError(f"{file} is missing{hint}")
        size = file.stat().st_size
        if size != recorded["size"]:
            raise AssetError(f"{file} has {size} bytes, {recorded['size']} were written{hint}")
        if (full or size <= HASH_LIMIT) and file_digest(file) != recorded["sha256"]:
            raise AssetError(f"{file} was altered since the export (sha256 differs){hint}")
    for name, digest in parts.items():  # each part: its own manifest, itself recorded here
        part = inside(path, name, "metadata.json")
        if not (part / "metadata.json").is_file():
            raise AssetError(f"{part} is missing{hint}")
        if file_digest(part / "metadata.json") != digest:
            raise AssetError(f"{part} is not the part this asset was exported with{hint}")
        verify_asset(part, full)


VERIFY_MODES = ("", "full")


def verify_mode() -> str:
    """`ZOO_VERIFY`: unset (hash files up to `HASH_LIMIT`) or "full" (hash every file)."""
    mode = os.environ.get("ZOO_VERIFY", "")
    if mode not in VERIFY_MODES:
        raise ValueError(f"ZOO_VERIFY={mode!r}: set it to 'full' (hash every file) or unset it")
    return mode
