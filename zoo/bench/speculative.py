"""`python -m zoo.bench.speculative [--models smollm2-135m-instruct,gemma3-270m] [--record DIR]`:
speculative decoding against plain greedy decoding, on the runtime.

Each real model's fp32 asset, exported with a `score` function of k tokens for each k of
`--widths` (the verify call: k - 1 guesses checked at once, `zoo.core.host.speculative`), is
asked prompts of three kinds through its chat template: rewriting a given text
(copy-heavy), code, open chat. Guesses come from prompt lookup, or (at the narrowest width)
from a draft asset: the model's own first `--draft-layers` layers with its final norm and
head (an early exit, `zoo export --first-layers`). For each: tokens per second of plain
greedy decoding and of speculation (same asset, same process, one after the other), the
speed-up after the prompt (its reading timed apart: the same calls in both), verify calls,
guesses, the share accepted and the mean run of accepted guesses per verify call. The
token lists are asserted identical. Beside them, what one verify call of k costs against
one decode call (`call_costs`): the accepted guesses a call must yield to pay for itself. A
number of this machine (Linux CPU runtime), not a test.
"""

from __future__ import annotations

import argparse
import json
import sys

from zoo.core.isolate import run_isolated

TEXT = (
    "The committee met on Tuesday to review the budget for the coming year. After a long "
    "discussion, the members agreed to raise the spending on schools by five percent, to "
    "keep the spending on roads as it was, and to cut the cost of running the town hall."
)
PROMPTS = {
    "copy-heavy": f"Repeat this text word for word, then stop:\n\n{TEXT}",
    "code": "Write a Python function that returns the sum of the squares of a list of "
    "numbers, then a second one that returns their mean.",
    "chat": "Tell me about the moon in a few sentences.",
}
NEW_TOKENS = 64
SECONDS = ("plain s", "speculative s")
CALL_REPEATS = 9  # calls of each kind timed; the median kept


def call_costs(asset: str, prompt: list[int]) -> dict:
    """Median ms of one decode call and one verify call of the asset's k tokens, at the
    same position after `prompt` (the position rewound after each; run it isolated)."""
    import time

    import numpy as np

    from zoo.core.host.generator import Generator

    with Generator(asset) as generator:
        generator.functions.load_all()
        generator.feed(prompt)
        start, width = generator.position, generator.spec.score_chunk
        times = {"decode": [], "verify": []}
        for _ in range(CALL_REPEATS):
            for kind, call in (
                ("decode", lambda: generator.feed([prompt[-1]])),
                ("verify", lambda: generator.verify(prompt[-width:])),
            ):
                began = time.perf_counter()
                call()
                times[kind].append(1000 * (time.perf_counter() - began))
                generator.rewind(start)
    decode, verify = (float(np.median(times[k])) for k in ("decode", "verify"))
    return {
        "k": width,
        "decode call ms": round(decode, 1),
        "verify call ms": round(verify, 1),
        "verify / decode": round(verify / decode, 2),
        # a verify call yields its accepted guesses + 1: it pays when that beats the ratio
        "break-even accepted per verify": round(verify / decode - 1, 2),
    }


