"""A decoder exported as consecutive layer ranges, and prefill with two calls in flight.

One runtime call runs on one thread of this CPU runtime, and two calls in flight run at
the same time (FACTS.md, December 2026). So an asset whose decoder is split into ranges
(`export_model(..., layers_per_function=N)`: functions `prefill_0`, `prefill_1`, ... each
owning the states of its layers) lets the host run range r of chunk k while range r + 1 of
chunk k - 1 runs (`Generator.feed`). It computes what one function computes: each range's
states are touched by one call at a time, in the order of the chunks.

The same split is what a Mac's Neural Engine needs: a whole decoder does not compile there
in one piece (seed 000: Gemma 4 E2B's 35 layers ran out of memory in the first ANE compile;
chunks of at most ~8 layers do), which this project cannot run here.

A decoder splits if it has `embed(input_ids)`, `head(h, last_row_only)`,
`layer_state_shapes(start, stop)` (the states its layers write or read) and `layers` called
as `layer(h, positions, step, states)`, or its own `run_layers(h, start, stop, positions,
step, states, carried)`. What the first range computes once for every later one (Gemma 4's
per-layer inputs, from the embedding) it names in `carried_shapes(length)` and computes in
`carried(input_ids, h, step)`; the first range returns it beside `hidden_out`.

A state two ranges hold (Gemma 4: a KV-shared layer reads the cache an earlier layer
writes) is never in two calls at once: the host waits for the older chunk's call first.
"""

from __future__ import annotations

from torch import nn

# The most layers one Neural Engine compile is reported to take (seed 000: Gemma 4 E2B's
# 35 layers in one function ran out of memory, chunks of ~8 compiled). `--layers-per-function
# ane` exports ranges of at most this many. Reported, not run here.
NEURAL_ENGINE_LAYERS = 8


def split_layers(layers: int, per_function: int) -> list[list[int]]:
    """`[start, stop)` ranges of at most `per_function` layers, as even as possible."""
    if isinstance(per_function, bool) or not isinstance(per_function, int) or per_function < 1:
        raise ValueError(f"layers per function must be a whole number >= 1, got {per_function!r}")
    count = -(-layers // per_function)
    bounds = [round(i * layers / count) for i in range(count + 1)]
    return [[start, stop] for start, stop in zip(bounds, bounds[1:], strict=False)]


def carried_shapes(model: nn.Module, length: int) -> dict[str, tuple[int, ...]]:
    """What the first range passes to every later one beside the hidden state."""
    shapes = getattr(model, "carried_shapes", None)
    return shapes(length) if shapes else {}


def run_layers(model: nn.Module, h, start: int, stop: int, positions, step, states, carried):
    """Layers [start, stop) of `model` on the hidden state `h`."""
    if hasattr(model, "run_layers"):
        return model.run_layers(h, start, stop, positions, step, states, carried)
    for layer in model.layers[start:stop]:
        h = layer(h, positions, step, states)
    return h


def check_splittable(model: nn.Module | type) -> None:
    """Refuse a decoder (or its class) whose layers do not chain through one hidden state."""
    from zoo.core.model.contract import LayerRanges, members

    needed = list(members(LayerRanges))
    missing = [name for name in needed if not hasattr(model, name)]
    if missing:
        raise ValueError(
            f"{model.name}: layer ranges are not exported for this entry yet (it has no "
            f"{', '.join(missing)}): export it without --layers-per-function"
        )


def keep_first_layers(model: nn.Module, count: int) -> None:
    """Cut a decoder to its first `count` layers, in place: the final norm and head follow
    layer `count - 1` (an early exit). Exported, it is a draft that guesses for the whole
    model from its own weights (`zoo generate --speculate draft:ASSET`)."""
    check_splittable(model)
    shared = getattr(model.config, "shared_across_layers", lambda: ["caches"])()
    if hasattr(model, "read_only_states") and shared:
        raise ValueError(
            f"{model.name}: its layers share {' and '.join(shared)} across the model: no early exit"
        )
    if not 1 <= count < len(model.layers):
        raise ValueError(f"--first-layers takes 1 to {len(model.layers) - 1}, got {count}")
    model.layers = model.layers[:count]
    model.config.num_hidden_layers = count
    if getattr(model.config, "layer_types", None):  # per-layer attention kinds (Gemma 3)
        model.config.layer_types = model.config.layer_types[:count]
