"""What one generation asks for, checked once (`GenerationRequest`): the prompt, how many
new tokens, where to stop, and how to pick each token. No torch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from zoo.core.asset.decode_spec import ContextFullError, DecodeSpec


@dataclass(frozen=True)
class GenerationRequest:
    """A generation's options; `fitted(spec)` checks them against an asset."""

    prompt_ids: tuple[int, ...]
    max_new_tokens: int | None = None  # None: as many as the context holds after the prompt
    stop_token_ids: tuple[int, ...] | None = None  # None: the asset's (its generation config)
    temperature: float = 0.0  # 0: greedy
    top_k: int | None = None  # sample among the k likeliest (None: all)
    seed: int | None = None  # the sampling's random seed
    # images (file paths or PIL images) for an asset with a vision component, audio clips
    # (WAV paths, or (samples, rate)) for one with an audio component: their soft tokens
    # replace the prompt's placeholder tokens of their kind, in order (zoo.core.host.media)
    images: tuple = ()
    audio: tuple = ()

    def __post_init__(self) -> None:
        new = self.max_new_tokens
        if new is not None and (isinstance(new, bool) or not isinstance(new, int)):
            raise ValueError(f"max_new_tokens must be a whole number, got {new!r}")
        if new is not None and new < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {new}")
        t = self.temperature
        if isinstance(t, bool) or not (isinstance(t, int | float) and 0 <= t < float("inf")):
            raise ValueError(f"temperature must be >= 0 (0: greedy), got {t!r}")
        k = self.top_k
        if k is not None and (isinstance(k, bool) or not isinstance(k, int)):
            raise ValueError(f"top_k must be a whole number >= 1, got {k!r}")
        if k is not None and k < 1:
            raise ValueError(f"top_k must be at least 1 (or None: all tokens), got {k}")
        if not self.prompt_ids:
            raise ValueError("the prompt has no tokens: give it at least one")

    def fitted(self, spec: DecodeSpec) -> GenerationRequest:
        """This request with its stops and length resolved for an asset, refused before any
        decoding if its tokens are outside the vocabulary or it cannot fit the context. The
        last new token is never fed back, so N new tokens take prompt + N - 1 positions."""
        check_token_ids(self.prompt_ids, spec.vocab_size)
        stops = spec.stop_token_ids if self.stop_token_ids is None else self.stop_token_ids
        check_token_ids(stops, spec.vocab_size, "stop id")
        room = spec.capacity - len(self.prompt_ids) + 1
        if room < 1:
            raise ContextFullError(
                f"the context holds {spec.capacity} tokens and the prompt has "
                f"{len(self.prompt_ids)}: shorten it or export with a larger --capacity"
            )
        wanted = room if self.max_new_tokens is None else self.max_new_tokens
        if wanted > room:
            raise ContextFullError(
                f"the context holds {spec.capacity} tokens: a prompt of "
                f"{len(self.prompt_ids)} leaves room for {room} new, not {wanted}; ask for "
                f"fewer (--max-new-tokens {room}) or export with a larger --capacity"
            )
        return replace(self, max_new_tokens=wanted, stop_token_ids=tuple(stops))


def check_token_ids(ids: Sequence[int], vocab_size: int, what: str = "token id") -> None:
    """Token ids must be whole numbers in the vocabulary: a negative id would wrap around
    (-1 reads the last embedding row) and a float be truncated, silently."""
    for token in ids:
        if isinstance(token, bool) or not isinstance(token, int | np.integer):
            raise ValueError(f"{what}s must be whole numbers, got {token!r}")
        if not 0 <= token < vocab_size:
            raise ValueError(f"{what} {token} is outside the vocabulary (0..{vocab_size - 1})")
