"""Load a Gemma 4 checkpoint directory (config.json + *.safetensors) into `zoo.gemma4.Gemma4`.

Both layouts transformers writes are read: the text-only `Gemma4ForCausalLM`
(`model.layers...`) and the multimodal `Gemma4ForConditionalGeneration`
(`model.language_model.layers...`, whose vision and audio towers are skipped).
"""

from __future__ import annotations

from pathlib import Path

from zoo.core.checkpoint import build_and_load
from zoo.core.decode import check_capacity
from zoo.core.kv import KVStrategy, get_strategy
from zoo.gemma4.config import Gemma4Config
from zoo.gemma4.model import Gemma4

TEXT_PREFIXES = ("model.language_model.", "model.")


def checkpoint_name_to_ours(key: str) -> str | None:
    if key == "lm_head.weight":
        return key
    for prefix in TEXT_PREFIXES:
        if key.startswith(prefix):
            name = key[len(prefix) :]
            # the multimodal layout keeps vision/audio towers beside the language model
            return (
                None
                if name.startswith(("vision_", "audio_", "embed_vision", "embed_audio"))
                else name
            )
    return None


def load_gemma4(
    directory: str | Path,
    strategy: KVStrategy | str = "runtime-index",
    capacity: int = 256,
) -> Gemma4:
    """A ready-to-export Gemma 4 (eval mode, float32) with the checkpoint's weights."""
    config = Gemma4Config.from_checkpoint(directory)
    check_capacity(capacity)
    strategy = get_strategy(strategy) if isinstance(strategy, str) else strategy
    # Shared-KV layers have no k/v weights; checkpoints may still carry them.
    ignored = [
        f"layers.{i}.self_attn.{name}"
        for i, mode in enumerate(config.kv_sharing_modes())
        if mode == "reuse"
        for name in ("k_proj", "v_proj", "k_norm", "v_norm")
    ]
    if config.tie_word_embeddings:
        ignored.append("lm_head.")
    model = build_and_load(
        lambda: Gemma4(config, strategy, capacity), directory, checkpoint_name_to_ours, ignored
    )
    return model.eval()
