"""Where and with what a result was produced: stored in every asset and every record."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata as _meta
import platform as _platform

ZOO_VERSION = "0.1.0"  # pyproject.toml's; `zoo.__version__`
PACKAGES = ("torch", "coreai-torch", "coreai-core", "numpy", "transformers")


def package_version(name: str) -> str | None:
    try:
        return _meta.version(name)
    except _meta.PackageNotFoundError:
        return None


def platform_name() -> str:
    """`linux` (in-package CPU runtime) or `macos-<version>`."""
    if _platform.system() == "Darwin":
        return f"macos-{_platform.mac_ver()[0]}"
    return _platform.system().lower()


def provenance(compute_unit: str | None = None) -> dict:
    """Platform, OS build, chip, compute unit, package versions and the UTC time."""
    info = {
        "platform": platform_name(),
        "os": _platform.platform(),
        "machine": _platform.machine(),
        "processor": _platform.processor() or _platform.machine(),
        "python": _platform.python_version(),
        "zoo": ZOO_VERSION,
        "packages": {name: package_version(name) for name in PACKAGES},
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if compute_unit is not None:
        info["compute_unit"] = compute_unit
    return info


def describe(info: dict) -> str:
    """One line for a page: `linux x86_64 · coreai-core 1.0.0b3 · ... · 2026-11-29`."""
    packages = info.get("packages", {})
    parts = [f"{info['platform']} {info['machine']}"]
    if info.get("compute_unit"):
        parts.append(f"compute unit {info['compute_unit']}")
    for name in ("coreai-core", "coreai-torch", "torch"):
        if packages.get(name):
            parts.append(f"{name} {packages[name]}")
    parts.append(f"Python {info['python']}")
    parts.append(info["date"][:10])
    return " · ".join(parts)
