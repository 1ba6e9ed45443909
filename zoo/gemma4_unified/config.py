"""Gemma 4 12B's configuration (`model_type: gemma4_unified`), read from config.json.

The 12B's text decoder is Gemma 4's (transformers 5.23 builds `Gemma4UnifiedTextModel` from
Gemma 4's attention, MLP and sandwich-normed layer) without per-layer embeddings, KV sharing
or experts; images and audio reach it without encoders (a patch embedder), which this entry
does not export yet. Field names and defaults follow `Gemma4UnifiedTextConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass

from zoo.gemma4.config import Gemma4Config


@dataclass
class Gemma4UnifiedConfig(Gemma4Config):
    TEXT_TYPE, MULTIMODAL_TYPE, FAMILY = "gemma4_unified_text", "gemma4_unified", "Gemma 4 12B"
    REFUSED_MODEL_TYPES = {}

    # transformers' defaults for the unified text config
    sliding_window: int = 1024
    max_position_embeddings: int = 262_144
    use_bidirectional_attention: str | None = "vision"
    # not in this architecture (transformers makes them AttributeError): none, ever
    hidden_size_per_layer_input: int = 0
    vocab_size_per_layer_input: int = 0

    def __post_init__(self) -> None:
        if self.hidden_size_per_layer_input or self.enable_moe_block:
            raise ValueError(
                "config.json: Gemma 4 12B has no per-layer embeddings and no experts "
                f"(hidden_size_per_layer_input={self.hidden_size_per_layer_input}, "
                f"enable_moe_block={self.enable_moe_block})"
            )
        super().__post_init__()
