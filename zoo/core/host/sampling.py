"""How the next token is picked from a row of logits: greedy, or sampled from the softmax
of the top k over a temperature (`Generator`, and speculative decoding's check of a draft's
guesses, which needs the distribution itself). numpy only."""

from __future__ import annotations

import numpy as np


def distribution(logits: np.ndarray, temperature: float, top_k: int | None) -> np.ndarray:
    """The probabilities `sample` draws from: all on the argmax when `temperature` is 0,
    else the softmax of the top-k logits over `temperature`."""
    if temperature <= 0:
        probabilities = np.zeros(logits.size)
        probabilities[int(np.argmax(logits))] = 1.0
        return probabilities
    scaled = logits.astype(np.float64) / temperature
    if top_k is not None and top_k < scaled.size:
        cutoff = np.partition(scaled, -top_k)[-top_k]
        scaled = np.where(scaled >= cutoff, scaled, -np.inf)
    probabilities = np.exp(scaled - scaled.max())
    return probabilities / probabilities.sum()


def draw(probabilities: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """A token from `probabilities` (renormalised, so a part of `distribution`'s will do):
    its most likely when `temperature` is 0, with no random number drawn."""
    if temperature <= 0:
        return int(np.argmax(probabilities))
    return int(rng.choice(probabilities.size, p=probabilities / probabilities.sum()))


def sample(
    logits: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator
) -> int:
    """Greedy when `temperature` is 0; else softmax sampling over the top-k logits."""
    if temperature <= 0:
        return int(np.argmax(logits))
    return draw(distribution(logits, temperature, top_k), temperature, rng)
