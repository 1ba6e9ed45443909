"""The shapes the bench runs: data (widths as published), and the decoder of a shape with
random weights. Tiny shapes run the same code in seconds (the tests run them)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import torch

from zoo.core.model.entry import get_entry
from zoo.core.model.layout import default_chunk


@dataclass(frozen=True)
class Shape:
    """A decoder shape to bench: the model entry, its config, and what was reduced (why)."""

    model: str  # a zoo entry
    config: dict
    note: str = ""
    capacity: int = 2048
    chunk: int = field(default_factory=default_chunk)  # what `export` uses on this platform
    prompt: int = 64
    first_token_prompts: tuple[int, ...] = (16, 64, 512)  # time to first token, both sides
    strategies: tuple[str, ...] = ("runtime-index", "input-mask-blend")
    positions: tuple[int, ...] = (1, 2, 16, 128, 512, 1024, 1536, 2047)
    layouts: tuple[str, ...] | None = None  # beside the default cell (None: every step)


def _released_rope(model: str, name: str) -> dict:
    """The RoPE of a released config.json fixture (`zoo/<model>/released/`), as the entry
    reads it: longrope's 48 short and 48 long factors are not retyped here."""
    from zoo.released import released_configs

    config = get_entry(model).config
    return config.from_dict(json.loads(released_configs(model)[name].read_text())).rope_parameters


# Widths as in the published config.json files (this machine has no hub access to re-read
# them); layer counts as published unless memory forces fewer, said in `note`.
SHAPES: dict[str, Shape] = {
    "qwen3_5-0.8b": Shape(
        "qwen3_5",
        dict(
            vocab_size=248_320,
            hidden_size=1024,
            intermediate_size=3584,
            num_hidden_layers=24,
            num_attention_heads=8,
            num_key_value_heads=2,
            head_dim=256,
            linear_num_key_heads=16,
            linear_num_value_heads=16,
            linear_key_head_dim=128,
            linear_value_head_dim=128,
            tie_word_embeddings=True,
        ),
        note="",  # all 24 layers (18 GatedDeltaNet, 6 attention), tied head
    ),
    "gemma4-e2b": Shape(
        "gemma4",
        dict(
            vocab_size=262_144,
            hidden_size=1536,
            intermediate_size=6144,
            num_hidden_layers=15,
            num_attention_heads=8,
            num_key_value_heads=1,
            head_dim=256,
            per_layer_config={i: {"head_dim": 512} for i in (4, 9, 14)},
            layer_types=(["sliding_attention"] * 4 + ["full_attention"]) * 3,
            sliding_window=512,
            num_kv_shared_layers=9,
            use_double_wide_mlp=True,
            hidden_size_per_layer_input=256,
            vocab_size_per_layer_input=32_768,
            final_logit_softcapping=30.0,
            tie_word_embeddings=True,
        ),
        note=(
            "15 of 35 layers (9 of them reuse KV, as 20 of 35 do), and a per-layer-embedding "
            "table of 32,768 rows instead of 262,144: at fp32 the full model is ~20 GB and "
            "export needs a multiple of that (this machine has 24 GB). The PLE table is a "
            "row lookup, so its row count changes the asset size, not the work per token"
        ),
    ),
    "smollm2-135m": Shape(
        "llama",
        dict(
            vocab_size=49_152,
            hidden_size=576,
            intermediate_size=1536,
            num_hidden_layers=30,
            num_attention_heads=9,
            num_key_value_heads=3,
            head_dim=64,
            rope_theta=100_000.0,
            tie_word_embeddings=True,
        ),
        note="",  # all 30 layers, tied head (SmolLM2-135M-Instruct)
    ),
    "gemma3-270m": Shape(
        "gemma3",
        dict(
            vocab_size=262_144,
            hidden_size=640,
            intermediate_size=2048,
            num_hidden_layers=18,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=256,
            sliding_window=512,
            tie_word_embeddings=True,
        ),
        note="",  # all 18 layers (5 sliding : 1 full), tied head
    ),
    "qwen3-0.6b": Shape(
        "qwen3",
        dict(
            vocab_size=151_936,
            hidden_size=1024,
            intermediate_size=3072,
            num_hidden_layers=28,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            rope_theta=1_000_000.0,
            tie_word_embeddings=True,
        ),
        note="",  # all 28 layers, qk-norm, tied head (Qwen3-0.6B)
    ),
    "qwen2.5-1.5b": Shape(
        "llama",
        dict(
            qkv_bias=True,  # Qwen2: biased q, k and v
            vocab_size=151_936,
            hidden_size=1536,
            intermediate_size=8960,
            num_hidden_layers=28,
            num_attention_heads=12,
            num_key_value_heads=2,
            rope_theta=1_000_000.0,
            tie_word_embeddings=True,
        ),
        note="",  # all 28 layers, q/k/v biases, tied head (Qwen2.5-1.5B-Instruct)
    ),
    "phi-4-mini": Shape(
        "phi3",
        dict(
            vocab_size=200_064,
            hidden_size=3072,
            intermediate_size=8192,
            num_hidden_layers=6,
            num_attention_heads=24,
            num_key_value_heads=8,
            partial_rotary_factor=0.75,
            max_position_embeddings=131_072,
            original_max_position_embeddings=4096,
            rope_parameters=_released_rope("phi3", "Phi-4-mini-instruct"),
            tie_word_embeddings=True,
        ),
        note=(
            "6 of 32 layers: at fp32 the full 3.8B model is ~15 GB and export needs a "
            "multiple of that (this machine has 24 GB); every layer is the same, so the "
            "decode cost per layer is what scales"
        ),
    ),
}

