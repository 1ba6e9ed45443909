"""Qwen3.5 mixture-of-experts hybrid decoder (35B-A3B, 122B-A10B, 397B-A17B) on Core AI.

The zoo entry: `config.py` reads config.json, `model.py` is the decoder; this registration
is all the rest of the zoo needs to know about it (`zoo.core.model.entry`)."""

from dataclasses import replace

from zoo.core.model.entry import ModelEntry, register
from zoo.qwen3_5 import ENTRY as DENSE
from zoo.qwen3_5_moe.config import Qwen3_5MoeConfig
from zoo.qwen3_5_moe.model import Qwen3_5Moe

# Tiny random checkpoints: the dense hybrid's (3 GatedDeltaNet layers, then attention),
# each layer with 6 experts of which a token takes 2, and a shared expert.
TINY = replace(
    DENSE.tiny,
    text=dict(
        DENSE.tiny.text,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=48,
        num_experts=6,
        num_experts_per_tok=2,
        initializer_range=0.2,  # varied greedy tokens and routes on random weights
    ),
)

ENTRY = register(
    ModelEntry(
        name="qwen3_5_moe",
        title="Qwen3.5 MoE",
        config=Qwen3_5MoeConfig,
        model=Qwen3_5Moe,
        transformers_name="Qwen3_5Moe",
        tiny=TINY,
        towers=DENSE.towers,
        encoders=DENSE.encoders,  # the same vision encoder (zoo.qwen3_5.vision)
    )
)
load_qwen3_5_moe = ENTRY.load

__all__ = ["ENTRY", "Qwen3_5Moe", "Qwen3_5MoeConfig", "load_qwen3_5_moe"]
