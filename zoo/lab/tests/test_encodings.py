"""Other encodings of int4-block32's weights compute what the dequantized weights compute
(eager here; the bench exports and times them on the runtime)."""

from __future__ import annotations

import pytest
import torch

from zoo.lab.encodings import ENCODINGS, block_grid, dequantized

pytestmark = pytest.mark.unit  # the suite's tiers: pyproject.toml's markers


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_an_encoding_computes_the_dequantized_product(name):
    torch.manual_seed(0)
    weight = torch.randn(96, 128) * 0.02
    grid = block_grid(weight)
    x = torch.randn(1, 3, 128)
    want = x @ dequantized(*grid).T
    assert int(grid[0].max()) <= 15
    assert (dequantized(*grid) - weight).abs().max() < 0.1 * weight.abs().max()
    got = ENCODINGS[name](*grid)(x)
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()
