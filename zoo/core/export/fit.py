"""Whether an export fits this machine's memory in one piece, and if not, its layer ranges:
the plan-time half of an export range by range (`zoo.core.export.stream` writes it)."""

from __future__ import annotations

import contextlib
import os
from dataclasses import replace
from pathlib import Path

# Bytes a stored weight costs in the asset, per preset (codes and their scales; a LUT of 16
# entries per group of 32 rows is noise at these sizes). Used for the room check and the
# dry run's estimate; `make bench` measures the real sizes.
BYTES_PER_WEIGHT = {
    "fp32": 4.0,
    "fp16": 2.0,
    "int8": 1.0,
    "int4-block32": 0.625,
    "int4-block64": 0.5625,
}
OTHER_BYTES_PER_WEIGHT = 1.2  # palettize4, mixed: between 4 and 8 bits with their tables
# What converting and writing hold beside the loaded weights, in asset bytes: the program,
# its optimized copy and the serialized file. Measured here (2026-12-07, /usr/bin/time):
# SmolLM2-135M fp32, a 655 MB asset from 538 MB of tensors, peaked at 2.57 GB with 0.31 GB
# of imports: 538 MB + 2.6 x 651 MB + 0.31 GB = 2.54 GB (the estimate said 1.6 before).
CONVERTER_COPIES = 2.6

# A streamed export's ranges, when not given: as many layers as hold this many float32 bytes
STREAM_RANGE_BYTES = 2_000_000_000


def machine_memory() -> int:
    """The memory this process may use, in bytes: the machine's physical memory (Linux and
    macOS), or less where a container's cgroup limits it (a 24 GB machine running the zoo
    in a 700 MB container has 700 MB)."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min([physical, *cgroup_limits()])


def cgroup_limits(root: Path = Path("/sys/fs/cgroup"), own: Path = Path("/proc/self/cgroup")):
    """The memory limits of this process's cgroup and those above it (v2 `memory.max`, v1
    `memory.limit_in_bytes`; "max" and v1's huge 'no limit' are no limit)."""
    try:
        lines = own.read_text().splitlines()
    except OSError:  # not Linux
        return []
    candidates = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: one hierarchy
            base, name = root, "memory.max"
        elif "memory" in controllers.split(","):
            base, name = root / "memory", "memory.limit_in_bytes"
        else:
            continue
        folder = base / path.lstrip("/")
        candidates += [d / name for d in (folder, *folder.parents) if base in (d, *d.parents)]
    limits = []
    for file in candidates:
        with contextlib.suppress(OSError, ValueError):
            limits.append(int(file.read_text().strip()))  # "max" is no limit: ValueError
    return [n for n in limits if 0 < n < 1 << 60]


def streamable(entry, config=None) -> str | None:
    """Why `entry` (with this `config`) cannot export range by range, or None if it can: a
    config says what it shares across layers (`shared_across_layers`, Gemma 4's KV-shared
    layers and per-layer embeddings); a size without them (26B-A4B) streams."""
    if not (entry.sidecar_option or hasattr(entry.model, "read_only_states")):
        return None
    shared = getattr(config, "shared_across_layers", None)
    what = shared() if shared else ["KV-shared layers", "per-layer embeddings"]
    if not what:
        return None
    return (
        f"this {entry.title} shares {' and '.join(what)} across its layer ranges: it "
        "exports in one piece"
    )


def stream_plan(plan, entry, per_layer: dict, stream: str, config=None):
    """The plan range by range (`stream` on, or auto and too big for memory), its ranges
    chosen by size if not given; `per_layer`: values per layer (None: the rest)."""
    if stream not in ("auto", "on", "off"):
        raise ValueError(f"--stream is auto, on or off, got {stream!r}")
    why_not = streamable(entry, config)
    if plan.calibration is not None:  # GPTQ measures the whole model on the text
        why_not = "a calibrated preset runs the whole float32 model on its text: --stream off"
    if plan.first_layers:
        why_not = "--first-layers exports a part of the model in one piece: --stream off"
    if stream == "on" and why_not:
        raise ValueError(f"--stream on: {why_not}")
    if stream == "off" or why_not:
        return with_memory_warning(plan, why_not or "--stream off")
    if stream == "auto" and plan.estimated_peak_bytes < machine_memory() / 2:
        return plan
    from zoo.core.export.ranges import check_splittable

    check_splittable(entry.model)
    ranges = plan.ranges
    if ranges is None:
        largest = max([per_layer.get(n, 0) for n in range(plan.layers)] or [1]) * 4
        from zoo.core.export.ranges import split_layers

        per_range = max(1, STREAM_RANGE_BYTES // max(1, largest))
        ranges = tuple(tuple(r) for r in split_layers(plan.layers, per_range))
    rest = per_layer.get(None, 0)
    held = max(
        sum(per_layer.get(n, 0) for n in range(start, stop))
        + (rest if start == 0 or stop == plan.layers else 0)
        for start, stop in ranges
    )
    return replace(plan, streamed=True, ranges=ranges, held_parameters=held)


def with_memory_warning(plan, why_in_one_piece: str):
    """A plan in one piece whose estimated peak exceeds the memory this process may use
    carries a warning (printed by `--dry-run` and before the export starts)."""
    from zoo.core.io.shown import readable_bytes

    memory = machine_memory()
    if plan.estimated_peak_bytes <= memory:
        return plan
    what = (
        "--stream on (or auto) exports it range by range"
        if why_in_one_piece == "--stream off"
        else f"it cannot stream ({why_in_one_piece}): export it on a machine with more memory"
    )
    warning = (
        f"about {readable_bytes(plan.estimated_peak_bytes)} at the peak in one piece, more "
        f"than the {readable_bytes(memory)} this process may use: it may be killed; {what}"
    )
    return replace(plan, warnings=(*plan.warnings, warning))


def state_bytes(entry, config, strategy: str, capacity: int, kv_cache: str, layers: int) -> int:
    """Bytes of the states an asset holds as it runs (KV caches at `capacity`, a hybrid's
    recurrent states) in its first `layers` layers: what `zoo generate` allocates beside the
    weights. Counted on the decoder built on torch's meta device (no memory, well under a
    second even for released configs of 20-120B models), so every family counts its own
    (sliding windows, shared caches, int8 codes and scales)."""
    import copy
    import re

    import torch

    from zoo.core.asset.kv_writes import get_strategy
    from zoo.core.model.kv_cache import kv_caches, set_kv_cache

    try:
        kv_writes = get_strategy(strategy)
    except ValueError:  # Apple's engine contract: its caches are the same size
        kv_writes = get_strategy("runtime-index")
    with torch.device("meta"):
        model = entry.model(copy.deepcopy(config), kv_writes, capacity)
    set_kv_cache(model, kv_cache)
    int8 = {n for cache in kv_caches(model) for n, t in cache.dtypes().items() if t == "int8"}
    total = 0
    for name, shape in model.state_shapes().items():
        layer = re.search(r"_(\d+)$", name)
        if layer and int(layer[1]) >= layers:
            continue
        total += torch.Size(shape).numel() * (1 if name in int8 else 4)
    return total