def compare_on_runtime(
    asset: str, prompt: list[int], new_tokens: int, draft: str | None = None
) -> dict:
    """Plain greedy decoding, then speculative decoding on the same asset (run it in a
    process of its own): prompt lookup, or the guesses of the `draft` asset. Both token
    lists, the speculation's calls, and each one's seconds; and the seconds of reading the
    prompt alone (the same calls in both), so the tokens after it can be timed apart."""
    import contextlib
    import time

    from zoo.core.host.generator import Generator
    from zoo.core.host.speculative import DraftAsset, generate_by_lookup

    with Generator(asset) as generator, contextlib.ExitStack() as stack:
        guesses = None
        if draft is not None:
            guesses = DraftAsset(stack.enter_context(Generator(draft)))
        for loaded in [generator, *([guesses.generator] if guesses else [])]:
            loaded.functions.load_all()  # before either clock starts
        generator.reset()
        started = time.perf_counter()
        generator.feed(prompt)
        prompt_s = time.perf_counter() - started
        started = time.perf_counter()
        plain = generator.generate(prompt, new_tokens)
        plain_s = time.perf_counter() - started
        started = time.perf_counter()
        speculated, stats = generate_by_lookup(generator, prompt, new_tokens, draft=guesses)
        speculated_s = time.perf_counter() - started
    drafted = {"draft calls": guesses.feeds} if guesses is not None else {}
    return {
        "plain": plain,
        "speculative": speculated,
        "plain s": plain_s,
        "speculative s": speculated_s,
        "prompt s": prompt_s,
        **stats,
        **drafted,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="smollm2-135m-instruct,gemma3-270m")
    parser.add_argument("--widths", default="4,8", help="verify calls of k tokens")
    parser.add_argument(
        "--draft-layers", default="smollm2-135m-instruct:8,gemma3-270m:6", metavar="MODEL:N,..."
    )
    parser.add_argument("--record", default=None, help="write bench-speculative.json here")
    args = parser.parse_args(argv)
    draft_layers = {
        model: int(n) for model, n in (pair.split(":") for pair in args.draft_layers.split(","))
    }
    rows, calls = [], []
    for model in args.models.split(","):
        widths = sorted(int(w) for w in args.widths.split(","))
        for width in widths:
            model_rows, cost = bench_model(
                model, width, draft_layers.get(model), width == widths[0]
            )
            rows += model_rows
            calls.append(cost)
    results = {"preset": "fp32", "new tokens": NEW_TOKENS, "rows": rows, "calls": calls}
    if args.record:
        from zoo.core.io.records import write_record

        print(f"wrote {write_record(args.record, 'bench-speculative', results)}")
    return 0


def bench_model(
    model: str, width: int, draft_layers: int | None, first_width: bool = True
) -> tuple[list[dict], dict]:
    """Real model `model`'s rows at verify width `width`: each prompt with prompt lookup,
    and with its first `draft_layers` layers drafting; and the cost of its calls."""
    from zoo.core.asset.tokenizer import encode_prompt, load_tokenizer
    from zoo.fetch import fetch, get_real_model
    from zoo.real_assets import exported

    checkpoint = fetch(model)
    tokenizer = load_tokenizer(checkpoint / "tokenizer.json")
    chat = get_real_model(model).chat  # a base model (Gemma 3 270M) reads the text as it is
    asset = exported(model, "fp32", capacity=512, score_chunk=width)
    prompt = encode_prompt(tokenizer, checkpoint, PROMPTS["chat"], chat=chat)
    cost = run_isolated(call_costs, str(asset), prompt)
    cost = {"model": model, **(cost.result if cost.ok else {"k": width, "outcome": cost.summary()})}
    print(json.dumps(cost), file=sys.stderr, flush=True)
    drafts = {"prompt lookup": None}
    if draft_layers and first_width:  # the narrowest verify only: a draft guesses poorly
        early = exported(model, "fp32", capacity=512, score_chunk=None, first_layers=draft_layers)
        drafts[f"first {draft_layers} layers"] = str(early)
    rows = []
    for source, draft in drafts.items():
        for kind, text in PROMPTS.items():
            prompt = encode_prompt(tokenizer, checkpoint, text, chat=chat)
            outcome = run_isolated(compare_on_runtime, str(asset), prompt, NEW_TOKENS, draft)
            row = {"model": model, "k": width, "guesses from": source, "prompt": kind}
            if not outcome.ok:
                rows.append({**row, "outcome": outcome.summary()})
                continue
            got = outcome.result
            assert got["speculative"] == got["plain"], row  # lossless, token for token
            tokens = len(got["plain"])
            plain_after, speculative_after = (got[k] - got["prompt s"] for k in SECONDS)
            rows.append(
                {
                    **row,
                    "new tokens": tokens,
                    "plain tok/s": round(tokens / got["plain s"], 2),
                    "speculative tok/s": round(tokens / got["speculative s"], 2),
                    "speed-up": round(got["plain s"] / got["speculative s"], 2),
                    # the prompt read, the same calls in both: the answer's own speed-up
                    "prompt s": round(got["prompt s"], 2),
                    "speed-up after the prompt": round(plain_after / speculative_after, 2),
                    "verify calls": got["verify calls"],
                    "decode calls": got["decode calls"],
                    "draft calls": got.get("draft calls"),  # None: prompt lookup
                    "guesses accepted": f"{got['accepted']} of {got['guesses']}",
                    "mean accepted per verify": round(
                        got["accepted"] / max(1, got["verify calls"]), 2
                    ),
                    "identical tokens": True,
                }
            )
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows, cost


if __name__ == "__main__":
    raise SystemExit(main())
