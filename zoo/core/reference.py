"""transformers as the reference the zoo's models are held to (tests and recipes only)."""

from __future__ import annotations

import json
from pathlib import Path


def load_reference(directory: str | Path, multimodal_type: str, multimodal_class: str):
    """The transformers model of a checkpoint directory (text-only or multimodal layout)."""
    import transformers

    config = json.loads((Path(directory) / "config.json").read_text())
    if config.get("model_type") == multimodal_type:
        cls = getattr(transformers, multimodal_class)
    else:
        cls = transformers.AutoModelForCausalLM
    return cls.from_pretrained(directory, attn_implementation="eager").eval()


def greedy_reference(model, prompt: list[int], max_new_tokens: int = 8) -> list[int]:
    """transformers' greedy `generate`, without stopping at an end-of-sequence token."""
    import torch

    output = model.generate(
        torch.tensor([prompt]),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=0,
    )
    return output[0, len(prompt) :].tolist()
