"""Gemma 3 text decoder on Core AI (270m and 1b text-only; the text part of 4b, 12b, 27b).

The zoo entry: `config.py` reads config.json, `model.py` is the decoder; this registration
is all the rest of the zoo needs to know about it (`zoo.core.model.entry`)."""

from zoo.core.model.entry import ModelEntry, TinyCheckpoint, register
from zoo.gemma3.config import Gemma3Config
from zoo.gemma3.model import Gemma3

# Tiny random checkpoints for the tests and recipes: 6 layers (5 sliding, 1 full) with a
# window of 4, so a 10-token prompt reaches past it; variants: the 4b+ `linear` RoPE
# scaling on full layers, and a final softcap small enough to engage on random weights.
TINY = TinyCheckpoint(
    text=dict(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=32,
        query_pre_attn_scalar=24,  # not the head dim: the scale must come from it
        sliding_window=4,
        max_position_embeddings=256,
        bos_token_id=2,
        eos_token_id=1,
        pad_token_id=0,
    ),
    variants={
        "default": {},
        "rope-scaling": dict(
            rope_parameters={
                "full_attention": dict(rope_type="linear", factor=8.0, rope_theta=1e6),
                "sliding_attention": dict(rope_type="default", rope_theta=1e4),
            }
        ),
        "softcap": dict(final_logit_softcapping=0.2),
    },
    towers=dict(
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=28,
            patch_size=14,
        ),
        mm_tokens_per_image=4,
    ),
    jitter=("norm",),  # transformers initialises the norms to zeros (1 + w)
)

ENTRY = register(
    ModelEntry(
        name="gemma3",
        title="Gemma 3",
        config=Gemma3Config,
        model=Gemma3,
        transformers_name="Gemma3",
        tiny=TINY,
        towers=("vision_tower", "multi_modal_projector"),
    )
)
load_gemma3 = ENTRY.load

__all__ = ["ENTRY", "Gemma3", "Gemma3Config", "load_gemma3"]
