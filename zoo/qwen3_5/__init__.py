"""Qwen3.5 hybrid decoder (GatedDeltaNet + attention) on Core AI.

The zoo entry: `config.py` reads config.json, `model.py` is the decoder; this registration
is all the rest of the zoo needs to know about it (`zoo.core.entry`)."""

from zoo.core.decode import export_model as export_qwen3_5
from zoo.core.eager import decode_spec, torch_logits
from zoo.core.entry import ModelEntry, TinyCheckpoint, register
from zoo.qwen3_5.config import Qwen3_5Config, UnsupportedConfig
from zoo.qwen3_5.model import Qwen3_5

# Tiny random checkpoints for the tests and recipes: 3 GatedDeltaNet layers, then 1 full
# attention (`num_hidden_layers=8` gives two of each period).
TINY = TinyCheckpoint(
    text=dict(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        linear_conv_kernel_dim=4,
        linear_key_head_dim=8,
        linear_value_head_dim=8,
        linear_num_key_heads=2,
        linear_num_value_heads=4,  # fewer key heads than value heads
        max_position_embeddings=256,
        tie_word_embeddings=False,
        eos_token_id=1,
        bos_token_id=2,
        pad_token_id=0,
    ),
    towers=dict(
        vision_config=dict(
            depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64
        )
    ),
    # transformers initialises A_log, dt_bias and the norms to constants
    jitter=("norm", "A_log", "dt_bias"),
)

ENTRY = register(
    ModelEntry(
        name="qwen3_5",
        title="Qwen3.5",
        config=Qwen3_5Config,
        model=Qwen3_5,
        transformers_name="Qwen3_5",
        tiny=TINY,
        towers=("visual.", "vision"),  # and `mtp.*` (multi-token prediction): not under model.
    )
)
load_qwen3_5 = ENTRY.load

__all__ = [
    "ENTRY",
    "Qwen3_5",
    "Qwen3_5Config",
    "UnsupportedConfig",
    "decode_spec",
    "export_qwen3_5",
]
__all__ += ["load_qwen3_5", "torch_logits"]
