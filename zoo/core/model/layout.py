"""Export-time layouts: the same function, stored the way the runtime reads fastest.

Two choices, each measured by `python -m zoo.bench` (docs/performance.md):

- weights: "linear" keeps `nn.Linear`'s `[out, in]` weight and computes `x @ W^T`;
  "transposed" stores `W_t` as `[in, out]` and computes `x @ W_t`. On the Linux CPU runtime
  of coreai-core 1.0.0b3 the transpose of `x @ W^T` is paid on every call (the bench's
  "as authored" rows). A head tied to the embedding gets its own transposed copy (the
  embedding keeps `[vocab, hidden]` for the row lookup), so a tied model stores that table
  twice.
  "blocked" is "transposed" with each gated MLP cut along its intermediate width into
  even blocks of at most `MLP_BLOCK` columns, summed: the runtime's `x @ W_t` ran at about
  half the memory bandwidth for 6144- and 12288-wide outputs and at full speed for 3072- to
  3584-wide ones (the bench's rows; docs/performance.md).
  "blocked-wide" is "blocked" with every other projection wider than `MLP_BLOCK` (Qwen3.5's
  6144-wide `in_proj_qkv` and 4096-wide `q_proj`, Gemma 4's full-attention `q_proj` and
  per-layer projection, the LM head) cut the same way along its output, the blocks' outputs
  concatenated: a candidate the bench measures beside "blocked" (not a default until it
  measures faster).
  "blocked-rows" is "blocked" with every projection computing the rows of a prefill chunk
  as a batch of one-row matmuls (`x[..., None, :] @ W_t`): alone, that formulation ran up
  to a quarter faster than `x @ W_t` at 8 to 32 rows in one run of `python -m zoo.bench
  --matmul`; the bench measures it beside "blocked" in a whole decoder (no faster there).
  "weight-first-prefill" is "transposed" with a second copy of every projection stored
  `[out, in]`, used where a call has `WEIGHT_FIRST_ROWS` rows or more (`(W @ x^T)^T`, the
  fastest form from 16 rows in a run of `python -m zoo.bench --matmul`; ten times slower at one
  row, so decode keeps `x @ W_t`): a candidate the bench measures, at twice the
  projections' bytes.
  Each weights layout is the steps it takes (`WEIGHT_STEPS`): a new one is a row there.
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

from zoo.core.model.kv_cache import kv_caches
from zoo.core.model.layers import GatedMLP

# weights layout -> the steps `apply_layout` takes (each step once, in `_STEPS` order)
WEIGHT_STEPS: dict[str, tuple[str, ...]] = {
    "linear": (),
    "transposed": ("transpose",),
    "blocked": ("block-mlp", "transpose"),
    "blocked-wide": ("block-mlp", "transpose", "block-wide"),
    "blocked-rows": ("block-mlp", "transpose", "rows"),
    "weight-first-prefill": ("transpose", "weight-first"),
}
WEIGHT_LAYOUTS = tuple(WEIGHT_STEPS)
MLP_BLOCK = 3584  # "blocked": the widest MLP block (Qwen3.5-0.8B's 3584 stays whole)
WIDE_BLOCK = MLP_BLOCK  # "blocked-wide": the widest block of any other projection
KEY_LAYOUTS = ("bhtd", "bhdt")


def default_layout(platform: str | None = None) -> dict[str, str]:
    """The layout zoo exports use on `platform` (default: this one).

    Linux (coreai-core's CPU runtime): blocked transposed weights and transposed keys, each
    measured faster.
    macOS: as authored until a Mac has measured otherwise: the OS runtime plans GPU/ANE
    matmuls itself, and nothing in this project has run there yet.
    """
    platform = sys.platform if platform is None else platform
    if platform.startswith("linux"):
        return {"weights": "blocked", "keys": "bhdt"}
    return {"weights": "linear", "keys": "bhtd"}


# The prefill chunk `python -m zoo.<model> export` uses by default, per platform. Linux: the
# bench's chunk sweep (`python -m zoo.bench --chunks 8,16,32,64`, record
# bench-chunks-qwen3_5-0.8b) scored by `zoo.bench.chunks.chunk_choice`; a test holds the two
# together. macOS: unmeasured, the chunk the zoo always used.
DEFAULT_CHUNK = {"linux": 16, "darwin": 8}


def default_chunk(platform: str | None = None) -> int:
    platform = sys.platform if platform is None else platform
    return DEFAULT_CHUNK["linux" if platform.startswith("linux") else "darwin"]


def auto_experts(weights: str) -> str:
    """`--experts auto` for an export whose projections are stored in layout `weights`.
    "blocked" (Linux's default, uncompressed): every expert, weighted, in that layout; the
    bench measured it 5x faster than GatherMM here (record bench-qwen3-30b-a3b: 391 against
    1,966 ms a step). Otherwise (macOS, or compressed weights, which keep `nn.Linear`): the
    chosen experts, as Apple's recipes; every expert in that layout measured 2.8x slower."""
    return "all" if weights == "blocked" else "chosen"


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


def rows_as_batch(x: torch.Tensor, weight_t: torch.Tensor) -> torch.Tensor:
    """`x @ weight_t` computed as one `[1, in] @ [in, out]` matmul per row of `x`."""
    return (x.unsqueeze(-2) @ weight_t).squeeze(-2)


WEIGHT_FIRST_ROWS = 16  # "weight-first-prefill": calls of this many rows or more


class TransposedLinear(nn.Module):
    """`x @ weight_t (+ bias)` with `weight_t` stored `[in, out]`: what `nn.Linear` computes.
    With `rows` set, each row of `x` is its own matmul (`rows_as_batch`); with `weight` (the
    same matrix `[out, in]`), calls of `WEIGHT_FIRST_ROWS` rows or more compute
    `(weight @ x^T)^T` (the row count is fixed when a function is traced)."""

    rows = False

    def __init__(self, weight_t: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        self.weight_t = nn.Parameter(weight_t, requires_grad=False)
        self.register_parameter("weight", None)  # "weight-first-prefill" sets it
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)

    @classmethod
    def from_weight(
        cls, weight: torch.Tensor, bias: torch.Tensor | None = None
    ) -> TransposedLinear:
        """From an `nn.Linear`-style `[out, in]` weight (copied, transposed)."""
        return cls(weight.detach().t().contiguous(), None if bias is None else bias.detach())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight is not None and x.shape[-2] >= WEIGHT_FIRST_ROWS:
            out = (self.weight @ x.transpose(-1, -2)).transpose(-1, -2)
        else:
            out = rows_as_batch(x, self.weight_t) if self.rows else x @ self.weight_t
        return out if self.bias is None else out + self.bias


def even_blocks(width: int, block: int) -> list[int]:
    """As few sizes summing to `width` as keep each within `block`, as even as possible."""
    count = -(-width // block)
    return [width // count + (i < width % count) for i in range(count)]


def frozen_blocks(weight: torch.Tensor, sizes: list[int], dim: int) -> nn.ParameterList:
    """`weight` split into `sizes` along `dim`, each block its own contiguous parameter."""
    return nn.ParameterList(
        nn.Parameter(piece.contiguous(), requires_grad=False) for piece in weight.split(sizes, dim)
    )


class BlockedLinear(nn.Module):
    """`x @ W_t (+ bias)` with the output columns cut into even blocks of at most `block`,
    each stored `[in, block]`, the outputs concatenated: the same function, no matmul wider
    than a block (the width the runtime streams at full speed)."""

    def __init__(
        self, weight_t: torch.Tensor, bias: torch.Tensor | None = None, block: int = MLP_BLOCK
    ) -> None:
        super().__init__()
        self.blocks = frozen_blocks(weight_t, even_blocks(weight_t.shape[1], block), 1)
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.cat([x @ piece for piece in self.blocks], dim=-1)
        return out if self.bias is None else out + self.bias


def _weight_t(projection: nn.Module) -> torch.Tensor:
    """`[in, out]` weight of an `nn.Linear` or a `TransposedLinear`."""
    if isinstance(projection, TransposedLinear):
        return projection.weight_t.detach()
    return projection.weight.detach().t()


class BlockedGatedMLP(nn.Module):
    """`GatedMLP` cut into column blocks: `sum_j down_j(act(gate_j(x)) * up_j(x))`.

    The same function (up to float summation order), with every projection stored `[in,
    out]` and no output wider than `block`; no concat (per-element costly on the runtime).
    With `rows` set, each row of `x` goes through the blocks as its own matmul.
    """

    rows = False

    def __init__(self, mlp: GatedMLP, block: int = MLP_BLOCK) -> None:
        super().__init__()
        self.activation = mlp.activation
        sizes = even_blocks(_weight_t(mlp.down_proj).shape[0], block)
        self.gates = frozen_blocks(_weight_t(mlp.gate_proj), sizes, 1)
        self.ups = frozen_blocks(_weight_t(mlp.up_proj), sizes, 1)
        self.downs = frozen_blocks(_weight_t(mlp.down_proj), sizes, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.unsqueeze(-2) if self.rows else x  # [..., T, 1, in]: a matmul per row
        out = None
        for gate, up, down in zip(self.gates, self.ups, self.downs, strict=True):
            part = (self.activation(rows @ gate) * (rows @ up)) @ down
            out = part if out is None else out + part
        return out.squeeze(-2) if self.rows else out


def _replace_children(model: nn.Module, kind: type, make) -> None:
    """Every child module of type `kind` replaced by `make(child)` (or kept if it is None)."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, kind) and (new := make(child)) is not None:
                setattr(parent, name, new)


def _block_mlp(model: nn.Module) -> None:
    _replace_children(model, GatedMLP, BlockedGatedMLP)


def _transpose(model: nn.Module) -> None:
    _replace_children(model, nn.Linear, lambda c: TransposedLinear.from_weight(c.weight, c.bias))
    if getattr(model, "lm_head", False) is None and hasattr(model, "embed_tokens"):
        model.lm_head = TransposedLinear.from_weight(model.embed_tokens.weight)


def _block_wide(model: nn.Module) -> None:  # the rest wider than a block, the head included
    _replace_children(
        model,
        TransposedLinear,
        lambda c: (
            BlockedLinear(c.weight_t.detach(), c.bias, WIDE_BLOCK)
            if c.weight_t.shape[1] > WIDE_BLOCK
            else None
        ),
    )


def _rows(model: nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, TransposedLinear | BlockedGatedMLP):
            module.rows = True


def _weight_first(model: nn.Module) -> None:
    for module in model.modules():
        if isinstance(module, TransposedLinear) and module.weight is None:
            weight = module.weight_t.detach().t().contiguous()
            module.weight = nn.Parameter(weight, requires_grad=False)


# step -> (what it does, whether a model shows it); applied in this order (blocking the
# MLP before transposing keeps its weights from being copied twice)
_STEPS = {
    "block-mlp": (_block_mlp, lambda m: isinstance(m, BlockedGatedMLP)),
    "transpose": (_transpose, lambda m: isinstance(m, TransposedLinear)),
    "block-wide": (_block_wide, lambda m: isinstance(m, BlockedLinear)),
    "rows": (_rows, lambda m: isinstance(m, TransposedLinear | BlockedGatedMLP) and m.rows),
    "weight-first": (
        _weight_first,
        lambda m: isinstance(m, TransposedLinear) and m.weight is not None,
    ),
}


def apply_layout(model: nn.Module, weights: str = "auto", keys: str = "auto") -> dict[str, str]:
    """Re-store a zoo model's weights and key caches in a layout, in place; returns it.

    Call it after loading the weights (the checkpoint names `nn.Linear` weights) and before
    export. "linear" / "bhtd" leave the model as it is; applying a layout twice is a no-op.
    """
    layout = resolve_layout(weights, keys)
    for step, (run, _) in _STEPS.items():
        if step in WEIGHT_STEPS[layout["weights"]]:
            run(model)
    if layout["keys"] == "bhdt":
        for cache in kv_caches(model):
            cache.keys_transposed = True
    return layout


def layout_of(model: nn.Module) -> dict[str, str]:
    """The layout `model` is stored in now: the simplest whose steps cover those it shows."""
    modules = list(model.modules())
    shown = {step for step, (_, shows) in _STEPS.items() if any(map(shows, modules))}
    covering = [name for name, steps in WEIGHT_STEPS.items() if shown <= set(steps)]
    return {
        "weights": min(covering, key=lambda name: len(WEIGHT_STEPS[name])),
        "keys": "bhdt" if any(c.keys_transposed for c in kv_caches(model)) else "bhtd",
    }
