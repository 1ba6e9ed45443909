"""Quickstart: a torch module with a state -> .aimodel -> Core AI runtime.

Run: python snippets/quickstart.py  (writes ./running_sum.aimodel)
"""

# --8<-- [start:model]
import numpy as np
import torch
from torch import nn


class RunningSum(nn.Module):
    """y = W x + b, and a state `total` that sums every y so far."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
        y = self.proj(x)
        total.copy_(
            total + y
        )  # an argument mutated in place becomes a Core AI state
        return y


torch.manual_seed(0)
model = RunningSum().eval()
# --8<-- [end:model]

# --8<-- [start:export]
from zoo import export_module as export
from zoo import read_metadata

asset = export(
    model,
    (
        torch.zeros(1, 8),
        torch.zeros(1, 8),
    ),  # example inputs, in forward() order
    "running_sum.aimodel",
    input_names=["x"],
    output_names=["y"],
    state_names=["total"],
    overwrite=True,  # replace the asset if an earlier run left one
)
print(read_metadata(asset)["entry_points"])
# --8<-- [end:export]

# --8<-- [start:run]
from zoo import Model

xs = torch.randn(4, 1, 8)
with Model.load(asset) as loaded:
    step = loaded.function("main")
    states = (
        step.new_states()
    )  # zero-filled; the runtime writes them back on each call
    ys = [step({"x": x}, states)["y"] for x in xs]
    total = states["total"].numpy().copy()

# The same four steps in torch eager.
with torch.no_grad():
    reference = [model(x, torch.zeros(1, 8)) for x in xs]
np.testing.assert_allclose(
    np.stack(ys), torch.stack(reference).numpy(), atol=1e-5
)
np.testing.assert_allclose(
    total, torch.stack(reference).sum(0).numpy(), atol=1e-5
)
print("4 steps on the Core AI runtime match torch eager")
# --8<-- [end:run]
