"""Qwen3 dense text decoder (0.6B, 1.7B, 4B, 8B, 14B, 32B) on Core AI.

The zoo entry: `config.py` reads config.json, `model.py` is the decoder; this registration
is all the rest of the zoo needs to know about it (`zoo.core.model.entry`)."""

from zoo.core.model.entry import ModelEntry, TinyCheckpoint, register
from zoo.qwen3.config import Qwen3Config
from zoo.qwen3.model import Qwen3

# Tiny random checkpoints for the tests and recipes: 0.6B's shape in small (the attention
# width, 6 heads x 16, above the hidden size of 64; 3 query heads per KV head; tied head);
# variants: an untied head (8B and up) and q/k/v/o biases (`attention_bias`).
TINY = TinyCheckpoint(
    text=dict(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=6,
        num_key_value_heads=2,
        head_dim=16,
        rope_theta=1_000_000.0,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        # at the default 0.02 the tied head echoes one token (58 58 58 ...): wider weights
        # make each greedy step depend on the layers (the tests hold the logits too)
        initializer_range=0.2,
    ),
    variants={
        "default": {},
        "untied": dict(tie_word_embeddings=False),
        "bias": dict(attention_bias=True),
    },
    jitter=("norm", "bias"),  # initialised to ones (norms, q/k norms too) and zeros
)

ENTRY = register(
    ModelEntry(
        name="qwen3",
        title="Qwen3",
        config=Qwen3Config,
        model=Qwen3,
        transformers_name="Qwen3",
        tiny=TINY,
        text_only=True,
    )
)
load_qwen3 = ENTRY.load

__all__ = ["ENTRY", "Qwen3", "Qwen3Config", "load_qwen3"]
