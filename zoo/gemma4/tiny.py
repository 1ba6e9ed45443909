"""Tiny random-weight Gemma 4 checkpoints, written by transformers, for tests and recipes.

They are real checkpoint directories (config.json, model.safetensors, tokenizer.json), so
the code that loads them is the code that loads google/gemma-4-*. Needs `transformers`.
"""

from __future__ import annotations

from pathlib import Path

from zoo.core.reference import load_reference

TEXT = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=6,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    global_head_dim=32,  # full-attention layers have a wider head
    sliding_window=4,
    max_position_embeddings=256,
    layer_types=["sliding_attention", "full_attention"] * 3,
    bos_token_id=2,
    eos_token_id=1,
    pad_token_id=0,
)

VARIANTS: dict[str, dict] = {
    # KV sharing (2 layers reuse), double-wide MLP on them, per-layer embeddings
    "kv-sharing": dict(
        num_kv_shared_layers=2,
        use_double_wide_mlp=True,
        vocab_size_per_layer_input=128,
        hidden_size_per_layer_input=8,
    ),
    # a final-logit softcap small enough to engage on random weights, k == v on full
    # layers with their own KV head count, no per-layer embeddings
    "softcap": dict(
        final_logit_softcapping=0.2,
        attention_k_eq_v=True,
        num_global_key_value_heads=1,
        hidden_size_per_layer_input=0,
    ),
}


def write_tokenizer(
    directory: Path, vocab_size: int, specials: dict[int, str] | None = None
) -> None:
    """A word-level tokenizer over `w0 ... wN`: enough to test text in, text out.

    `specials` (id -> token, e.g. {106: "<end_of_turn>"}) puts a model's special tokens at
    their ids, for chat templates."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    specials = specials or {}
    vocab = {specials.get(i, f"w{i}"): i for i in range(vocab_size)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t in specials.values()])
    tokenizer.save(str(directory / "tokenizer.json"))


def make_tiny_checkpoint(
    directory: str | Path, variant: str = "kv-sharing", seed: int = 0, multimodal: bool = False
) -> Path:
    """Build a random Gemma 4 with transformers and `save_pretrained` it to `directory`."""
    import torch
    import transformers
    from transformers import (
        AutoModelForCausalLM,
        Gemma4Config,
        Gemma4ForConditionalGeneration,
        Gemma4TextConfig,
    )

    directory = Path(directory)
    text = {**TEXT, **VARIANTS[variant]}
    torch.manual_seed(seed)
    if multimodal:
        vision = dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            head_dim=16,
        )
        config = Gemma4Config(text_config=text, vision_config=vision, audio_config=None)
        model = Gemma4ForConditionalGeneration(config)
    else:
        config = Gemma4TextConfig(**text)
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    transformers.utils.logging.disable_progress_bar()  # no "Writing model shards" bars
    model.eval().save_pretrained(directory)
    write_tokenizer(directory, text["vocab_size"])
    return directory


def reference_model(directory: str | Path):
    """The transformers model of a checkpoint directory, for parity checks."""
    return load_reference(directory, "gemma4", "Gemma4ForConditionalGeneration")
