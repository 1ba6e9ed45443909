"""Whether an export fits this machine's memory in one piece, and if not, its layer ranges:
the plan-time half of an export range by range (`zoo.core.stream` writes it)."""

from __future__ import annotations

import os
from dataclasses import replace

# A streamed export's ranges, when not given: as many layers as hold this many float32 bytes
STREAM_RANGE_BYTES = 2_000_000_000


def machine_memory() -> int:
    """This machine's physical memory in bytes (Linux and macOS)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def streamable(entry) -> str | None:
    """Why `entry` cannot export range by range, or None if it can."""
    if entry.sidecar_option or hasattr(entry.model, "read_only_states"):
        return (
            f"{entry.title}'s layer ranges share states and lookup tables (KV-shared layers, "
            "per-layer embeddings): it exports in one piece"
        )
    return None


def stream_plan(plan, entry, per_layer: dict, stream: str):
    """The plan range by range (`stream` on, or auto and too big for memory), its ranges
    chosen by size if not given; `per_layer`: values per layer (None: the rest)."""
    if stream not in ("auto", "on", "off"):
        raise ValueError(f"--stream is auto, on or off, got {stream!r}")
    why_not = streamable(entry)
    if plan.calibration is not None:  # GPTQ measures the whole model on the text
        why_not = "a calibrated preset runs the whole float32 model on its text: --stream off"
    if plan.first_layers:
        why_not = "--first-layers exports a part of the model in one piece: --stream off"
    if stream == "on" and why_not:
        raise ValueError(f"--stream on: {why_not}")
    if stream == "off" or why_not:
        return plan
    if stream == "auto" and plan.estimated_peak_bytes < machine_memory() / 2:
        return plan
    from zoo.core.ranges import check_splittable

    check_splittable(entry.model)
    ranges = plan.ranges
    if ranges is None:
        largest = max([per_layer.get(n, 0) for n in range(plan.layers)] or [1]) * 4
        from zoo.core.ranges import split_layers

        per_range = max(1, STREAM_RANGE_BYTES // max(1, largest))
        ranges = tuple(tuple(r) for r in split_layers(plan.layers, per_range))
    rest = per_layer.get(None, 0)
    held = max(
        sum(per_layer.get(n, 0) for n in range(start, stop))
        + (rest if start == 0 or stop == plan.layers else 0)
        for start, stop in ranges
    )
    return replace(plan, streamed=True, ranges=ranges, held_parameters=held)
