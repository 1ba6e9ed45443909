"""Mixtral text decoder (8x7B, 8x22B) on Core AI.

The zoo entry: `config.py` reads config.json, `model.py` is the decoder; this registration
is all the rest of the zoo needs to know about it (`zoo.core.model.entry`)."""

from zoo.core.model.entry import ModelEntry, TinyCheckpoint, register
from zoo.mixtral.config import MixtralConfig
from zoo.mixtral.model import Mixtral

# Tiny random checkpoints for the tests and recipes: 8x7B's shape in small (4 query heads
# per KV head, 8 experts, 2 per token, untied head).
TINY = TinyCheckpoint(
    text=dict(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=32,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=2,
        num_local_experts=8,
        num_experts_per_tok=2,
        rope_theta=1_000_000.0,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        initializer_range=0.2,  # varied greedy tokens and routes on random weights
    ),
    jitter=("norm",),  # transformers initialises norms to ones
)

ENTRY = register(
    ModelEntry(
        name="mixtral",
        title="Mixtral",
        config=MixtralConfig,
        model=Mixtral,
        transformers_name="Mixtral",
        tiny=TINY,
        text_only=True,
    )
)
load_mixtral = ENTRY.load

__all__ = ["ENTRY", "Mixtral", "MixtralConfig", "load_mixtral"]
