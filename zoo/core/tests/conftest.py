"""One tiny asset per test session: exports cost seconds, calls cost microseconds."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from zoo.core.export.convert import EntryPoint, export


class Accumulate(nn.Module):
    """`acc += scale * x`; returns the new `acc` and `x` gathered at the int ids."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(2.0))

    def forward(self, x: torch.Tensor, ids: torch.Tensor, acc: torch.Tensor):
        acc.copy_(acc + self.scale * x)
        return acc * 1.0, x[0, ids]


class ReadAccumulator(nn.Module):
    """A second entry point over the same state: reads it without changing it."""

    def forward(self, acc: torch.Tensor) -> torch.Tensor:
        acc.copy_(acc)  # touch it so it is a state of this function too
        return acc.sum(dim=-1)


def example_inputs() -> tuple[torch.Tensor, ...]:
    return torch.zeros(1, 4), torch.tensor([0, 1], dtype=torch.int32), torch.zeros(1, 4)


@pytest.fixture(scope="session")
def tiny_asset(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("assets") / "accumulate.aimodel"
    read = EntryPoint("read", ReadAccumulator(), (torch.zeros(1, 4),), [], ["total"], ["acc"])
    return export(
        Accumulate(),
        example_inputs(),
        path,
        input_names=["x", "ids"],
        output_names=["acc_out", "picked"],
        state_names=["acc"],
        extra_entry_points=[read],
    )
