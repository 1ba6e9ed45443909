"""Tiny random-weight Qwen3.5 checkpoints, written by transformers, for tests and recipes.

Real checkpoint directories (config.json, model.safetensors, tokenizer.json): the code that
loads them is the code that loads Qwen/Qwen3.5-*. Needs `transformers`.
"""

from __future__ import annotations

from pathlib import Path

from zoo.core.reference import load_reference
from zoo.gemma4.tiny import write_tokenizer

TEXT = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=4,  # 3 GatedDeltaNet layers, then 1 full attention
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    linear_conv_kernel_dim=4,
    linear_key_head_dim=8,
    linear_value_head_dim=8,
    linear_num_key_heads=2,
    linear_num_value_heads=4,  # fewer key heads than value heads
    max_position_embeddings=256,
    tie_word_embeddings=False,
    eos_token_id=1,
    bos_token_id=2,
    pad_token_id=0,
)


def make_tiny_checkpoint(
    directory: str | Path, seed: int = 0, layers: int = 4, multimodal: bool = False
) -> Path:
    """Build a random Qwen3.5 with transformers and `save_pretrained` it to `directory`."""
    import torch
    import transformers
    from transformers import (
        AutoModelForCausalLM,
        Qwen3_5Config,
        Qwen3_5ForConditionalGeneration,
        Qwen3_5TextConfig,
    )

    directory = Path(directory)
    text = {**TEXT, "num_hidden_layers": layers}
    torch.manual_seed(seed)
    if multimodal:
        vision = dict(
            depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64
        )
        model = Qwen3_5ForConditionalGeneration(
            Qwen3_5Config(text_config=text, vision_config=vision)
        )
    else:
        config = Qwen3_5TextConfig(**text)
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    # transformers initialises A_log/dt_bias/norms deterministically; jitter them so the
    # parity tests see every parameter matter.
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name or "A_log" in name or "dt_bias" in name:
                parameter.add_(0.1 * torch.randn_like(parameter))
    transformers.utils.logging.disable_progress_bar()
    model.eval().save_pretrained(directory)
    write_tokenizer(directory, text["vocab_size"])
    return directory


def reference_model(directory: str | Path):
    """The transformers model of a checkpoint directory, for parity checks."""
    return load_reference(directory, "qwen3_5", "Qwen3_5ForConditionalGeneration")
