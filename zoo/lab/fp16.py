"""What float16 does to a real model: where its residual stream leaves fp16's range, and
what an fp16 asset computes on the runtime (`snippets/gemma3_fp16.py`, the gotcha page)."""

from __future__ import annotations

import numpy as np
import torch

FP16_MAX = float(torch.finfo(torch.float16).max)  # 65,504


def residual_peaks(model, ids: list[int]) -> list[dict]:
    """Per decoder layer of transformers' `model`: the largest |value| of its output (the
    residual stream) and the position holding it, in the model's own dtype."""
    peaks: list[dict] = []

    def record(module, inputs, output) -> None:
        hidden = (output[0] if isinstance(output, tuple) else output)[0].float().abs()
        per_position = hidden.nan_to_num(nan=float("inf")).amax(-1)
        peaks.append(
            {
                "layer": len(peaks),
                "max |h|": float(per_position.max()),
                "at position": int(per_position.argmax()),
            }
        )

    hooks = [layer.register_forward_hook(record) for layer in model.model.layers]
    try:
        with torch.no_grad():
            model(torch.tensor([ids]))
    finally:
        for hook in hooks:
            hook.remove()
    return peaks


def fp16_eager(model, ids: list[int]) -> dict:
    """transformers' `model` computed in float16: per-layer peaks, and how many positions'
    logits stay finite."""
    half = model.to(torch.float16)
    peaks = residual_peaks(half, ids)
    with torch.no_grad():
        logits = half(torch.tensor([ids])).logits[0].float()
    model.to(torch.float32)
    first = next((p["layer"] for p in peaks if not p["max |h|"] <= FP16_MAX), None)
    return {
        "first layer past fp16": first,
        "finite positions": f"{int(torch.isfinite(logits).all(-1).sum())}/{len(ids)}",
        "peaks": peaks,
    }


def runtime_finite(asset: str, ids: list[int]) -> dict:
    """Run `ids` through an asset on the runtime (use `run_isolated`): how many positions'
    logits are finite, and the logits."""
    from zoo.core.host.generator import Generator

    with Generator(asset) as generator:
        rows = np.stack([generator.feed([token]) for token in ids])
    return {
        "finite positions": f"{int(np.isfinite(rows).all(-1).sum())}/{len(ids)}",
        "logits": rows.tolist(),
    }


def fp16_on_runtime(name: str, ids: list[int]) -> list[dict]:
    """Real model `name` exported fp32 and fp16 (capacity 16), `ids` fed one at a time on
    the runtime in a process of its own: finite positions of each, and the fp16 logits' KL
    against fp32 when they are finite."""
    import tempfile

    from zoo.core.export.functions import export_model
    from zoo.core.isolate import run_isolated
    from zoo.core.model.entry import get_entry
    from zoo.fetch import fetch, get_real_model
    from zoo.quality import scores

    checkpoint, entry = fetch(name), get_entry(get_real_model(name).entry)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="zoo-fp16-") as scratch:
        for preset in ("fp32", "fp16"):
            loaded = entry.load(checkpoint, compress=preset, capacity=16)
            asset = export_model(
                loaded,
                f"{scratch}/{preset}.aimodel",
                chunk=4,
                compress=preset,
                checkpoint=checkpoint,
            )
            outcome = run_isolated(runtime_finite, str(asset), ids, timeout=3600)
            rows[preset] = outcome.result if outcome.ok else outcome.summary()
    result = [
        {"preset": p, "finite positions": r if isinstance(r, str) else r["finite positions"]}
        for p, r in rows.items()
    ]
    if all(row["finite positions"] == f"{len(ids)}/{len(ids)}" for row in result):
        against = scores(
            np.asarray(rows["fp16"]["logits"]), ids, np.asarray(rows["fp32"]["logits"])
        )
        result[1]["KL vs fp32 (nats)"] = round(against["KL"], 5)
    return result
