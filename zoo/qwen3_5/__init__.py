"""Qwen3.5 hybrid decoder (GatedDeltaNet + attention) on Core AI.

The zoo entry: `config.py` reads config.json, `model.py` is the decoder; this registration
is all the rest of the zoo needs to know about it (`zoo.core.model.entry`)."""

from zoo.core.export.functions import export_model as export_qwen3_5
from zoo.core.model.eager import decode_spec, torch_logits
from zoo.core.model.entry import ModelEntry, TinyCheckpoint, register
from zoo.qwen3_5 import vision
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
        ),
        vision_start_token_id=124,
        image_token_id=125,
        vision_end_token_id=126,
        video_token_id=127,
    ),
    # transformers initialises A_log, dt_bias and the norms to constants
    jitter=("norm", "A_log", "dt_bias"),
    images=dict(
        processor_class="transformers.models.qwen2_vl.image_processing_pil_qwen2_vl."
        "Qwen2VLImageProcessorPil",
        # the released processor's settings, its pixel budget 64 soft tokens (256 patches)
        processor=dict(
            patch_size=16,
            merge_size=2,
            temporal_patch_size=2,
            size={"shortest_edge": 32 * 32 * 4, "longest_edge": 32 * 32 * 64},
            image_mean=[0.5, 0.5, 0.5],
            image_std=[0.5, 0.5, 0.5],
        ),
        specials={120: "<|im_start|>", 121: "<|im_end|>", 124: "<|vision_start|>"}
        | {125: "<|image_pad|>", 126: "<|vision_end|>"},
        chat_template=(
            "{% for m in messages %}<|im_start|>{{ m.role }}\n"
            "{% if m.content is string %}{{ m.content }}{% else %}"
            "{% for item in m.content %}{% if item.type == 'image' %}"
            "<|vision_start|><|image_pad|><|vision_end|>"
            "{% else %}{{ item.text }}{% endif %}{% endfor %}{% endif %}"
            "<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
        ),
    ),
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
        encoders={"vision": vision},  # images: the encoder a component (zoo.core.export.components)
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
