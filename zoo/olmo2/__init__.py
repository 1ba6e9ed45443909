"""OLMo 2 text decoder (1B, 7B, 13B, 32B) on Core AI.

The zoo entry: `config.py` reads config.json, `model.py` is the decoder; this registration
is all the rest of the zoo needs to know about it (`zoo.core.model.entry`)."""

from zoo.core.model.entry import ModelEntry, TinyCheckpoint, register
from zoo.olmo2.config import Olmo2Config
from zoo.olmo2.model import Olmo2

# Tiny random checkpoints for the tests and recipes: the 1B's proportions in small (as
# many KV heads as query heads, an untied head); variants: grouped KV heads (the 32B has
# 40 query heads over 8) and q/k/v/o biases (`attention_bias`).
TINY = TinyCheckpoint(
    text=dict(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        rope_theta=500_000.0,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=2,
        pad_token_id=1,
        # at the default 0.02 greedy decoding repeats one token (124 124 ...): wider weights
        # make each step depend on the layers (the tests hold the logits too)
        initializer_range=0.1,
    ),
    variants={
        "default": {},
        "grouped": dict(num_key_value_heads=2, initializer_range=0.2),
        "bias": dict(attention_bias=True),
    },
    jitter=("norm", "bias"),  # transformers initialises norms to ones, biases to zeros
)

ENTRY = register(
    ModelEntry(
        name="olmo2",
        title="OLMo 2",
        config=Olmo2Config,
        model=Olmo2,
        transformers_name="Olmo2",
        tiny=TINY,
        text_only=True,
    )
)
load_olmo2 = ENTRY.load

__all__ = ["ENTRY", "Olmo2", "Olmo2Config", "load_olmo2"]
