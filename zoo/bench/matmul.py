"""How the runtime's matmul scales with the rows of a prefill chunk, per formulation.

Prefill reads a chunk of T tokens per call so that each weight read serves T rows. Whether
it does depends on the runtime's kernel: one projection (an MLP-sized 1,024 -> 3,584 by
default) is exported alone in several formulations a torch model can take, and each is
timed on the runtime at several row counts beside torch eager. `ms per row` flat in T means
no weight reuse (the chunk saves calls, not work). Run by `python -m zoo.bench --matmul`;
each formulation exports in the calling process (tiny graphs, no crash seen).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn


class _Projection(nn.Module):
    def __init__(self, weight: torch.Tensor, forward: Callable) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight, requires_grad=False)
        self._forward = forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._forward(x, self.weight)


def _reduction_blocks(x: torch.Tensor, w_t: torch.Tensor, blocks: int = 4) -> torch.Tensor:
    pieces = zip(x.chunk(blocks, -1), w_t.chunk(blocks, 0), strict=True)
    out = None
    for part, weight in pieces:
        out = part @ weight if out is None else out + part @ weight
    return out


def _output_blocks(x: torch.Tensor, w_t: torch.Tensor, blocks: int = 16) -> torch.Tensor:
    # each block's weight fits a core's L2 cache, so a kernel that re-reads the weight for
    # every row would read it from cache: faster only if reading the weight is what costs
    return torch.cat([x @ weight for weight in w_t.chunk(blocks, 1)], -1)


# name -> (how the [out, in] weight is stored, the forward from x [1, T, in] and it; the
# channels-first one takes x as [in, T], `CHANNELS_FIRST`)
FORMULATIONS: dict[str, tuple[Callable, Callable]] = {
    "x @ W_t (weights [in, out]: the zoo's Linux layout)": (
        lambda w: w.t().contiguous(),
        lambda x, w_t: x @ w_t,
    ),
    "nn.Linear (x @ W^T, weights [out, in])": (
        lambda w: w.clone(),
        lambda x, w: torch.nn.functional.linear(x, w),
    ),
    "weight first (W @ x^T, transposed back)": (
        lambda w: w.clone(),
        lambda x, w: (w @ x[0].t()).t()[None],
    ),
    "rows as a batch ([T, 1, in] @ W_t)": (
        lambda w: w.t().contiguous(),
        lambda x, w_t: (x[0][:, None, :] @ w_t)[:, 0][None],
    ),
    "reduction in 4 blocks, summed": (
        lambda w: w.t().contiguous(),
        _reduction_blocks,
    ),
    "output in 16 blocks, concatenated": (
        lambda w: w.t().contiguous(),
        _output_blocks,
    ),
    # channels first throughout: the activations come as [in, T] and leave as [out, T], so
    # no transpose is timed (a decoder built this way keeps them so between projections)
    "channels first (W @ X, X [in, T], no transposes)": (
        lambda w: w.clone(),
        lambda x_cf, w: w @ x_cf,
    ),
    # the Neural Engine's usual linear: channels first, a 1x1 convolution
    "1x1 convolution ([1, in, 1, T], weights [out, in, 1, 1])": (
        lambda w: w[:, :, None, None].clone(),
        lambda x, w4: nn.functional.conv2d(x.transpose(1, 2)[:, :, None], w4)[:, :, 0].transpose(
            1, 2
        ),
    ),
}


CHANNELS_FIRST = {"channels first (W @ X, X [in, T], no transposes)"}


def _median_ms(call: Callable, repeats: int) -> float:
    call()  # warm up
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return float(np.median(seconds)) * 1e3


def matmul_rows(
    inputs: int = 1024,
    outputs: int = 3584,
    rows: tuple[int, ...] = (1, 8, 16, 32, 64, 128),
    repeats: int = 5,
) -> list[dict]:
    """One row per (formulation, T): runtime and eager ms per call and per row, and the
    runtime's GFLOP/s."""
    from zoo.core.export.convert import export
    from zoo.core.host.runtime import Model

    torch.manual_seed(0)
    weight = torch.randn(outputs, inputs) * 0.02
    results = []
    with tempfile.TemporaryDirectory(prefix="zoo-matmul-") as workdir:
        for index, (name, (store, forward)) in enumerate(FORMULATIONS.items()):
            module = _Projection(store(weight), forward).eval()
            for count in rows:
                x = torch.randn(1, count, inputs)
                if name in CHANNELS_FIRST:
                    x = x[0].t().contiguous()
                path = Path(workdir) / f"f{index}-t{count}.aimodel"
                export(module, (x,), path, input_names=["x"], output_names=["y"])
                with Model.load(path) as model:
                    function, feed = model.function("main"), {"x": x.numpy()}
                    runtime_ms = _median_ms(lambda f=function, v=feed: f(v, {}), repeats)
                with torch.no_grad():
                    eager_ms = _median_ms(lambda m=module, v=x: m(v), repeats)
                results.append(
                    {
                        "formulation": name,
                        "rows (T)": count,
                        "runtime ms": round(runtime_ms, 2),
                        "runtime ms per row": round(runtime_ms / count, 2),
                        "eager ms": round(eager_ms, 2),
                        "runtime GFLOP/s": round(
                            2 * inputs * outputs * count / runtime_ms / 1e6, 1
                        ),
                    }
                )
    return results
