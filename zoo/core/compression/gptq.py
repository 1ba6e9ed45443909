"""Calibrated 4-bit weights (GPTQ): the same asset format as round-to-nearest, better codes.

Round-to-nearest picks each weight's 4-bit code on its own. GPTQ (Frantar et al., 2022)
picks them column by column and moves each rounding error onto the columns not yet rounded,
weighted by how the layer's inputs correlate (the Hessian `H = X^T X` of the layer's output
error, measured on calibration text), so the layer's *outputs* stay close, not each weight.

Here the format is coreai-opt's: a module is compressed by its preset as usual, each
block's scale and minimum are then searched (`search_grid`: the min/max range shrunk where
that lowers the error weighted by the Hessian's diagonal), and GPTQ chooses the codes
inside that grid ("static groups"); both are written into coreai-opt's buffers (`scale`,
`minval`, `quantized_data`). The asset is an ordinary int4-block asset: same graph, same
size, other numbers in it. A tied table is calibrated as the head it also is (its inputs:
the final norm's outputs).

`calibrate(model, windows, preset)`: the model loaded in float32, calibration windows of
token ids (text that is not the evaluation's), the base preset (an asymmetric uint4 one).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

CALIBRATION_TOKENS = 16_384  # read from a calibration file: GPTQ's usual order of size
COLUMNS_AT_ONCE = 128  # GPTQ's lazy batch: rank-128 updates instead of one per column
DAMPING = 0.01  # of the Hessian's mean diagonal, added to it: keeps its inverse stable


def collect_hessians(
    model: nn.Module, names: list[str], windows: list[list[int]], forward: Callable
) -> dict[str, torch.Tensor]:
    """`X^T X / tokens` (float64) of the inputs of each module in `names` over the
    calibration `windows` (`forward(model, ids)` runs one). The tied table's inputs are the
    final norm's outputs, named by the table ("embed_tokens")."""
    sums: dict[str, torch.Tensor] = {}
    counts: dict[str, int] = {}
    last: list = [None, None]  # q, k and v (gate and up) read the same input tensor

    def add(name: str, x: torch.Tensor) -> None:
        if last[0] is not x:  # a window's product in float32, the sums in float64
            rows = x.detach().reshape(-1, x.shape[-1]).float()
            last[:] = [x, (rows.T @ rows).double()]
        sums[name] = sums.get(name, 0) + last[1]
        counts[name] = counts.get(name, 0) + x.numel() // x.shape[-1]

    hooks = []
    for name in names:
        module = model.get_submodule(name)
        if isinstance(module, nn.Embedding):  # tied: what the head multiplies it with
            hooks.append(model.norm.register_forward_hook(lambda m, i, out, n=name: add(n, out)))
        else:
            hooks.append(module.register_forward_pre_hook(lambda m, i, n=name: add(n, i[0])))
    try:
        for ids in windows:
            forward(model, ids)
    finally:
        for hook in hooks:
            hook.remove()
        last.clear()
    return {name: sums[name] / counts[name] for name in sums}


def gptq_codes(
    weight: torch.Tensor,
    hessian: torch.Tensor,
    scale: torch.Tensor,
    minimum: torch.Tensor,
    levels: int = 16,
) -> torch.Tensor:
    """The codes `[out, in]` (uint8, 0..levels-1) of `weight` on the grid `code * scale +
    minimum` (per row and block of inputs: `scale` and `minimum` `[out, blocks]`), chosen by
    GPTQ under `hessian` `[in, in]`, columns in order of decreasing Hessian diagonal."""
    rows, columns = weight.shape
    block = columns // scale.shape[1]
    h = hessian.double().clone()
    dead = h.diagonal() == 0  # inputs never seen: their weights cannot matter
    h[dead, dead] = 1
    order = torch.argsort(h.diagonal(), descending=True)
    h = h[order][:, order]
    h.diagonal().add_(DAMPING * h.diagonal().mean())
    # upper Cholesky factor of H^-1: row i holds how column i's error spreads to the rest
    inverse = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(h)), upper=True)
    inverse = inverse.float()
    # columns as rows (contiguous), in the Hessian's order: float32, as GPTQ runs on GPUs
    w = weight.detach().float().T.clone()
    w[dead] = 0
    w = w[order].contiguous()
    grid_of_column = order // block
    step = scale.float().T[grid_of_column].contiguous()  # [columns, rows]
    low = minimum.float().T[grid_of_column].contiguous()
    codes = torch.empty(columns, rows, dtype=torch.uint8)
    for first in range(0, columns, COLUMNS_AT_ONCE):
        last = min(first + COLUMNS_AT_ONCE, columns)
        chunk, errors = w[first:last].clone(), torch.empty(last - first, rows)
        local = inverse[first:last, first:last]
        for i in range(last - first):
            column = first + i
            code = ((chunk[i] - low[column]) / step[column]).round_().clamp_(0, levels - 1)
            codes[column] = code.to(torch.uint8)
            error = (chunk[i] - (code * step[column] + low[column])) / local[i, i]
            chunk[i:].sub_(local[i, i:, None] * error[None, :])
            errors[i] = error
        w[last:] -= inverse[first:last, last:].T @ errors
    unsorted = torch.empty_like(codes)
    unsorted[order] = codes
    return unsorted.T.contiguous()


