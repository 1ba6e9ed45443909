"""Gemma 4 -> `.aimodel`: prefill + decode functions sharing the KV cache states."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from zoo.core.decode import DecodeSpec, decoder_spec, eager_logits, export_decoder
from zoo.core.layout import apply_layout
from zoo.gemma4.model import Gemma4


def decode_spec(model: Gemma4, chunk: int = 8, checkpoint: str | None = None) -> DecodeSpec:
    return decoder_spec(model, "gemma4", chunk, checkpoint, model.config.sliding_window)


def export_gemma4(
    model: Gemma4,
    path: str | os.PathLike,
    *,
    chunk: int = 8,
    overwrite: bool = False,
    checkpoint: str | os.PathLike | None = None,
    weights: str = "auto",
    keys: str = "auto",
) -> Path:
    """Export a loaded Gemma 4 (see `zoo.gemma4.load_gemma4`) for greedy or sampled decode.

    `checkpoint` (the directory it was loaded from) is recorded so that `generate` can find
    the checkpoint's tokenizer.json. `weights` and `keys` choose the stored layout
    (`zoo.core.layout`; "auto": this platform's default); the model is re-stored in place
    and computes the same logits.
    """
    source = str(Path(checkpoint).resolve()) if checkpoint is not None else None
    apply_layout(model, weights, keys)
    return export_decoder(model, decode_spec(model, chunk, source), path, overwrite=overwrite)


def torch_logits(model: Gemma4, ids: list[int]) -> torch.Tensor:
    """Logits `[1, T, vocab]` of our model in torch eager: one chunk from position 0."""
    return eager_logits(model, decode_spec(model, chunk=len(ids)), ids)
