"""Speculative decoding by prompt lookup: several proposed tokens checked in one call.

A decode call yields one token. When the text repeats what the context already holds
(editing, summarising, code), the tokens that followed the last n-gram's earlier
occurrence are a good guess for what comes next (prompt lookup: no second model). The
asset's `score` function (`score_chunk` tokens in, a row of logits for each out, their KV
written) checks `score_chunk - 1` such guesses in one call: fed `[last, d1, ..., d(k-1)]`,
row i is the model's choice after the i-th; the guesses up to the first the model would not
have chosen are kept, and the model's own choice after them comes free. Greedy output is
the plain greedy output, token for token (the model chooses every kept token itself).

Rewinding after a rejected guess moves the host's position back: the KV written for the
rejected guesses sits in cache columns past the position, which every mask hides until a
later call writes them again (`zoo.core.asset.decode_spec.DecodeSpec.host_inputs`: the columns are
absolute positions, sliding windows included). Recurrent states (Qwen3.5's GatedDeltaNet)
cannot be rewound: refused.

A draft asset (`DraftAsset`: a smaller model with the same tokenizer, or the model's own
first layers, `zoo.core.export.ranges.keep_first_layers`) guesses instead of the lookup: its greedy
tokens, one decode call of its own each; its context follows the target's by rewinding past the
guesses the target refused. Its guesses are certain (greedy), so the accept/reject rule
above holds for sampling as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from zoo.core.asset.decode_spec import KV_STATES
from zoo.core.host.sampling import distribution, draw, sample


def lookup_draft(
    context: Sequence[int], count: int, longest: int = 3, shortest: int = 2
) -> list[int]:
    """Up to `count` tokens that followed the latest earlier occurrence of the context's
    last n tokens (n from `longest` down to `shortest`); none if it never occurred. A
    single token recurs too often to predict much: a wrong guess costs a whole verify call
    (measured: 1-gram guesses made code and chat prompts slower than plain decoding)."""
    for n in range(min(longest, len(context) - 1), shortest - 1, -1):
        tail = list(context[-n:])
        for start in range(len(context) - n - 1, -1, -1):
            if list(context[start : start + n]) == tail:
                follows = list(context[start + n : start + n + count])
                if follows:
                    return follows
    return []


def check_rewindable(spec) -> int:
    """The tokens one verify call checks (the asset's `score_chunk`), after checking that
    the asset (its `DecodeSpec`) has a score function and only KV caches (rewound by
    position)."""
    if not spec.score_chunk or spec.score_chunk < 2:
        raise ValueError(
            "speculative decoding checks guesses with the asset's verify function: export "
            "it with one (zoo export ... --verify 8, or score_chunk=8 in Python)"
        )
    check_kv_only(spec)
    return spec.score_chunk


def check_kv_only(spec, role: str = "") -> None:
    """Refuse an asset with recurrent states: it cannot be rewound past a refused guess.
    `role` names the asset in the refusal ("the draft x.aimodel")."""
    kept = [name for name in spec.state_shapes if not name.startswith(KV_STATES)]
    if kept:
        raise ValueError(
            f"{role or spec.model}: states {kept[:2]} are recurrent and cannot be rewound "
            "after a rejected guess; speculative decoding needs KV caches only"
        )


def check_same_vocabulary(target: str | Path, draft: str | Path) -> None:
    """A draft's token ids must mean what the target's mean: the same tokenizer vocabulary
    (tokenizer.json's model and added tokens; its chat template may differ)."""

    def vocabulary(asset: Path):
        path = Path(asset) / "tokenizer.json"
        if not path.is_file():
            return None
        tokenizer = json.loads(path.read_text(encoding="utf-8"))
        return tokenizer.get("model"), tokenizer.get("added_tokens")

    ours, theirs = vocabulary(target), vocabulary(draft)
    if ours is None or theirs is None or ours != theirs:
        raise ValueError(
            f"the draft {Path(draft).name} and the model {Path(target).name} must share one "
            "tokenizer (the same tokenizer.json vocabulary in both assets): "
            + ("one has no tokenizer.json" if None in (ours, theirs) else "theirs differ")
        )


class DraftAsset:
    """Guesses from a draft asset (a `Generator` over it): its greedy continuation of the
    context, `count` tokens, one draft decode call each. What the draft fed and the target
    refused is rewound before the next guesses (KV caches only)."""

    def __init__(self, generator) -> None:
        check_kv_only(generator.spec)
        self.generator = generator
        self.fed: list[int] = []  # the ids whose KV the draft holds, in order
        self.feeds = 0  # the draft's `feed` calls: one a guess (the first catches up)

    def __call__(self, context: list[int], count: int) -> list[int]:
        generator = self.generator
        kept = 0  # what the draft fed that the context still holds; the last id is fed again
        while kept < min(len(self.fed), len(context) - 1) and self.fed[kept] == context[kept]:
            kept += 1
        count = min(count, generator.spec.capacity - len(context) + 1)  # the last is not fed
        if count <= 0:
            return []  # the draft's context is full: the target decodes on its own
        generator.rewind(kept)
        self.fed[kept:] = context[kept:]
        logits = generator.feed(context[kept:])
        self.feeds += 1
        guesses = [int(np.argmax(logits))]
        while len(guesses) < count:
            logits = generator.feed(guesses[-1:])
            self.fed.append(guesses[-1])
            self.feeds += 1
            guesses.append(int(np.argmax(logits)))
        return guesses


def generate_by_lookup(
    generator,
    prompt_ids: Sequence[int],
    max_new_tokens: int,
    stop_token_ids: Sequence[int] | None = None,
    on_token: Callable[[int], None] | None = None,
    longest: int = 3,
    draft: Callable[[list[int], int], list[int]] | None = None,
    temperature: float = 0.0,
    top_k: int | None = None,
    seed: int | None = None,
) -> tuple[list[int], dict]:
    """The continuation of `prompt_ids` with prompt-lookup guesses verified by the asset's
    score function; the tokens, and how many calls and guesses it took. `draft` (context,
    count) -> guesses replaces the lookup (another source of guesses).

    Greedy by default: the tokens are plain greedy decoding's. With a `temperature`, each
    guess g is kept with probability p(g) (the standard rule for a draft that proposes g
    for certain: min(1, p(g) / 1)); the first one not kept is replaced by a draw from p
    without g, renormalised; so every token is drawn from the model's own distribution,
    as `Generator.run` draws it (tested as a distribution)."""
    width = check_rewindable(generator.spec)  # the widest verify call
    widths = generator.spec.widths
    if len(prompt_ids) + max_new_tokens - 1 > generator.spec.capacity:  # the last is not fed
        raise ValueError(
            f"{len(prompt_ids)} prompt tokens and {max_new_tokens} new ones do not fit the "
            f"context of {generator.spec.capacity}"
        )
    # as `Generator.generate`: None stops at the asset's stop ids (included in the result)
    stops = set(generator.spec.stop_token_ids if stop_token_ids is None else stop_token_ids)
    rng = np.random.default_rng(seed)

    def choose(logits: np.ndarray) -> int:
        return sample(logits, temperature, top_k, rng)

    generator.reset()
    context = list(prompt_ids)
    token = choose(generator.feed(context))
    new: list[int] = []
    stats = {"decode calls": 0, "verify calls": 0, "guesses": 0, "accepted": 0}
    stats["narrower verify calls"] = 0  # calls of a verify width below the widest

    def keep(chosen: int) -> bool:
        """Append a token; False when generation is over."""
        new.append(chosen)
        context.append(chosen)
        if on_token is not None:
            on_token(chosen)
        return chosen not in stops and len(new) < max_new_tokens

    if not keep(token):
        return new, stats
    while True:
        # guesses that fit the request, and a whole verify call that fits the context
        room = min(width - 1, max_new_tokens - len(new))
        room = min(room, generator.spec.capacity - generator.position - width)
        guesses = []
        if room > 0:
            guesses = draft(context, room) if draft else lookup_draft(context, room, longest)
            guesses = list(guesses)[:room]
            # a draft whose embedding has more rows than the model's (padded otherwise) may
            # guess an id the model cannot hold: it is a wrong guess, and the rest after it
            vocab = generator.spec.vocab_size
            inside = next((i for i, g in enumerate(guesses) if not 0 <= g < vocab), None)
            guesses = guesses if inside is None else guesses[:inside]
        if not guesses:
            stats["decode calls"] += 1
            token = choose(generator.feed([token]))
            if not keep(token):
                return new, stats
            continue
        piece = [token, *guesses]
        call = next(w for w in widths if w >= len(piece))  # the narrowest call that holds them
        piece += [guesses[-1]] * (call - len(piece))  # a whole call; the extra is ignored
        start = generator.position
        rows = generator.verify(piece)
        stats["verify calls"] += 1
        stats["narrower verify calls"] += call < width
        stats["guesses"] += len(guesses)
        accepted, last = 0, None
        for guess, row in zip(guesses, rows, strict=False):
            p = distribution(row, temperature, top_k)
            if rng.random() < p[guess]:  # greedy: p is 1 on the argmax, 0 elsewhere
                accepted += 1
                continue
            p[guess] = 0.0  # rejected: a draw from the rest of p
            last = draw(p, temperature, rng)
            break
        if last is None:  # every guess kept: the row after them is the model's next choice
            last = choose(rows[accepted])
        stats["accepted"] += accepted
        generator.rewind(start + 1 + accepted)  # past `token` and the kept guesses
        for kept in [*guesses[:accepted], last]:
            if not keep(int(kept)):
                return new, stats
        token = new[-1]