# Tiny shapes: the same code path in seconds (the tests run them).
TINY: dict[str, Shape] = {
    "qwen3_5-tiny": Shape(
        "qwen3_5",
        dict(
            vocab_size=256,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            linear_key_head_dim=8,
            linear_value_head_dim=8,
            tie_word_embeddings=True,
        ),
        capacity=64,
        chunk=4,
        prompt=8,
        first_token_prompts=(6, 16),
        strategies=("runtime-index",),
        positions=(1, 2, 32, 63),
    ),
    "gemma4-tiny": Shape(
        "gemma4",
        dict(
            vocab_size=256,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=5,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=16,
            per_layer_config={1: {"head_dim": 32}, 4: {"head_dim": 32}},
            layer_types=["sliding_attention", "full_attention", *["sliding_attention"] * 2]
            + ["full_attention"],
            sliding_window=8,
            num_kv_shared_layers=2,
            use_double_wide_mlp=True,
            hidden_size_per_layer_input=8,
            vocab_size_per_layer_input=256,
            final_logit_softcapping=30.0,
        ),
        capacity=64,
        chunk=4,
        prompt=8,
        first_token_prompts=(6, 16),
        strategies=("runtime-index",),
        positions=(1, 2, 32, 63),
    ),
}

# A mixture of experts: what computing the chosen experts only (GatherMM) saves against
# every expert weighted, both in the same layout, beside the default cell (every expert).
TINY["qwen3_moe-tiny"] = Shape(
    "qwen3_moe",
    dict(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        moe_intermediate_size=32,
        num_experts=6,
        num_experts_per_tok=2,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
    ),
    capacity=64,
    chunk=4,
    prompt=8,
    first_token_prompts=(6,),
    strategies=("runtime-index",),
    positions=(1, 63),
    layouts=("chosen experts (GatherMM)", "every expert, weighted"),
)
SHAPES["qwen3-30b-a3b"] = Shape(
    "qwen3_moe",
    dict(
        vocab_size=16_384,
        hidden_size=2048,
        intermediate_size=6144,
        moe_intermediate_size=768,
        num_experts=128,
        num_experts_per_tok=8,
        norm_topk_prob=True,
        num_hidden_layers=2,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        rope_theta=1_000_000.0,
    ),
    note=(
        "2 of 48 layers and a vocabulary of 16,384 (not 151,936), at full width (128 "
        "experts of 768, 8 per token): at fp32 the 2 layers are 5 GB and an export holds "
        "about twice that on this 24 GB machine; the head is not what this compares"
    ),
    capacity=512,
    positions=(1, 2, 128, 511),
    first_token_prompts=(16, 64),
    strategies=("runtime-index",),
    layouts=("chosen experts (GatherMM)", "every expert, weighted"),
)

ALL_SHAPES: dict[str, Shape] = {**SHAPES, **TINY}

# The layouts a bench compares (zoo.core.model.layout): as authored, then one change at a time.
LAYOUTS = {
    "as authored": {"weights": "linear", "keys": "bhtd"},
    "transposed weights": {"weights": "transposed", "keys": "bhtd"},
    "transposed weights + keys": {"weights": "transposed", "keys": "bhdt"},
    "blocked MLP + keys": {"weights": "blocked", "keys": "bhdt"},
    "blocked MLP and wide projections + keys": {"weights": "blocked-wide", "keys": "bhdt"},
    "blocked MLP + keys, rows as a batch": {"weights": "blocked-rows", "keys": "bhdt"},
    "transposed + keys, weight first in prefill": {
        "weights": "weight-first-prefill",
        "keys": "bhdt",
    },
    # mixtures of experts (zoo.core.model.experts): the two formulations in the same layout
    "chosen experts (GatherMM)": {"weights": "linear", "keys": "bhdt", "experts": "chosen"},
    "every expert, weighted": {"weights": "linear", "keys": "bhdt", "experts": "all"},
}
DEFAULT_LAYOUT = "default"  # this platform's `zoo.core.model.layout.default_layout()`


def build_decoder(shape: Shape, strategy: str, seed: int = 0) -> torch.nn.Module:
    """The shape's decoder with random weights (std 0.02), as loaded: layout as authored."""
    torch.manual_seed(seed)
    model = get_entry(shape.model).build(shape.config, strategy, shape.capacity)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() >= 2:
                parameter.normal_(0.0, 0.02)
    return model.eval()


def decode_weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of weights one decode step reads: all of them, but one row per embedding table.

    A head tied to the embedding (`lm_head is None`) reads the whole table.
    """
    total = 0
    for module in model.modules():
        for parameter in module.parameters(recurse=False):
            if isinstance(module, torch.nn.Embedding):
                total += parameter[0].nbytes
            else:
                total += parameter.nbytes
    if getattr(model, "lm_head", False) is None:
        total += model.embed_tokens.weight.nbytes
    return total
