"""Gemma 4 -> `.aimodel`: prefill + decode functions sharing the KV cache states."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from zoo.core.decode import DecodeSpec, export_decoder
from zoo.gemma4.model import Gemma4


def decode_spec(model: Gemma4, chunk: int = 8, checkpoint: str | None = None) -> DecodeSpec:
    config = model.config
    eos = config.eos_token_id
    return DecodeSpec(
        model="gemma4",
        strategy=model.strategy.name,
        capacity=model.capacity,
        chunk=chunk,
        vocab_size=config.vocab_size,
        state_shapes={name: list(shape) for name, shape in model.cache_shapes().items()},
        sliding_window=config.sliding_window,
        stop_token_ids=[eos] if isinstance(eos, int) else list(eos or []),
        checkpoint=checkpoint,
    )


def export_gemma4(
    model: Gemma4,
    path: str | os.PathLike,
    *,
    chunk: int = 8,
    overwrite: bool = False,
    checkpoint: str | os.PathLike | None = None,
) -> Path:
    """Export a loaded Gemma 4 (see `zoo.gemma4.load_gemma4`) for greedy or sampled decode.

    `checkpoint` (the directory it was loaded from) is recorded so that `generate` can find
    the checkpoint's tokenizer.json.
    """
    source = str(Path(checkpoint).resolve()) if checkpoint is not None else None
    return export_decoder(model, decode_spec(model, chunk, source), path, overwrite=overwrite)


def torch_logits(model: Gemma4, ids: list[int]) -> torch.Tensor:
    """Logits `[1, T, vocab]` of our model in torch eager: one chunk from position 0."""
    spec = decode_spec(model, chunk=len(ids))
    inputs = {"input_ids": np.array([ids], np.int32), **spec.host_inputs(0, len(ids))}
    states = [torch.zeros(shape) for shape in spec.state_shapes.values()]
    with torch.no_grad():
        return model(*(torch.from_numpy(v) for v in inputs.values()), *states)
