"""Qwen3.5 hybrid decoder (GatedDeltaNet + attention) on Core AI."""

from zoo.core.decode import decode_spec, torch_logits
from zoo.core.decode import export_model as export_qwen3_5
from zoo.qwen3_5.config import Qwen3_5Config, UnsupportedConfig
from zoo.qwen3_5.load import load_qwen3_5
from zoo.qwen3_5.model import Qwen3_5

__all__ = [
    "Qwen3_5",
    "Qwen3_5Config",
    "UnsupportedConfig",
    "decode_spec",
    "export_qwen3_5",
    "load_qwen3_5",
    "torch_logits",
]
