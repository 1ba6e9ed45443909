"""GPT-OSS text decoder (gpt-oss-20b, gpt-oss-120b) on Core AI.

The zoo entry: `config.py` reads config.json, `model.py` is the decoder; this registration
is all the rest of the zoo needs to know about it (`zoo.core.model.entry`)."""

from zoo.core.model.entry import ModelEntry, TinyCheckpoint, register
from zoo.gpt_oss.config import GptOssConfig
from zoo.gpt_oss.model import GptOss

# Tiny random checkpoints for the tests and recipes: gpt-oss-20b's shape in small (sliding
# and full layers alternating with a window of 4 under the tests' 64-token cache, sinks,
# yarn RoPE as released, 8 experts of which 2 per token with biases).
TINY = TinyCheckpoint(
    text=dict(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=32,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_local_experts=8,
        num_experts_per_tok=2,
        sliding_window=4,
        max_position_embeddings=131_072,  # as released: yarn's factor 32 over 4096
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        initializer_range=0.2,  # varied greedy tokens and routes on random weights
    ),
    jitter=("norm", "bias", "sinks"),  # initialised to ones and zeros
)

ENTRY = register(
    ModelEntry(
        name="gpt_oss",
        title="GPT-OSS",
        config=GptOssConfig,
        model=GptOss,
        transformers_name="GptOss",
        tiny=TINY,
        text_only=True,
    )
)
load_gpt_oss = ENTRY.load

__all__ = ["ENTRY", "GptOss", "GptOssConfig", "load_gpt_oss"]