def search_grid(
    weight: torch.Tensor, importance: torch.Tensor, block: int, levels: int = 16
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each block's scale and minimum `[out, blocks]` (fp16, as stored): of the ranges
    `[min, max]` shrunk towards their middle by up to 30 %, the one whose rounding error,
    weighted by each input's `importance` (the Hessian's diagonal), is least. Min/max is
    the first candidate, so this is never worse than it (in that weighted error)."""
    rows, columns = weight.shape
    w = weight.detach().float().reshape(rows, columns // block, block)
    weights = importance.float().reshape(1, columns // block, block)
    low, high = w.amin(-1, keepdim=True), w.amax(-1, keepdim=True)
    middle, half = (low + high) / 2, (high - low) / 2
    best_error = best_scale = best_low = None
    for shrink in torch.linspace(1.0, 0.7, 16):
        lo = (middle - shrink * half).half().float()
        step = (2 * shrink * half / (levels - 1)).clamp_min(1e-8).half().float()
        error = (((w - lo) / step).round().clamp(0, levels - 1) * step + lo - w) ** 2 * weights
        error = error.sum(-1, keepdim=True)
        if best_error is None:
            best_error, best_scale, best_low = error, step, lo
            continue
        better = error < best_error
        best_error = torch.where(better, error, best_error)
        best_scale, best_low = (
            torch.where(better, step, best_scale),
            torch.where(better, lo, best_low),
        )
    return best_scale[..., 0].half(), best_low[..., 0].half()


def calibrated_units(model: nn.Module, choose: Callable) -> list[str]:
    """The modules a preset compresses (`choose(name, module)` not None), in model order."""
    return [name for name, module in model.named_modules() if name and choose(name, module)]


def calibrate(
    model: nn.Module,
    windows: list[list[int]],
    preset,
    forward: Callable,
    progress: Callable[[str], None] | None = None,
    store: str | None = None,
) -> dict:
    """Compress `model` (float32, loaded) with `preset`'s grid and GPTQ's codes, in place.
    Returns what was done: units, calibration tokens, seconds."""
    from torch.nn.utils import parametrize

    from zoo.core.checkpoint.weights import replace_module

    started = time.perf_counter()
    names = calibrated_units(model, preset.weights)
    hessians = collect_hessians(model, names, windows, forward)
    measured = time.perf_counter() - started
    for number, name in enumerate(names):
        if progress and number % max(1, len(names) // 4) == 0:
            progress(f"GPTQ: module {number + 1} of {len(names)} ({name})")
        module = model.get_submodule(name)
        original = module.weight.detach().float().clone()
        compressed = preset.compress_module(name, module, store)
        if not parametrize.is_parametrized(compressed, "weight"):
            replace_module(model, name, compressed)  # coreai-opt left it as it is
            continue
        grid = compressed.parametrizations.weight[0]
        hessian = hessians.pop(name)
        block = original.shape[1] // grid.scale.shape[1]
        scale, minimum = search_grid(original, hessian.diagonal(), block)
        grid.scale.copy_(scale.to(grid.scale.dtype))
        grid.minval.copy_(minimum.to(grid.minval.dtype))
        codes = gptq_codes(original, hessian, grid.scale.float(), grid.minval.float())
        grid.quantized_data.copy_(codes.to(grid.quantized_data.dtype))
        replace_module(model, name, compressed)
    return {
        "calibrated modules": len(names),
        "calibration tokens": sum(len(ids) for ids in windows),
        "Hessians s": round(measured, 1),
        "calibration s": round(time.perf_counter() - started, 1),
    }


def calibration_windows(
    checkpoint: str | Path, text_file: str | Path, window: int = 512
) -> list[list[int]]:
    """A calibration text file as windows of `window` token ids (its first
    `CALIBRATION_TOKENS`), through the checkpoint's tokenizer."""
    from zoo.core.asset.tokenizer import load_tokenizer

    text = Path(text_file).read_text(encoding="utf-8")
    ids = load_tokenizer(Path(checkpoint) / "tokenizer.json").encode(text).ids
    ids = ids[:CALIBRATION_TOKENS]
    if len(ids) < window:
        raise ValueError(
            f"--calibration {text_file}: {len(ids)} tokens, fewer than one window of {window}; "
            f"give it more text (GPTQ is usually calibrated on ~{CALIBRATION_TOKENS:,} tokens)"
        )
    return [ids[i : i + window] for i in range(0, len(ids) - window + 1, window)]
