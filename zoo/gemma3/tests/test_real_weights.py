"""Gemma 3 270M, the real trained weights (`python -m zoo.fetch`), on the runtime.

The fp32 asset (the dequantized registry GGUF) must decode exactly what transformers decodes
on the same weights: 32 greedy tokens on two completion prompts (a base model: no chat
template). Fetched and exported once per zoo version (`zoo.fetch`).
"""

from __future__ import annotations

import pytest

from zoo.testing import check_real_perplexity, check_real_text, real_model_fixture

pytestmark = pytest.mark.real_weights  # the suite's tiers: pyproject.toml's markers

REAL = "gemma3-270m"
PROMPTS = ["The capital of France is", "Once upon a time, there was a"]


real = real_model_fixture(REAL)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_runtime_greedy_equals_transformers_on_the_real_weights(real, prompt):
    check_real_text(real, prompt, chat=False)


def test_runtime_perplexity_of_real_text_equals_eager(real):
    check_real_perplexity(real, REAL)
