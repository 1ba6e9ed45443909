"""An exported asset on disk: checked before the runtime opens it (a damaged program kills
the process that loads it), and what its zoo metadata says."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

from zoo.core.io.files import inside, read_json_and_digest

METADATA_KEY = "zoo"  # the asset metadata's section the zoo writes


def read_metadata(path: str | os.PathLike) -> dict:
    """What `export` recorded in the asset (its zoo section: producer versions, entry
    points, states), read by `open_asset` without checking the files.

    Read with `json`: coreai-core 1.0.0b3's metadata reader turns a stored 1 into True (a
    stop id of 1 came back as `[true]`).
    """
    return zoo_section(open_asset(path, verify=False))


def zoo_section(opened: OpenedAsset) -> dict:
    """The zoo's section of an opened asset; refused, naming it, for an asset the zoo did
    not export."""
    if opened.section is None:
        raise ValueError(
            f"{opened.path} was not exported by the zoo (its metadata has no {METADATA_KEY!r})"
        )
    return opened.section


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
    return hashlib.sha256(json.dumps(_integral(kept), sort_keys=True).encode()).hexdigest()


def _integral(value):
    """`value` with whole floats as ints: the converter stores 0.0 as 0 in metadata.json."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


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


@dataclass(frozen=True)
class OpenedAsset:
    """An asset on disk, opened once: its metadata.json read (once), its zoo section, its
    parts (an asset exported range by range) and its components. `Generator`,
    `Model.load`, `DecodeSpec.of_asset` and `zoo generate` take this object, so nothing
    reads the metadata twice; `verified()` checks the files against the manifest before
    the runtime sees them (a damaged program kills the process that loads it)."""

    path: Path
    section: dict | None  # the zoo's section of metadata.json; None: exported elsewhere
    digest: str  # sha256 of metadata.json as read (a part's is recorded in its whole)
    parts: tuple[OpenedAsset, ...] = ()
    checked: bool = False  # every file checked against the manifest (`verified`)

    @property
    def decode(self) -> dict | None:
        """The decode spec's fields as stored (`zoo.core.asset.decode_spec.DecodeSpec`)."""
        return (self.section or {}).get("decode")

    @property
    def capacity(self) -> int | None:
        """The KV capacity a zoo decoder was exported with, if the asset says."""
        try:
            return int(self.decode["capacity"])
        except (KeyError, TypeError, ValueError):
            return None

    @property
    def components(self) -> dict[str, dict]:
        """Named components, each with its functions, states and sidecar files: the zoo
        writes them (`components` in metadata.json); an asset from before has one, the
        decoder."""
        section = self.section or {}
        if "components" in section:
            return section["components"]
        return {"decoder": component_of(section, [p.section or {} for p in self.parts])}

    def verified(self, full: bool | None = None) -> OpenedAsset:
        """This asset with every file checked against its manifest (each part's too):
        missing, truncated or altered files refused by name. `full`: hash every file, not
        only those up to `HASH_LIMIT` (default: `ZOO_VERIFY`)."""
        if self.checked:
            return self
        hint = ": the asset is damaged; export it again"
        full = verify_mode() == "full" if full is None else full
        path, zoo = self.path, self.section
        if zoo is None:  # exported elsewhere: a presence check
            if not [p for p in path.glob("*.mlirb") if p.stat().st_size > 0]:
                raise AssetError(f"{path} has no program (*.mlirb){hint}")
            return replace(self, checked=True)
        if not isinstance(zoo.get("files"), dict):  # the zoo always writes one
            raise AssetError(f"{path}/metadata.json has lost its list of files{hint}")
        if "sha256" not in zoo:
            raise AssetError(
                f"{path} was exported by an older zoo (its metadata.json carries no sha256 of "
                "itself, so an edit cannot be told apart): export it again"
            )
        if zoo.get("sha256") != section_digest(zoo):
            raise AssetError(
                f"{path}/metadata.json was edited since the export (the sha256 of its zoo "
                f"section differs){hint}"
            )
        _check_files(path, zoo["files"], full, hint)
        recorded = self.section.get("parts") or {}
        for part in self.parts:
            if part.digest != recorded.get(part.path.name):
                raise AssetError(f"{part.path} is not the part this asset was exported with{hint}")
        parts = tuple(part.verified(full) for part in self.parts)
        return replace(self, parts=parts, checked=True)


def component_of(section: dict, parts: list[dict] = ()) -> dict:
    """One component of an asset's zoo section: the functions its entry points name (its
    parts' when streamed), the states they hold, the sidecar files beside them."""
    entry_points = {}
    for held in (section, *parts):
        entry_points.update(held.get("entry_points") or {})
    states = sorted({s for e in entry_points.values() for s in e.get("states") or []})
    sidecars = sorted(
        s.get("file") for s in ((section.get("decode") or {}).get("sidecars") or {}).values()
    )
    return {"functions": sorted(entry_points), "states": states, "sidecars": sidecars}


def open_asset(
    path: str | os.PathLike | OpenedAsset, verify: bool = True, full: bool | None = None
) -> OpenedAsset:
    """Open an asset: metadata.json read once (each part's once); with `verify`, every file
    checked before the runtime opens it (`OpenedAsset.verified`).

    Assets the zoo exported carry a manifest (every file's size and sha256) in their
    metadata: a missing, truncated or altered file is refused here with its name. Other
    assets only get a presence check (metadata.json and a non-empty program file). An
    `OpenedAsset` is returned as it is (verified if asked).
    """
    if isinstance(path, OpenedAsset):
        return path.verified(full) if verify else path
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(
            f"no asset at {path} (an asset is a folder with metadata.json): export one first "
            f"(zoo export CHECKPOINT {path.name})"
        )
    hint = ": the asset is damaged; export it again"
    metadata, digest = read_json_and_digest(
        path / "metadata.json", f" ({path} is not a complete asset{hint})"
    )
    zoo = (metadata.get("creatorDefinedMetadata") or {}).get(METADATA_KEY)
    if zoo is not None and not isinstance(zoo, dict):
        raise AssetError(f"{path}/metadata.json: its {METADATA_KEY!r} section is damaged{hint}")
    parts = []
    for name in (zoo or {}).get("parts") or {}:  # each a complete asset of its own
        part = inside(path, name, "metadata.json")
        if not (part / "metadata.json").is_file():
            raise AssetError(f"{part} is missing{hint}")
        parts.append(open_asset(part, verify=False))
    opened = OpenedAsset(path, zoo, digest, tuple(parts))
    return opened.verified(full) if verify else opened


def _check_files(path: Path, manifest: dict, full: bool, hint: str) -> None:
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


def verify_asset(path: Path, full: bool | None = None) -> None:
    """Check an asset's files before the runtime opens it (`open_asset`)."""
    open_asset(path, True, full)


VERIFY_MODES = ("", "full")


def verify_mode() -> str:
    """`ZOO_VERIFY`: unset (hash files up to `HASH_LIMIT`) or "full" (hash every file)."""
    mode = os.environ.get("ZOO_VERIFY", "")
    if mode not in VERIFY_MODES:
        raise ValueError(f"ZOO_VERIFY={mode!r}: set it to 'full' (hash every file) or unset it")
    return mode
