"""Compute units: which processor the Core AI runtime runs an asset on, where that can be
chosen (macOS 27+ with the OS framework); Linux's in-package CPU runtime has none to choose.
"""

from __future__ import annotations

import os

from coreai.runtime import SpecializationOptions

COMPUTE_UNITS = ("auto", "cpu", "gpu", "ane")
COMPUTE_UNIT_ENV = "ZOO_COMPUTE_UNIT"  # the default when a caller names none


def default_compute_unit() -> str:
    """`$ZOO_COMPUTE_UNIT` (set by `pytest --compute-unit`), else "auto"."""
    return os.environ.get(COMPUTE_UNIT_ENV) or "auto"


def os_framework_available() -> bool:
    """True on macOS 27+ with the OS Core AI framework (where compute units exist)."""
    return SpecializationOptions.is_supported()


class ComputeUnitError(ValueError, RuntimeError):
    """The chosen compute unit does not exist on this platform."""


def specialization(compute_unit: str):
    if compute_unit not in COMPUTE_UNITS:
        raise ValueError(f"compute_unit must be one of {COMPUTE_UNITS}, got {compute_unit!r}")
    if not os_framework_available():
        if compute_unit in ("auto", "cpu"):
            return None  # the in-package CPU runtime has no delegates to choose from
        raise ComputeUnitError(
            f"compute unit {compute_unit!r} needs macOS 27+ with the OS Core AI framework; "
            "this platform runs the in-package CPU runtime (use 'cpu' or 'auto')"
        )
    from coreai.runtime import ComputeUnitKind

    if compute_unit == "auto":
        return SpecializationOptions.default()
    if compute_unit == "cpu":
        return SpecializationOptions.cpu_only()
    kind = ComputeUnitKind.gpu() if compute_unit == "gpu" else ComputeUnitKind.neural_engine()
    return SpecializationOptions.from_preferred_compute_unit_kind(kind)
