"""The KV-write isolation matrix: one attention block, exported once per strategy.

Each cell exports the same single-layer decode block with one KV strategy, runs it on the
Core AI runtime for several decode steps with the state carried, and compares every step's
output and the final caches with the same block in torch eager. `run_matrix` runs each cell
in a child process of its own (a runtime crash kills only that cell) and returns one row per
cell: ran exact / wrong numbers / crashed (signal) / failed to export / timed out.
"""

from __future__ import annotations

import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from zoo.core.asset.kv_writes import KVStrategy, get_strategy
from zoo.core.export.convert import export
from zoo.core.host.runtime import Model, states_to_numpy
from zoo.core.isolate import cached_call, check_close, run_isolated
from zoo.core.model.layers import attend
from zoo.lab.kv_cells import HostCache

# What a cell's outcome depends on, for the per-session result cache.
ZOO = Path(__file__).resolve().parents[1]
CODE_FILES = [
    ZOO / n
    for n in (
        "lab/kv_matrix.py",
        "lab/kv_cells.py",
        "core/asset/kv_writes.py",
        "core/model/layers.py",
        "core/export/convert.py",
        "core/host/runtime.py",
    )
]


@dataclass(frozen=True)
class BlockShape:
    hidden: int = 64
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    capacity: int = 32


TINY = BlockShape()
# A Qwen3-0.6B-like attention layer: 16 query heads, 8 KV heads of 128, hidden 1024.
REAL_WIDTH = BlockShape(hidden=1024, heads=16, kv_heads=8, head_dim=128, capacity=2048)


class KVBlock(nn.Module):
    """One attention layer decoding one token, writing its K/V with `strategy`.

    forward(x, *step_inputs, k_cache, v_cache) -> y (and the new K/V columns when the
    strategy keeps the cache on the host).
    """

    def __init__(self, strategy: KVStrategy, shape: BlockShape = TINY) -> None:
        super().__init__()
        self.strategy, self.shape = strategy, shape
        self.q_proj = nn.Linear(shape.hidden, shape.heads * shape.head_dim, bias=False)
        self.k_proj = nn.Linear(shape.hidden, shape.kv_heads * shape.head_dim, bias=False)
        self.v_proj = nn.Linear(shape.hidden, shape.kv_heads * shape.head_dim, bias=False)
        self.o_proj = nn.Linear(shape.heads * shape.head_dim, shape.hidden, bias=False)

    def forward(self, x: torch.Tensor, *args: torch.Tensor):
        names = self.strategy.step_inputs
        step = dict(zip(names, args[: len(names)], strict=True))
        k_cache, v_cache = args[len(names) :]
        s = self.shape
        q = self.q_proj(x).reshape(1, 1, s.heads, s.head_dim).transpose(1, 2)
        k = self.k_proj(x).reshape(1, 1, s.kv_heads, s.head_dim).transpose(1, 2)
        v = self.v_proj(x).reshape(1, 1, s.kv_heads, s.head_dim).transpose(1, 2)
        keys = self.strategy.write(k_cache, k, step)
        values = self.strategy.write(v_cache, v, step)
        out = attend(q, keys, values, step.get("attn_mask"))
        y = self.o_proj(out.transpose(1, 2).reshape(1, 1, s.heads * s.head_dim))
        return y if self.strategy.stateful else (y, k, v)

    # What the export and the decode loop need to know about this block's I/O.
    @property
    def cache_names(self) -> list[str]:
        return ["k_cache", "v_cache"]

    @property
    def output_names(self) -> list[str]:
        return ["y"] if self.strategy.stateful else ["y", "k_new", "v_new"]

    def new_caches(self) -> dict[str, np.ndarray]:
        s = self.shape
        shape = self.strategy.cache_shape(s.kv_heads, s.capacity, s.head_dim)
        return {name: np.zeros(shape, np.float32) for name in self.cache_names}


def build_block(strategy_name: str, shape: BlockShape = TINY, seed: int = 0) -> KVBlock:
    torch.manual_seed(seed)
    return KVBlock(get_strategy(strategy_name), shape).eval()


def export_block(block: KVBlock, path: str | Path, overwrite: bool = False) -> Path:
    strategy, capacity = block.strategy, block.shape.capacity
    step = strategy.example_step(capacity)
    caches = {n: torch.from_numpy(c) for n, c in block.new_caches().items()}
    x = torch.zeros(1, 1, block.shape.hidden)
    dynamic = strategy.dynamic_shapes(capacity)
    names = ["x", *step]
    dynamic_shapes = None
    if dynamic:  # forward(x, *args): one spec for x, a tuple for the rest
        rest = [dynamic.get(n) for n in names[1:]] + [None] * len(caches)
        dynamic_shapes = (dynamic.get("x"), tuple(rest))
    if strategy.stateful:
        input_names, state_names = names, block.cache_names
    else:
        input_names, state_names = [*names, *block.cache_names], []
    return export(
        block,
        (x, *step.values(), *caches.values()),
        path,
        input_names=input_names,
        output_names=block.output_names,
        state_names=state_names,
        dynamic_shapes=dynamic_shapes,
        overwrite=overwrite,
    )


