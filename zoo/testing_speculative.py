"""Speculative decoding checked on every entry's tiny assets (`zoo.testing.check_runtime_greedy`
calls it on the assets exported with a verify function)."""

from __future__ import annotations


def greedy_and_lookup(asset: str, prompt: list[int]) -> dict:
    """`runtime_greedy`'s tokens and logits; where the asset has a verify function,
    speculative decoding beside plain greedy decoding, 16 tokens each: prompt lookup after
    the prompt said three times, and guesses that are plain greedy's own tokens with every
    third call's second guess wrong (so calls keep all, some and none of their guesses);
    or why speculation refuses the asset (recurrent states). Isolate it."""
    from zoo.core.host.generator import Generator, runtime_greedy
    from zoo.core.host.speculative import check_rewindable, generate_by_lookup

    result = runtime_greedy(asset, prompt)
    with Generator(asset) as generator:
        try:
            check_rewindable(generator.spec)
        except ValueError as refused:
            return {**result, "lookup refused": str(refused)}
        repeated = prompt * 3
        plain = generator.generate(repeated, 16, stop_token_ids=[])
        looked, _ = generate_by_lookup(generator, repeated, 16, stop_token_ids=[])
        known = generator.generate(prompt, 16, stop_token_ids=[])
        calls = []

        def draft(context: list[int], count: int) -> list[int]:
            calls.append(count)
            guesses = known[len(context) - len(prompt) : len(context) - len(prompt) + count]
            if len(calls) % 3 == 0 and len(guesses) > 1:
                guesses[1] = (guesses[1] + 1) % generator.spec.vocab_size
            return guesses

        drafted, stats = generate_by_lookup(generator, prompt, 16, stop_token_ids=[], draft=draft)
    return {
        **result,
        "plain": [plain, known],
        "speculative": [looked, drafted],
        "verify calls": stats["verify calls"],
        "kept some, not all": 0 < stats["accepted"] < stats["guesses"],
    }


def narrow_and_wide(asset: str, prompt: list[int], new_tokens: int) -> dict:
    """Plain greedy decoding, then guesses that are its own tokens, one guess and then as
    many as fit in turn: a verify call of each width the asset has (isolate it)."""
    from zoo.core.host.generator import Generator
    from zoo.core.host.speculative import generate_by_lookup

    with Generator(asset) as generator:
        plain = generator.generate(prompt, new_tokens, stop_token_ids=[])
        calls = []

        def draft(context: list[int], count: int) -> list[int]:
            calls.append(count)
            upcoming = plain[len(context) - len(prompt) :]
            return upcoming[: 1 if len(calls) % 2 else count]

        guessed, stats = generate_by_lookup(generator, prompt, new_tokens, [], draft=draft)
    return {"plain": plain, "speculative": guessed, **stats}
