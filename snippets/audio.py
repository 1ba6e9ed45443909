"""Gemma 4 E2B/E4B hearing audio: a checkpoint with an audio encoder -> one
asset (text decoder + vision encoder + audio encoder) -> an answer about a
WAV clip, checked against transformers. Uses a tiny random checkpoint that
ships its feature extractor's settings, audio tokens and a chat template;
point `checkpoint` at a real Gemma 4 E2B or E4B directory for the real thing.

Run: python snippets/audio.py
     (writes ./tiny-gemma4-audio/, its .aimodel and ./clip.wav)
"""

# --8<-- [start:checkpoint]
from zoo import make_tiny_checkpoint

# Gemma4ForConditionalGeneration with a 2-layer audio encoder, its
# processor_config.json (32 mel bins, clips up to 2 s) and audio tokens
checkpoint = make_tiny_checkpoint(
    "gemma4", "tiny-gemma4-audio", "kv-sharing", images=True, audio=True
)
# --8<-- [end:checkpoint]

# --8<-- [start:export]
from zoo import plan_export, run_plan

plan = plan_export(
    checkpoint,
    "tiny-gemma4-audio.aimodel",
    capacity=128,
    chunk=4,
    overwrite=True,
)
print(plan.describe())  # components: decoder + vision + audio
asset = run_plan(plan)
# --8<-- [end:export]

# --8<-- [start:clip]
import wave

import numpy as np

# 1.2 s of a 440 Hz tone and some noise, 16 kHz 16-bit mono: what the
# feature extractor reads (other rates are refused, not resampled)
rng = np.random.default_rng(0)
t = np.arange(int(16000 * 1.2)) / 16000
sound = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(len(t))
pcm = np.round(sound * 32767).astype(np.int16)
with wave.open("clip.wav", "wb") as file:
    file.setnchannels(1)
    file.setsampwidth(2)
    file.setframerate(16000)
    file.writeframes(pcm.tobytes())
# --8<-- [end:clip]

# --8<-- [start:generate]
from zoo import Generator, asset_prompt

with Generator(asset) as generator:
    # the clip and the text in one user turn, through the asset's own chat
    # template; the clip's placeholder expanded to a token every 40 ms
    prompt = asset_prompt(generator.asset, "w5 w9 w17", audio=["clip.wav"])
    tokens = generator.generate(
        prompt, max_new_tokens=8, stop_token_ids=[], audio=["clip.wav"]
    )
print(len(prompt), "prompt tokens;", tokens)
# --8<-- [end:generate]

# --8<-- [start:compare]
import json

from transformers import Gemma4AudioFeatureExtractor

from zoo import greedy_reference, reference_model

settings = json.loads(open(checkpoint / "processor_config.json").read())
settings = {
    key: value
    for key, value in settings["feature_extractor"].items()
    if not key.endswith(("_type", "_class"))  # names, not settings
}
extractor = Gemma4AudioFeatureExtractor(**settings)
features = extractor([pcm / 32768], return_tensors="pt")
reference = reference_model("gemma4", checkpoint)
# its greedy generate, with input_features and input_features_mask
expected = greedy_reference(reference, prompt, 8, **features)
assert tokens == expected, (tokens, expected)
print("8/8 greedy tokens identical to transformers, with the clip")
# --8<-- [end:compare]

# --8<-- [start:sizes]
import torch

from zoo.gemma4 import audio as gemma4_audio
from zoo.released import released_configs

audio_sizes = {}
with torch.device("meta"):  # shapes only: nothing allocated
    for name, path in released_configs("gemma4").items():
        raw = json.loads(path.read_text())
        if not raw.get("audio_config"):
            continue  # 26B-A4B and 31B have no audio tower
        budget = {"audio_seq_length": 750, "settings": {"feature_size": 128}}
        width = raw["text_config"]["hidden_size"]
        config = gemma4_audio.AudioConfig.of(raw, width, budget)
        encoder = gemma4_audio.Gemma4Audio(config)
        values = sum(p.numel() for p in encoder.parameters())
        audio_sizes[name] = f"{values / 1e6:.0f} M, {4 * values / 1e9:.2f} GB"
print(audio_sizes)  # float32, 30 s clips: 3,000 mel frames, 750 soft tokens
# --8<-- [end:sizes]
assert audio_sizes["gemma-4-E2B-it"] == "307 M, 1.23 GB", audio_sizes
