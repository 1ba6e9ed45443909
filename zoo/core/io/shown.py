"""How messages show a path and a size: the same way in the plan, the progress lines and
the pages."""

from __future__ import annotations

from pathlib import Path


def shown(path: str | Path) -> str:
    """A path as messages show it: under the home folder as `~/...` (a page built on one
    machine shows no other machine's folders)."""
    path = Path(path)
    try:
        return f"~/{path.relative_to(Path.home())}" if path.is_absolute() else str(path)
    except ValueError:
        return str(path)


def readable_bytes(count: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.2f} {unit}"
    return f"{count} bytes"
