"""Gemma 4 12B's text decoder: Gemma 4's (`zoo/gemma4/model.py`, read there top to bottom),
built from the 12B's config, which has no per-layer embeddings, KV sharing or experts."""

from __future__ import annotations

from zoo.gemma4.model import Gemma4


class Gemma4Unified(Gemma4):
    name = "gemma4_unified"  # the zoo entry, recorded in the asset's DecodeSpec
