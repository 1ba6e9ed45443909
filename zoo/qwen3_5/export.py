"""Qwen3.5 -> `.aimodel`: prefill + decode sharing KV caches, conv and recurrent states."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from zoo.core.decode import DecodeSpec, decoder_spec, eager_logits, export_decoder
from zoo.core.layout import apply_layout
from zoo.qwen3_5.model import Qwen3_5


def decode_spec(model: Qwen3_5, chunk: int = 8, checkpoint: str | None = None) -> DecodeSpec:
    return decoder_spec(model, "qwen3_5", chunk, checkpoint)


def export_qwen3_5(
    model: Qwen3_5,
    path: str | os.PathLike,
    *,
    chunk: int = 8,
    overwrite: bool = False,
    checkpoint: str | os.PathLike | None = None,
    weights: str = "auto",
    keys: str = "auto",
) -> Path:
    """Export a loaded Qwen3.5 (see `zoo.qwen3_5.load_qwen3_5`) as prefill + decode.

    `weights` and `keys` choose the stored layout (`zoo.core.layout`; "auto": this
    platform's default); the model is re-stored in place and computes the same logits.
    """
    source = str(Path(checkpoint).resolve()) if checkpoint is not None else None
    apply_layout(model, weights, keys)
    return export_decoder(model, decode_spec(model, chunk, source), path, overwrite=overwrite)


def torch_logits(model: Qwen3_5, ids: list[int]) -> torch.Tensor:
    """Logits `[1, T, vocab]` of our model in torch eager: one chunk from position 0."""
    return eager_logits(model, decode_spec(model, chunk=len(ids)), ids)
