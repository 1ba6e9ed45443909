"""Gemma 4 text decoder on Core AI: load a checkpoint, export, generate."""

from zoo.core.decode import decode_spec, torch_logits
from zoo.core.decode import export_model as export_gemma4
from zoo.gemma4.config import Gemma4Config, UnsupportedConfig
from zoo.gemma4.load import load_gemma4
from zoo.gemma4.model import Gemma4

__all__ = [
    "Gemma4",
    "Gemma4Config",
    "UnsupportedConfig",
    "decode_spec",
    "export_gemma4",
    "load_gemma4",
    "torch_logits",
]
