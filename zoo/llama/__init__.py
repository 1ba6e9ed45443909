"""Llama family text decoder (SmolLM2, Llama 3.x) on Core AI.

The zoo entry: `config.py` reads config.json, `model.py` is the decoder; this registration
is all the rest of the zoo needs to know about it (`zoo.core.model.entry`)."""

from zoo.core.model.entry import ModelEntry, TinyCheckpoint, register
from zoo.llama.config import LlamaConfig
from zoo.llama.model import Llama

# Tiny random checkpoints for the tests and recipes: SmolLM2's shape (tied head, 3 query
# heads per KV head); variants: Llama 3.x's `llama3` RoPE with an untied head, and biases.
TINY = TinyCheckpoint(
    text=dict(
        vocab_size=128,
        hidden_size=96,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=6,
        num_key_value_heads=2,
        head_dim=16,
        rope_theta=100_000.0,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,  # SmolLM2's: the pad id is its end-of-turn id
        # at the default 0.02 the tied head echoes one token (11 11 11 ...): wider weights
        # make each greedy step depend on the layers (the tests hold the logits too)
        initializer_range=0.2,
    ),
    variants={
        "default": {},
        # long wavelengths stretched, short kept, a ramp between: all three at head dim 16
        "llama3": dict(
            tie_word_embeddings=False,
            rope_theta=500_000.0,
            rope_scaling=dict(
                rope_type="llama3",
                factor=8.0,
                low_freq_factor=1.0,
                high_freq_factor=4.0,
                original_max_position_embeddings=64,
            ),
        ),
        "bias": dict(attention_bias=True),
    },
    jitter=("norm", "bias"),  # transformers initialises norms to ones, biases to zeros
)

ENTRY = register(
    ModelEntry(
        name="llama",
        title="Llama",
        config=LlamaConfig,
        model=Llama,
        transformers_name="Llama",
        tiny=TINY,
        text_only=True,
    )
)
load_llama = ENTRY.load

__all__ = ["ENTRY", "Llama", "LlamaConfig", "load_llama"]
