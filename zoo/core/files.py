"""Reading the files a user hands the zoo (config.json, metadata.json): one line naming the
file when it is missing or malformed. No torch: the host loop reads assets with it."""

from __future__ import annotations

import json
from pathlib import Path


class UnsupportedConfig(ValueError):
    """The checkpoint asks for something this zoo entry does not implement (named)."""


def read_json(path: str | Path, what: str = "") -> dict:
    """A JSON object from `path`; a missing or malformed file is one line naming it."""
    path = Path(path)
    if path.exists() and not path.is_file():
        raise ValueError(f"{path} is not a regular file; put the {path.name} file there")
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"no {path.name} in {path.parent}{what}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not valid JSON ({error}); fix or re-download it") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object, found {type(value).__name__}")
    return value


def inside(root: str | Path, name: object, what: str) -> Path:
    """`root / name`, refused unless it stays inside `root` (a shard index or an asset's
    metadata naming `../elsewhere` must not make the zoo read outside its folder)."""
    root = Path(root)
    if not isinstance(name, str) or not name or Path(name).is_absolute():
        raise ValueError(f"{what} names {name!r}, not a file name inside {root}; fix it")
    path = root / name
    if root.resolve() not in path.resolve().parents:
        raise ValueError(
            f"{what} names {name!r}, outside {root}: the zoo reads only the files of the "
            "folder it was given; fix or re-download it"
        )
    return path
