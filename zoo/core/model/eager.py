"""A zoo decoder in torch eager: the `DecodeSpec` of a loaded model (`decode_spec`) and its
logits for a run of token ids (`torch_logits`), as the host would feed the asset."""

from __future__ import annotations

import torch

from zoo.core.asset.decode_spec import DecodeSpec
from zoo.core.model.kv_cache import kv_caches
from zoo.core.model.layout import layout_of


def decode_spec(
    model: torch.nn.Module, chunk: int = 8, checkpoint: str | None = None
) -> DecodeSpec:
    """The spec of a zoo decoder: `model` has `name`, `strategy`, `capacity`, `config` and
    `state_shapes()` (and `sliding_window` if it has sliding-window layers)."""
    return DecodeSpec(
        model=model.name,
        strategy=model.strategy.name,
        capacity=model.capacity,
        chunk=chunk,
        vocab_size=model.config.vocab_size,
        state_shapes={n: list(shape) for n, shape in model.state_shapes().items()},
        sliding_window=getattr(model, "sliding_window", None),
        stop_token_ids=[int(token) for token in model.config.stop_token_ids],
        checkpoint=checkpoint,
        layout=layout_of(model),
        state_dtypes={n: t for cache in kv_caches(model) for n, t in cache.dtypes().items()},
        sidecars={
            name: {"file": f"{name}.int8.safetensors", "rows": rows, "width": width}
            for name, (rows, width) in _sidecar_shapes(model).items()
        },
    )


def _sidecar_shapes(model: torch.nn.Module) -> dict[str, tuple[int, int]]:
    widths = getattr(model, "sidecar_inputs", {})
    sources = getattr(model, "sidecars", {})
    missing = sorted(set(widths) - set(sources))
    if missing:
        raise ValueError(
            f"{missing} stay out of the graph but have no source table: load the model from "
            "a checkpoint (zoo.<model>.load_<model>) to export it"
        )
    return {name: sources[name].shape for name in widths}


def torch_logits(model: torch.nn.Module, ids: list[int]) -> torch.Tensor:
    """Logits `[1, T, vocab]` of a zoo decoder in torch eager: `ids` as one chunk from 0."""
    spec = decode_spec(model, chunk=len(ids))
    step = {n: torch.from_numpy(v) for n, v in spec.host_inputs(0, len(ids)).items()}
    for name, source in getattr(model, "sidecars", {}).items():  # the same int8 rows
        step[name] = source.rows(torch.tensor([ids]))
    states = {name: zero_state(spec, name) for name in spec.state_shapes}
    with torch.no_grad():
        return model(torch.tensor([ids], dtype=torch.int32), step.pop("positions"), step, states)


def zero_state(spec: DecodeSpec, name: str) -> torch.Tensor:
    """State `name` of `spec` as a new decode starts it: zeros of its shape and dtype."""
    return torch.zeros(
        spec.state_shapes[name], dtype=getattr(torch, spec.state_dtypes.get(name, "float32"))
    )
