"""Qwen3 mixture-of-experts text decoder (30B-A3B, Coder-30B-A3B, 235B-A22B) on Core AI.

The zoo entry: `config.py` reads config.json, `model.py` is the decoder; this registration
is all the rest of the zoo needs to know about it (`zoo.core.model.entry`)."""

from zoo.core.model.entry import ModelEntry, TinyCheckpoint, register
from zoo.qwen3_moe.config import Qwen3MoeConfig
from zoo.qwen3_moe.model import Qwen3Moe

# Tiny random checkpoints for the tests and recipes: 30B-A3B's shape in small (qk-norm, 2
# query heads per KV head, untied head), 6 experts of which each token takes 2, weights
# renormalised (`norm_topk_prob`); variants: without renormalising, and a dense MLP on
# layer 1 (`mlp_only_layers`) beside every-other-layer experts (`decoder_sparse_step: 2`).
TINY = TinyCheckpoint(
    text=dict(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=96,
        moe_intermediate_size=32,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_experts=6,
        num_experts_per_tok=2,
        norm_topk_prob=True,
        rope_theta=1_000_000.0,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        initializer_range=0.2,  # varied greedy tokens and routes on random weights
    ),
    variants={
        "default": {},
        "unnormalised": dict(norm_topk_prob=False),
        "dense-layers": dict(mlp_only_layers=[1], decoder_sparse_step=2),
    },
    jitter=("norm",),  # transformers initialises norms to ones
)

ENTRY = register(
    ModelEntry(
        name="qwen3_moe",
        title="Qwen3 MoE",
        config=Qwen3MoeConfig,
        model=Qwen3Moe,
        transformers_name="Qwen3Moe",
        tiny=TINY,
        text_only=True,
    )
)
load_qwen3_moe = ENTRY.load

__all__ = ["ENTRY", "Qwen3Moe", "Qwen3MoeConfig", "load_qwen3_moe"]
