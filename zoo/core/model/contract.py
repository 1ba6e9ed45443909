"""The model contract, written once: what the loader, the export, the layouts, the bench and
the command line need of a decoder that `ModelEntry.model(config, strategy, capacity)`
builds. `Decoder` names every required member; `LayerRanges`, `CarriedInputs`,
`SharedStates` and `Sidecars` the optional hooks, each a capability a family adds when it
needs it (Gemma 4 has them all; Llama needs none but the ranges' three). Registration
checks the required members on the entry's tiny config (`zoo.core.model.entry.check_contract`),
and the hooks of a family that exports layer ranges (`check_splittable`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch
    from torch import nn


@runtime_checkable
class Decoder(Protocol):
    """Every zoo decoder."""

    name: str
    """The entry's name (`zoo.NAME`), recorded in an asset's DecodeSpec."""
    config: Any
    """The DecoderConfig it was built from (vocab_size, stop_token_ids, num_hidden_layers)."""
    strategy: Any
    """The KV strategy (`zoo.core.asset.kv_writes`) its caches write with."""
    capacity: int
    """Tokens its KV caches hold: the longest context of the asset."""
    embed_tokens: nn.Embedding
    """The embedding table (layouts, the bench and a tied head read it)."""
    lm_head: nn.Linear | None
    """The head: an nn.Linear, or None when tied to `embed_tokens`."""
    layers: nn.ModuleList
    """The decoder layers, in order."""

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        step: dict[str, torch.Tensor],
        states: dict[str, torch.Tensor],
        last_row_only: bool = False,
    ) -> torch.Tensor:
        """Logits `[1, T, vocab]` (`[1, 1, vocab]` with `last_row_only`, the prefill
        function) of `input_ids` `[1, T]` at `positions`, writing `states` in place; `step`
        holds the host's per-step inputs (the KV strategy's, masks, sidecar rows)."""
        ...

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every state the functions share (KV caches, recurrent and conv states): name ->
        shape, in the order the functions declare them."""
        ...


@runtime_checkable
class LayerRanges(Protocol):
    """A decoder that exports as layer ranges (`--layers-per-function`, `zoo.core.export.ranges`);
    its layers are called `layer(h, positions, step, states)` unless it has `run_layers`."""

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The first range's start: hidden states `[1, T, width]` of the ids."""
        ...

    def head(self, h: torch.Tensor, last_row_only: bool) -> torch.Tensor:
        """The last range's end: the final norm and the head, logits."""
        ...

    def layer_state_shapes(self, start: int, stop: int) -> dict[str, tuple[int, ...]]:
        """The states layers [start, stop) write or read."""
        ...


class CarriedInputs(Protocol):
    """What the first range computes once for every later one (Gemma 4's per-layer inputs)."""

    def carried_shapes(self, length: int) -> dict[str, tuple[int, ...]]:
        """Name -> shape of each carried tensor for a call of `length` tokens."""
        ...

    def carried(self, input_ids: torch.Tensor, h: torch.Tensor, step: dict) -> dict:
        """The carried tensors, computed in the first range."""
        ...

    def run_layers(self, h, start: int, stop: int, positions, step, states, carried):
        """Layers [start, stop) given what the first range carried."""
        ...


class SharedStates(Protocol):
    """States a range reads but another writes (Gemma 4's KV-shared layers)."""

    def read_only_states(self, start: int, stop: int) -> list[str]:
        """The states layers [start, stop) only read."""
        ...


class Sidecars(Protocol):
    """Lookup tables kept out of the graph, read a row per token by the host
    (`zoo.core.asset.sidecar`; Gemma 4's per-layer embeddings)."""

    SIDECAR_WEIGHTS: ClassVar[dict[str, str]]
    """Input name -> the checkpoint weight (our name) the table is read from."""
    sidecar_inputs: dict[str, int]
    """Input name -> row width, for the tables this model keeps out of its graph."""
    sidecars: dict
    """Input name -> `SidecarSource`, filled by the loader."""


class SlidingWindow(Protocol):
    """A decoder with sliding-window layers: the host passes a `sliding_mask`."""

    sliding_window: int | None
    """Tokens a sliding layer sees (None: no sliding layers)."""


HOOKS = (LayerRanges, CarriedInputs, SharedStates, Sidecars, SlidingWindow)


def members(protocol: type) -> dict[str, str]:
    """A protocol's members and the first line of each one's docstring."""
    import ast
    import inspect

    documented: dict[str, str] = {}
    body = ast.parse(inspect.getsource(protocol)).body[0].body
    for node, after in zip(body, [*body[1:], None], strict=True):
        if isinstance(node, ast.FunctionDef):
            documented[node.name] = (ast.get_docstring(node) or "").split("\n")[0]
        elif isinstance(node, ast.AnnAssign) and isinstance(after, ast.Expr):
            documented[node.target.id] = str(after.value.value).split("\n")[0]
    return documented
