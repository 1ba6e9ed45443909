"""Gemma 4 12B (`gemma4_unified`) on Core AI: its text decoder, and audio (raw waveform frames,
no encoder); load a checkpoint, export, generate.

The zoo entry: `config.py` reads config.json, `model.py` is Gemma 4's decoder under this
entry's name; this registration is all the rest of the zoo needs to know about it."""

from zoo.core.model.entry import ModelEntry, TinyCheckpoint, register
from zoo.gemma4_unified import audio
from zoo.gemma4_unified.config import Gemma4UnifiedConfig
from zoo.gemma4_unified.model import Gemma4Unified

# Tiny random checkpoints for the tests and recipes: the 12B's design in small (sliding
# and full layers, a wider head and one KV head with k == v on the full ones, a softcap)
TINY = TinyCheckpoint(
    text=dict(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        global_head_dim=32,
        num_global_key_value_heads=1,
        attention_k_eq_v=True,
        sliding_window=4,
        max_position_embeddings=256,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 2,
        final_logit_softcapping=30.0,
        bos_token_id=2,
        eos_token_id=1,
        pad_token_id=0,
    ),
    towers=dict(
        vision_config=dict(mm_embed_dim=32, output_proj_dims=32, mm_posemb_size=64),
        audio_config=None,
    ),
    # audio without an encoder: raw waveform frames (40 samples here, 640 released) a token
    audio=dict(
        config=dict(audio_embed_dim=40),
        tokens=dict(boa_token_id=121, audio_token_id=122, eoa_token_index=123),
        feature_extractor=dict(feature_size=40, audio_samples_per_token=40),
        audio_seq_length=50,
        specials={105: "<start_of_turn>", 106: "<end_of_turn>"}
        | {121: "<|audio>", 122: "<|audio|>", 123: "<audio|>"},
        chat_template=(
            "{% for m in messages %}<start_of_turn>{{ m.role }}\n"
            "{% if m.content is string %}{{ m.content }}{% else %}"
            "{% for item in m.content %}{% if item.type == 'audio' %}<|audio|>"
            "{% else %}{{ item.text }}{% endif %}{% endfor %}{% endif %}"
            "<end_of_turn>\n{% endfor %}"
            "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
        ),
    ),
)

ENTRY = register(
    ModelEntry(
        name="gemma4_unified",
        title="Gemma 4 12B",
        config=Gemma4UnifiedConfig,
        model=Gemma4Unified,
        transformers_name="Gemma4Unified",
        tiny=TINY,
        towers=("vision_embedder", "embed_vision", "embed_audio", "audio_tower", "audio_embedder"),
        encoders={"audio": audio},  # raw waveform frames, no encoder (zoo.core.export.components)
    )
)
load_gemma4_unified = ENTRY.load

__all__ = ["ENTRY", "Gemma4Unified", "Gemma4UnifiedConfig", "load_gemma4_unified"]