class HostDecoder:
    """Feeds one block step by step, on the runtime or in torch eager, for any strategy.

    The strategy's host side gives the per-step inputs; a host cache is written back here.
    """

    def __init__(self, block: KVBlock, function=None) -> None:
        self.block, self.function = block, function
        caches = block.new_caches()
        if function is not None and block.strategy.stateful:
            self.caches = function.new_states(**caches)
        else:
            self.caches = caches

    def step(self, x: np.ndarray, position: int) -> np.ndarray:
        strategy = self.block.strategy
        inputs = {"x": x, **strategy.host_inputs(position, self.block.shape.capacity)}
        if self.function is not None:
            if strategy.stateful:
                outputs = self.function(inputs, self.caches)
            else:
                outputs = self.function({**inputs, **self.caches})
        else:
            outputs = self._eager(inputs)
        if not strategy.stateful:
            HostCache.store(self.caches["k_cache"], outputs["k_new"], position)
            HostCache.store(self.caches["v_cache"], outputs["v_new"], position)
        return outputs["y"]

    def _eager(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        tensors = [torch.from_numpy(np.array(v)) for v in inputs.values()]
        caches = [torch.from_numpy(self.caches[n]) for n in self.block.cache_names]
        with torch.no_grad():  # the stateful strategies write into `caches` in place
            result = self.block(*tensors, *caches)
        values = result if isinstance(result, tuple) else (result,)
        return {n: v.numpy() for n, v in zip(self.block.output_names, values, strict=True)}

    def cache_values(self) -> dict[str, np.ndarray]:
        if self.function is not None and self.block.strategy.stateful:
            return states_to_numpy(self.caches)
        return {n: c.copy() for n, c in self.caches.items()}


def run_cell(strategy_name: str, steps: int = 8, seed: int = 0) -> dict:
    """Export, decode `steps` tokens on the runtime and in eager, compare; may crash."""
    block = build_block(strategy_name, TINY, seed)
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((steps, 1, 1, TINY.hidden)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = export_block(block, Path(tmp) / f"{strategy_name}.aimodel")
        with Model.load(path) as model:
            runtime = HostDecoder(block, model.function("main"))
            eager = HostDecoder(block)
            errors = []
            for position, x in enumerate(xs):
                got, want = runtime.step(x, position), eager.step(x, position)
                errors.append(check_close(f"output at step {position}", got, want, atol=1e-5))
            got_caches, want_caches = runtime.cache_values(), eager.cache_values()
        for name in block.cache_names:
            errors.append(check_close(f"final {name}", got_caches[name], want_caches[name]))
    return {"steps": steps, "max_abs_error": float(max(errors))}


def outcome_label(outcome) -> str:
    """A cell of the matrix: `ran exact`, `wrong numbers`, `crashed (SIGILL)`, ..."""
    return "ran exact" if outcome.ok else outcome.summary()


def run_matrix(
    names: list[str], steps: int = 8, timeout: float = 300, workers: int = 2
) -> list[dict]:
    """One row per strategy, each cell in a child process (`workers` at a time)."""

    def row(name: str) -> dict:
        strategy = get_strategy(name)
        outcome = cached_call(
            lambda: run_isolated(run_cell, name, steps, timeout=timeout),
            [*CODE_FILES, "run_cell", name, steps],
        )
        return {
            "formulation": strategy.title,
            "strategy": name,
            "shapes": "dynamic" if strategy.dynamic_context else "static",
            "state": "yes" if strategy.stateful else "no (host)",
            "outcome": outcome_label(outcome),
            "max abs error": (outcome.result or {}).get("max_abs_error"),
            "seconds": outcome.seconds,
        }

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(row, names))


def measure_latency(
    strategy_name: str, positions: list[int], shape: BlockShape = REAL_WIDTH, calls: int = 10
) -> list[dict]:
    """Median ms of one decode step at each position, on the runtime (run in a child)."""
    block = build_block(strategy_name, shape)
    strategy = block.strategy
    rows = []
    x = np.random.default_rng(0).standard_normal((1, 1, shape.hidden)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = export_block(block, Path(tmp) / f"{strategy_name}.aimodel")
        with Model.load(path) as model:
            decoder = HostDecoder(block, model.function("main"))
            for position in positions:
                if position >= strategy.max_positions(shape.capacity):
                    continue
                decoder.step(x, position)  # warm-up (and a re-specialization, if any)
                times = []
                for _ in range(calls):
                    start = time.perf_counter()
                    decoder.step(x, position)
                    times.append((time.perf_counter() - start) * 1000)
                rows.append(
                    {
                        "strategy": strategy_name,
                        "context position": position,
                        "median ms per step": round(float(np.median(times)), 3),
                    }
                )
    return rows
