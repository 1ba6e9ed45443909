"""Execute an export plan (`zoo.core.export.plan`): load -> compress -> convert -> write, in one
piece (`zoo.core.export.functions.write_asset`) or range by range (`zoo.core.export.stream`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from zoo.core.checkpoint.weights import layer_of
from zoo.core.compression.gptq import calibration_windows
from zoo.core.export.functions import write_asset
from zoo.core.export.plan import ExportPlan, plan_export
from zoo.core.export.ranges import keep_first_layers
from zoo.core.export.stream import write_streamed
from zoo.core.io.progress import still_working


def export(checkpoint: str | os.PathLike, output: str | os.PathLike, **options) -> Path:
    """Export a checkpoint folder to an asset: `zoo.core.export.plan.plan_export` (every option
    checked before anything loads) then `run_plan`. `options` as `plan_export`'s."""
    return run_plan(plan_export(checkpoint, output, **options))


def run_plan(plan: ExportPlan, progress: Callable[[str], None] | None = None) -> Path:
    """Execute a plan made by `plan_export`: load the checkpoint (compressing module by
    module when the preset compresses), then convert and write the asset atomically."""
    from zoo.core.model.entry import get_entry

    for warning in plan.warnings if progress else ():
        progress(f"warning: {warning}")
    if plan.streamed:
        return write_streamed(plan, progress)
    if plan.target == "apple-engine":
        return _write_engine_bundle(plan, progress)
    entry = get_entry(plan.entry)
    options = {entry.sidecar_option: plan.sidecar} if entry.sidecar_option else {}
    if plan.first_layers:  # the other layers' tensors stay unread
        options["only"] = lambda name: (layer_of(name) or 0) < plan.first_layers
    model = entry.load(
        plan.checkpoint,
        plan.strategy,
        plan.capacity,
        compress=plan.compress,
        progress=progress,
        experts=plan.experts,
        calibration=plan.calibration and calibration_windows(plan.checkpoint, plan.calibration),
        config=plan.config,
        **options,
    )
    if plan.first_layers:
        keep_first_layers(model, plan.first_layers)
    if progress and plan.ranges:
        progress(f"{plan.layers} layers as {len(plan.ranges)} ranges: {list(plan.ranges)}")
    if progress:
        progress(
            f"converting {plan.functions()} (prefill chunk {plan.chunk}; weights "
            f"{plan.compress}, layout {plan.weights}, keys {plan.keys}), then writing "
            f"{plan.output} ..."
        )
    with still_working(progress, "converting and writing"):
        return write_asset(model, plan)


def _write_engine_bundle(plan: ExportPlan, progress: Callable[[str], None] | None) -> Path:
    """A plan with `target="apple-engine"`: the decoder loaded with Apple's prefix writes,
    then the bundle (`zoo.core.export.apple_engine.export_engine_bundle`)."""
    from zoo.core.export.apple_engine import PackedPrefixWrite, export_engine_bundle
    from zoo.core.model.entry import get_entry

    model = get_entry(plan.entry).load(
        plan.checkpoint,
        PackedPrefixWrite(),
        plan.capacity,
        compress=plan.compress,
        progress=progress,
        config=plan.config,
    )
    if progress:
        progress(f"exporting main + prefill into the bundle {plan.output} ...")
    with still_working(progress, "converting and writing"):
        return export_engine_bundle(
            model,
            plan.output,
            plan.checkpoint,
            model_id=plan.model_id,
            weights=plan.weights,
            compress=plan.compress,
            overwrite=plan.overwrite,
        )
