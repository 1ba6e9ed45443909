"""Gemma 4 text decoder on Core AI: load a checkpoint, export, generate.

The zoo entry: `config.py` reads config.json, `model.py` is the decoder; this registration
is all the rest of the zoo needs to know about it (`zoo.core.model.entry`)."""

from zoo.core.export.functions import export_model as export_gemma4
from zoo.core.model.eager import decode_spec, torch_logits
from zoo.core.model.entry import ModelEntry, TinyCheckpoint, register
from zoo.gemma4 import audio, vision
from zoo.gemma4.config import Gemma4Config, UnsupportedConfig
from zoo.gemma4.model import Gemma4


def _kv_sharing_weights(config: Gemma4Config) -> list[str]:
    """KV-sharing layers have no k/v weights of their own; checkpoints may still carry them."""
    return [
        f"layers.{i}.self_attn.{name}"
        for i, mode in enumerate(config.kv_sharing_modes())
        if mode == "reuse"
        for name in ("k_proj", "v_proj", "k_norm", "v_norm")
    ]


# Tiny random checkpoints for the tests and recipes: 6 layers, sliding/full alternating.
TINY = TinyCheckpoint(
    text=dict(
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
    ),
    variants={
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
        # 26B-A4B's design: 6 experts (2 per token) beside each layer's MLP, no per-layer
        # embeddings, k == v on full layers
        "moe": dict(
            enable_moe_block=True,
            num_experts=6,
            top_k_experts=2,
            moe_intermediate_size=32,
            hidden_size_per_layer_input=0,
            attention_k_eq_v=True,
            num_global_key_value_heads=1,
            initializer_range=0.06,  # routes that are not near-uniform, varied tokens (seed 1)
        ),
    },
    towers=dict(
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            head_dim=16,
            use_clipped_linears=True,
        ),
        audio_config=None,
        boi_token_id=124,
        image_token_id=125,
        eoi_token_id=126,
    ),
    jitter=("position_embedding_table",),  # ones at init: every position alike
    images=dict(
        processor=dict(max_soft_tokens=70),  # 630 patches of 16 x 16 pixels
        specials={105: "<start_of_turn>", 106: "<end_of_turn>", 124: "<|image>"}
        | {125: "<|image|>", 126: "<image|>"},
        chat_template=(
            "{% for m in messages %}<start_of_turn>{{ m.role }}\n"
            "{% if m.content is string %}{{ m.content }}{% else %}"
            "{% for item in m.content %}{% if item.type == 'image' %}<|image|>"
            "{% elif item.type == 'audio' %}<|audio|>"
            "{% else %}{{ item.text }}{% endif %}{% endfor %}{% endif %}"
            "<end_of_turn>\n{% endfor %}"
            "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
        ),
    ),
    # E2B/E4B's audio tower, small: 2 conformer layers of width 32 over 32 mel bins (the
    # extractor's 128 bins quartered by the subsampling convs: channels[0] // 4 of them)
    audio=dict(
        config=dict(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            subsampling_conv_channels=[32, 8],
            output_proj_dims=48,
        ),
        tokens=dict(boa_token_id=121, audio_token_id=122, eoa_token_index=123),
        feature_extractor=dict(feature_size=32),
        audio_seq_length=50,  # 2 s a clip
        specials={121: "<|audio>", 122: "<|audio|>", 123: "<audio|>"},
    ),
)

ENTRY = register(
    ModelEntry(
        name="gemma4",
        title="Gemma 4",
        config=Gemma4Config,
        model=Gemma4,
        transformers_name="Gemma4",
        tiny=TINY,
        towers=("vision_", "audio_", "embed_vision", "embed_audio"),
        unused_weights=_kv_sharing_weights,
        sidecar_option="ple_sidecar",  # the per-layer-embedding table (zoo.core.asset.sidecar)
        # images and audio: each encoder a component of the asset (zoo.core.export.components)
        encoders={"vision": vision, "audio": audio},
    )
)
load_gemma4 = ENTRY.load

__all__ = ["ENTRY", "Gemma4", "Gemma4Config", "UnsupportedConfig", "decode_spec", "export_gemma4"]
__all__ += ["load_gemma4", "torch_logits"]
