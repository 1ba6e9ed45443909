"""Export-time layouts: the same function, stored the way the runtime reads fastest.

Two choices, each measured by `python -m zoo.bench` (docs/performance.md):

- weights: "linear" keeps `nn.Linear`'s `[out, in]` weight and computes `x @ W^T`;
  "transposed" stores `W_t` as `[in, out]` and computes `x @ W_t`. On the Linux CPU runtime
  of coreai-core 1.0.0b3 the transpose of `x @ W^T` is paid on every call (the bench's
  "as authored" rows). A head tied to the embedding gets its own transposed copy (the
  embedding keeps `[vocab, hidden]` for the row lookup), so a tied model stores that table
  twice.
- keys: "bhtd" keeps the key cache as `[B, H, T, D]` like the value cache, so every step
  transposes the whole cache for `q @ K^T`; "bhdt" stores it `[B, H, D, T]`, and the step
  writes a column instead.

`apply_layout` changes how a loaded model stores its weights and cache, not what it
computes: the parity tests run on the re-laid-out models.
"""

from __future__ import annotations

import sys

import torch
from torch import nn

WEIGHT_LAYOUTS = ("linear", "transposed")
KEY_LAYOUTS = ("bhtd", "bhdt")


def default_layout(platform: str | None = None) -> dict[str, str]:
    """The layout zoo exports use on `platform` (default: this one).

    Linux (coreai-core's CPU runtime): transposed weights and keys, both measured faster.
    macOS: as authored until a Mac has measured otherwise: the OS runtime plans GPU/ANE
    matmuls itself, and nothing in this project has run there yet.
    """
    platform = sys.platform if platform is None else platform
    if platform.startswith("linux"):
        return {"weights": "transposed", "keys": "bhdt"}
    return {"weights": "linear", "keys": "bhtd"}


def resolve_layout(weights: str = "auto", keys: str = "auto") -> dict[str, str]:
    """`{"weights": ..., "keys": ...}` with "auto" replaced by this platform's default."""
    default = default_layout()
    layout = {
        "weights": default["weights"] if weights == "auto" else weights,
        "keys": default["keys"] if keys == "auto" else keys,
    }
    if layout["weights"] not in WEIGHT_LAYOUTS:
        raise ValueError(f"weights layout must be 'auto' or one of {WEIGHT_LAYOUTS}: {weights!r}")
    if layout["keys"] not in KEY_LAYOUTS:
        raise ValueError(f"keys layout must be 'auto' or one of {KEY_LAYOUTS}: {keys!r}")
    return layout


def transposed_keys(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The `[B, H, D, T]` shape of a key cache whose values are `[B, H, T, D]`."""
    *lead, time, dim = shape
    return (*lead, dim, time)


class TransposedLinear(nn.Module):
    """`x @ weight_t (+ bias)` with `weight_t` stored `[in, out]`: what `nn.Linear` computes."""

    def __init__(self, weight_t: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        self.weight_t = nn.Parameter(weight_t, requires_grad=False)
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)

    @classmethod
    def from_weight(
        cls, weight: torch.Tensor, bias: torch.Tensor | None = None
    ) -> TransposedLinear:
        """From an `nn.Linear`-style `[out, in]` weight (copied, transposed)."""
        return cls(weight.detach().t().contiguous(), None if bias is None else bias.detach())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x @ self.weight_t
        return out if self.bias is None else out + self.bias


# --8<-- [start:apply]
def apply_layout(model: nn.Module, weights: str = "auto", keys: str = "auto") -> dict[str, str]:
    """Re-store a zoo model's weights and key caches in a layout, in place; returns it.

    Call it after loading the weights (the checkpoint names `nn.Linear` weights) and before
    export. "linear" / "bhtd" leave the model as it is; applying a layout twice is a no-op.
    """
    layout = resolve_layout(weights, keys)
    if layout["weights"] == "transposed":
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, nn.Linear):
                    setattr(parent, name, TransposedLinear.from_weight(child.weight, child.bias))
        if getattr(model, "lm_head", False) is None and hasattr(model, "embed_tokens"):
            model.lm_head = TransposedLinear.from_weight(model.embed_tokens.weight)
    if layout["keys"] == "bhdt":
        for module in model.modules():
            if hasattr(module, "keys_transposed"):
                module.keys_transposed = True
    return layout


# --8<-- [end:apply]


def layout_of(model: nn.Module) -> dict[str, str]:
    """The layout `model` is stored in now."""
    modules = list(model.modules())
    return {
        "weights": (
            "transposed" if any(isinstance(m, TransposedLinear) for m in modules) else "linear"
        ),
        "keys": "bhdt" if any(getattr(m, "keys_transposed", False) for m in modules) else "bhtd",
    }
