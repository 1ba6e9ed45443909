"""Reading the files a user hands the zoo (config.json, metadata.json, images, audio): one
line naming the file when it is missing or malformed. No torch: the host loop reads assets
with it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


class UnsupportedConfig(ValueError):
    """The checkpoint asks for something this zoo entry does not implement (named)."""


class MediaError(ValueError):
    """An image or audio clip that cannot be read or prepared (`zoo.core.host.media`); the
    message says which and why."""


def read_json(path: str | Path, what: str = "") -> dict:
    """A JSON object from `path`; a missing or malformed file is one line naming it."""
    return read_json_and_digest(path, what)[0]


def read_json_and_digest(path: str | Path, what: str = "") -> tuple[dict, str]:
    """`read_json`, and the sha256 of the bytes it read (the file read once)."""
    path = Path(path)
    if path.exists() and not path.is_file():
        raise ValueError(f"{path} is not a regular file; put the {path.name} file there")
    try:
        data = path.read_bytes()
        value = json.loads(data.decode())
    except FileNotFoundError:
        raise FileNotFoundError(f"no {path.name} in {path.parent}{what}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not valid JSON ({error}); fix or re-download it") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object, found {type(value).__name__}")
    return value, hashlib.sha256(data).hexdigest()


def hub_blobs(folder: str | Path) -> Path | None:
    """`REPO/blobs` when `folder` is a snapshot of the Hugging Face hub cache
    (`models--ORG--NAME/snapshots/REVISION`): its files are links into the repository's
    `blobs/`, which is the cache's own layout, not a read from elsewhere."""
    folder = Path(folder).absolute()
    repo = folder.parent.parent
    if folder.parent.name == "snapshots" and repo.name.startswith("models--"):
        return repo / "blobs"
    return None


def confined(root: str | Path, path: Path, what: str) -> Path:
    """`path` (a file of `root`), refused unless it resolves inside `root` or, for a hub
    cache snapshot, inside its repository's `blobs/` (a link that leaves them is named)."""
    roots = [Path(root).resolve()]
    blobs = hub_blobs(root)
    if blobs is not None:
        roots.append(blobs.resolve())
    target = path.resolve()
    if not any(r in target.parents for r in roots):
        where = f"{roots[0]} or {roots[1]}" if len(roots) > 1 else str(roots[0])
        raise ValueError(
            f"{what} {path.name!r} leads to {target}, outside {where}: the zoo reads only the "
            "files of the folder it was given; fix the link or re-download it"
        )
    return path


def inside(root: str | Path, name: object, what: str) -> Path:
    """`root / name`, refused unless it stays inside `root` (a shard index or an asset's
    metadata naming `../elsewhere` must not make the zoo read outside its folder); a hub
    cache snapshot's links into its repository's `blobs/` stay inside."""
    root = Path(root)
    if not isinstance(name, str) or not name or Path(name).is_absolute():
        raise ValueError(f"{what} names {name!r}, not a file name inside {root}; fix it")
    path = root / name
    if ".." in Path(name).parts:
        raise ValueError(
            f"{what} names {name!r}, outside {root}: the zoo reads only the files of the "
            "folder it was given; fix or re-download it"
        )
    return confined(root, path, f"{what} names")
