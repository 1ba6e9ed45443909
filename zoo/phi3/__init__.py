"""Phi-3 / Phi-4 text decoder (Phi-3-mini/medium, Phi-3.5-mini, Phi-4-mini, Phi-4) on Core AI.

The zoo entry: `config.py` reads config.json, `model.py` is the decoder; this registration
is all the rest of the zoo needs to know about it (`zoo.core.model.entry`)."""

from zoo.core.model.entry import ModelEntry, TinyCheckpoint, register
from zoo.phi3.config import Phi3Config
from zoo.phi3.model import Phi3

# Tiny random checkpoints for the tests and recipes: Phi-3-mini's proportions in small (as
# many KV heads as query heads, an untied head, a sliding window no shorter than the test
# cache of 64); variant: Phi-4-mini's (grouped KV heads, a tied head, partial rotary 0.75,
# longrope short factors and attention factor: 256 positions over an original 64).
TINY = TinyCheckpoint(
    text=dict(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=256,
        original_max_position_embeddings=256,
        rope_theta=10_000.0,
        sliding_window=64,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    ),
    variants={
        "default": {},
        "phi4-mini": dict(
            # at the default 0.02 the tied head echoes the last token: 3 3 3 ... proves
            # little; wider weights make every greedy step depend on the attention
            initializer_range=0.1,
            num_key_value_heads=2,
            tie_word_embeddings=True,
            sliding_window=None,
            partial_rotary_factor=0.75,  # 12 of 16 dims rotate: 6 frequencies
            original_max_position_embeddings=64,
            rope_scaling=dict(
                type="longrope",
                short_factor=[1.0, 1.1, 1.4, 2.0, 3.5, 6.0],
                long_factor=[1.0, 2.0, 4.0, 8.0, 16.0, 32.0],
            ),
        ),
    },
    jitter=("norm",),  # transformers initialises norms to ones
)

ENTRY = register(
    ModelEntry(
        name="phi3",
        title="Phi-3 and Phi-4",
        config=Phi3Config,
        model=Phi3,
        transformers_name="Phi3",
        tiny=TINY,
        text_only=True,
    )
)
load_phi3 = ENTRY.load

__all__ = ["ENTRY", "Phi3", "Phi3Config", "load_phi3"]
