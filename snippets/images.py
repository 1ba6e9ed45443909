"""Gemma 4 with an image: a checkpoint with a vision encoder -> one asset
(text decoder + vision encoder) -> an answer about an image, checked against
transformers. Uses a tiny random checkpoint that ships an image processor,
image tokens and a chat template; point `checkpoint` at a real Gemma 4
directory for the real thing.

Run: python snippets/images.py
     (writes ./tiny-gemma4-vision/, its .aimodel and ./picture.png)
"""

# --8<-- [start:checkpoint]
from zoo import make_tiny_checkpoint

# Gemma4ForConditionalGeneration: the text decoder, a 1-layer vision encoder,
# preprocessor_config.json (at most 70 soft tokens an image), a chat template
checkpoint = make_tiny_checkpoint(
    "gemma4", "tiny-gemma4-vision", variant="kv-sharing", images=True
)
# --8<-- [end:checkpoint]

# --8<-- [start:export]
from zoo import plan_export, run_plan

plan = plan_export(
    checkpoint,
    "tiny-gemma4-vision.aimodel",
    capacity=128,
    chunk=4,
    overwrite=True,
)
print(plan.describe())  # components: decoder + vision
asset = run_plan(plan)
# --8<-- [end:export]

# --8<-- [start:generate]
import numpy as np
from PIL import Image

from zoo import Generator, asset_prompt

rng = np.random.default_rng(0)
picture = Image.fromarray(rng.integers(0, 256, (60, 90, 3), dtype=np.uint8))
picture.save("picture.png")

with Generator(asset) as generator:
    # the image and the text in one user turn, through the asset's own chat
    # template; each image placeholder expanded to the image's soft tokens
    prompt = asset_prompt(generator.asset, "w5 w9 w17", images=[picture])
    tokens = generator.generate(
        prompt, max_new_tokens=8, stop_token_ids=[], images=[picture]
    )
print(len(prompt), "prompt tokens;", tokens)
# --8<-- [end:generate]

# --8<-- [start:compare]
import torch
from transformers.models.gemma4.image_processing_pil_gemma4 import (
    Gemma4ImageProcessorPil,
)

from zoo import reference_model

reference = reference_model(
    "gemma4", checkpoint
)  # Gemma4ForConditionalGeneration
pixels = Gemma4ImageProcessorPil.from_pretrained(checkpoint)(
    picture, return_tensors="pt"
)
ids = torch.tensor([prompt])
expected = reference.generate(
    ids,
    attention_mask=torch.ones_like(ids),
    pixel_values=pixels["pixel_values"],
    image_position_ids=pixels["image_position_ids"],
    max_new_tokens=8,
    do_sample=False,
    eos_token_id=None,
    pad_token_id=0,
)[0, len(prompt) :].tolist()
assert tokens == expected, (tokens, expected)
print("8/8 greedy tokens identical to transformers, with the image")
# --8<-- [end:compare]

# --8<-- [start:qwen]
# Qwen3.5: the same calls; its processor (a pixel budget of 64 soft tokens
# here), its image tokens and its multimodal RoPE come with the checkpoint
qwen = make_tiny_checkpoint("qwen3_5", "tiny-qwen3_5-vision", images=True)
qwen_asset = run_plan(
    plan_export(
        qwen, "tiny-qwen3_5-vision.aimodel", capacity=128, overwrite=True
    )
)
with Generator(qwen_asset) as generator:
    prompt = asset_prompt(generator.asset, "w5 w9", images=[picture])
    print(generator.generate(prompt, 8, stop_token_ids=[], images=[picture]))
# --8<-- [end:qwen]

# --8<-- [start:sizes]
import json

import torch

from zoo.core.asset.encoders import ENCODERS
from zoo.gemma4 import vision as gemma4_vision
from zoo.qwen3_5 import vision as qwen3_5_vision
from zoo.released import released_configs


def encoder_size(name: str, raw: dict, encoder) -> dict:
    values = sum(p.numel() for p in encoder.parameters())
    return {
        "checkpoint": name,
        "parameters": f"{values / 1e6:.0f} M",
        "float32": f"{4 * values / 1e9:.2f} GB",
        "patches an image": encoder.config.patches,
    }


size_table = []
with torch.device("meta"):  # shapes only: nothing allocated
    for name, path in released_configs("gemma4").items():
        raw = json.loads(path.read_text())
        width = raw["text_config"]["hidden_size"]
        config = gemma4_vision.VisionConfig.of(raw, width)  # 280 soft tokens
        encoder = gemma4_vision.Gemma4Vision(config)
        size_table.append(encoder_size(name, raw, encoder))
    for family in ("qwen3_5", "qwen3_5_moe"):
        for name, path in released_configs(family).items():
            raw = json.loads(path.read_text())
            tokens = ENCODERS["vision"].default_tokens  # 1024
            budget = {"longest_edge": tokens * 32 * 32}
            config = qwen3_5_vision.VisionConfig.of(raw, {"size": budget})
            encoder = qwen3_5_vision.Qwen3_5Vision(config)
            size_table.append(encoder_size(name, raw, encoder))
for row in size_table:
    print(row)
# --8<-- [end:sizes]
# what the page says of them
sizes = {row["checkpoint"]: row["parameters"] for row in size_table}
assert (sizes["gemma-4-E2B-it"], sizes["gemma-4-31B-it"]) == ("169 M", "171 M")
assert (sizes["Qwen3.5-0.8B"], sizes["Qwen3.5-27B"]) == ("327 M", "344 M")
