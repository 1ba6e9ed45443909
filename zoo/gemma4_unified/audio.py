"""Gemma 4 12B's audio path (`gemma4_unified`), for export to Core AI: no audio encoder.
Each soft token is 40 ms of the raw 16 kHz waveform (640 samples), put in the decoder's
width by `embed_audio` (an RMS norm without scale, then a projection), what transformers
5.23 `Gemma4UnifiedModel.get_audio_features` computes; the parity tests hold it to that.

The host (`zoo.core.host.audio.waveform_frames`) cuts a WAV clip into those frames, as
`Gemma4UnifiedAudioFeatureExtractor` does, padded to the function's token budget.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from zoo.core.checkpoint.weights import build_and_load
from zoo.core.io.files import read_json
from zoo.gemma4 import audio as gemma4_audio
from zoo.gemma4.vision import MultimodalEmbedder


class Gemma4UnifiedAudio(nn.Module):
    """`forward(input_features [1, N, samples a token]) -> soft tokens [1, N, text
    width]`: the clip's tokens first (the host keeps as many as it has frames)."""

    input_names = ("input_features",)

    def __init__(self, samples: int, eps: float, text_width: int, tokens: int) -> None:
        super().__init__()
        self.samples, self.tokens = samples, tokens
        self.embed_audio = MultimodalEmbedder(samples, eps, text_width)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.embed_audio(frames)

    def example_inputs(self) -> tuple[torch.Tensor]:
        return (torch.zeros(1, self.tokens, self.samples),)


def checkpoint_name(key: str) -> str | None:
    """Our name of an audio tensor (transformers' under `model.`), None for the rest."""
    name = key.removeprefix("model.")
    return name if name.startswith("embed_audio.") else None


def has_encoder(directory: str | Path) -> bool:
    """Whether a checkpoint has the 12B's audio embedder (config.json's `audio_config`)."""
    raw = read_json(Path(directory) / "config.json")
    return raw.get("model_type") == "gemma4_unified" and bool(raw.get("audio_config"))


def load_encoder(
    directory: str | Path, text_hidden_size: int, processor: dict
) -> Gemma4UnifiedAudio:
    """The audio embedder of a 12B checkpoint, its weights read (float32, eval), for clips
    of at most `processor`'s token budget."""
    raw = read_json(Path(directory) / "config.json")
    audio = raw.get("audio_config") or {}
    samples, eps = audio.get("audio_embed_dim", 640), audio.get("rms_norm_eps", 1e-6)

    def build() -> Gemma4UnifiedAudio:
        return Gemma4UnifiedAudio(samples, eps, text_hidden_size, tokens(processor))

    return build_and_load(build, directory, checkpoint_name).float().eval()


def processor(directory: str | Path) -> dict:
    """What the host needs to turn a WAV file into this checkpoint's audio inputs (stored
    in the asset's metadata.json): Gemma 4's audio tokens and budget, the 12B's framing."""
    return gemma4_audio.processor(directory) | {"kind": "gemma4_unified_audio"}


tokens, with_tokens = gemma4_audio.tokens, gemma4_audio.with_tokens
