"""KV strategies: exact in eager against attention without a cache, and the runtime matrix."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zoo.core.asset.kv_writes import get_strategy
from zoo.core.model.layers import attend
from zoo.lab.expected import current_target, expected, mismatch
from zoo.lab.kv_cells import CELLS, RingBufferWrite
from zoo.lab.kv_matrix import TINY, HostDecoder, build_block, run_matrix
from zoo.testing import record

pytestmark = pytest.mark.unit  # the suite's tiers: pyproject.toml's markers

DECODERS = [name for name, s in CELLS.items() if not s.isolation_only]


def reference_outputs(block, xs: np.ndarray, window: int | None = None) -> list[np.ndarray]:
    """Attention over every token so far (or the last `window`), recomputed each step."""
    s = block.shape
    outputs, keys, values = [], [], []
    with torch.no_grad():
        for x in torch.from_numpy(xs):
            q = block.q_proj(x).reshape(1, 1, s.heads, s.head_dim).transpose(1, 2)
            keys.append(block.k_proj(x).reshape(1, 1, s.kv_heads, s.head_dim).transpose(1, 2))
            values.append(block.v_proj(x).reshape(1, 1, s.kv_heads, s.head_dim).transpose(1, 2))
            k, v = (
                torch.cat(keys[-(window or len(keys)) :], 2),
                torch.cat(values[-(window or len(values)) :], 2),
            )
            out = attend(q, k, v)
            outputs.append(block.o_proj(out.transpose(1, 2).reshape(1, 1, -1)).numpy())
    return outputs


def decode_eager(block, xs: np.ndarray) -> list[np.ndarray]:
    decoder = HostDecoder(block)
    return [decoder.step(x, position) for position, x in enumerate(xs)]


def random_inputs(steps: int) -> np.ndarray:
    return np.random.default_rng(1).standard_normal((steps, 1, 1, TINY.hidden)).astype(np.float32)


@pytest.mark.parametrize("name", DECODERS)
def test_strategy_matches_attention_without_a_cache(name):
    block = build_block(name)
    xs = random_inputs(12)
    for got, want in zip(decode_eager(block, xs), reference_outputs(block, xs), strict=True):
        np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("window", [4, 7])
def test_ring_buffer_is_an_exact_sliding_window(window):
    block = build_block("ring-buffer")
    block.strategy = RingBufferWrite(window=window)
    xs = random_inputs(3 * window)
    reference = reference_outputs(block, xs, window=window)
    for got, want in zip(decode_eager(block, xs), reference, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_shift_append_slides_over_the_capacity():
    block = build_block("shift-append")
    xs = random_inputs(TINY.capacity + 5)
    reference = reference_outputs(block, xs, window=TINY.capacity)
    np.testing.assert_allclose(decode_eager(block, xs)[-1], reference[-1], atol=1e-5)


@pytest.mark.parametrize(
    "name,last",
    [
        ("runtime-index", TINY.capacity - 1),
        ("shape-symint", TINY.capacity - 2),
        ("input-mask-blend", TINY.capacity - 1),
        ("host-cache", TINY.capacity - 1),
    ],
)
def test_a_decode_past_the_context_says_so(name, last):
    strategy = get_strategy(name)
    strategy.host_inputs(last, TINY.capacity)
    with pytest.raises(IndexError, match=f"position {last + 1} is past the context"):
        strategy.host_inputs(last + 1, TINY.capacity)


def test_unknown_strategy_lists_the_known_ones():
    with pytest.raises(ValueError, match="known: .*input-mask-blend"):
        get_strategy("fast-write")


MATRIX = [name for name in CELLS if name != "ring-buffer"]


@pytest.fixture(scope="module")
def matrix_rows():
    rows = run_matrix(MATRIX, steps=8)
    record("kv-write-matrix", {"outcomes": rows})
    return {row["strategy"]: row for row in rows}


@pytest.mark.parametrize("name", MATRIX)
def test_runtime_matrix_cell_has_its_expected_outcome(matrix_rows, name):
    """Each cell exported and run for 8 steps in its own process, against torch eager;
    the outcome compared with what `zoo.lab.expected` expects on this target."""
    want = expected("kv-write", name)
    got = matrix_rows[name]["outcome"]
    problem = mismatch(f"KV write on {current_target()}", name, want.outcome, got)
    assert problem is None, f"{problem} (expectation: {want.source})"
