"""Load a Qwen3.5 checkpoint directory (config.json + *.safetensors) into `zoo.qwen3_5.Qwen3_5`.

Both layouts are read: text-only `Qwen3_5ForCausalLM` (`model.layers...`) and multimodal
`Qwen3_5ForConditionalGeneration` (`model.language_model.layers...`, vision tower skipped).
Multi-token-prediction weights (`mtp.*`) are not used.
"""

from __future__ import annotations

from pathlib import Path

from zoo.core.checkpoint import build_and_load
from zoo.core.decode import check_capacity
from zoo.core.kv import KVStrategy, get_strategy
from zoo.qwen3_5.config import Qwen3_5Config
from zoo.qwen3_5.model import Qwen3_5


def checkpoint_name_to_ours(key: str) -> str | None:
    if key == "lm_head.weight":
        return key
    if key.startswith("mtp."):
        return None
    for prefix in ("model.language_model.", "model."):
        if key.startswith(prefix):
            name = key[len(prefix) :]
            return None if name.startswith(("visual.", "vision")) else name
    return None


def load_qwen3_5(
    directory: str | Path,
    strategy: KVStrategy | str = "runtime-index",
    capacity: int = 256,
    one_step_decode: bool = True,
) -> Qwen3_5:
    """A ready-to-export Qwen3.5 (eval mode, float32) with the checkpoint's weights."""
    config = Qwen3_5Config.from_checkpoint(directory)
    check_capacity(capacity)
    strategy = get_strategy(strategy) if isinstance(strategy, str) else strategy
    ignored = ["lm_head."] if config.tie_word_embeddings else []
    model = build_and_load(
        lambda: Qwen3_5(config, strategy, capacity, one_step_decode),
        directory,
        checkpoint_name_to_ours,
        ignored,
    )
    return model.eval()
