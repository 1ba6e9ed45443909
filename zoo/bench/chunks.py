"""Which prefill chunk to export with, from the bench's chunk sweep (`--chunks`).

`Generator` reads a prompt in whole chunks through the prefill function and the rest one
token at a time through decode, so a bigger chunk is faster per token only for the tokens it
covers: a 16-token prompt under a 64-token chunk is 16 decode steps. The sweep's rows give
each chunk's prefill rate and decode step; the choice is the chunk whose estimated time to
first token is closest to the best chunk's for every prompt length (the smallest worst
ratio), over the prompt lengths the bench reports.
"""

from __future__ import annotations

PROMPTS = (16, 64, 512)


def first_token_s(row: dict, prompt: int) -> float:
    """Estimated seconds to read `prompt` tokens with the row's chunk: whole chunks at its
    prefill rate, the remainder at its decode step."""
    chunk = row["chunk"]
    whole = prompt // chunk * chunk
    return whole / row["prefill tok/s"] + (prompt - whole) * row["decode ms"] / 1e3


def chunk_choice(rows: list[dict], prompts: tuple[int, ...] = PROMPTS) -> int:
    best = {p: min(first_token_s(row, p) for row in rows) for p in prompts}

    def worst_ratio(row: dict) -> float:
        return max(first_token_s(row, p) / best[p] for p in prompts)

    return min(rows, key=worst_ratio)["chunk"]
