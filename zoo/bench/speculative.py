"""`python -m zoo.bench.speculative [--model smollm2-135m-instruct] [--record DIR]`:
prompt-lookup speculative decoding against plain greedy decoding, on the runtime.

The real model's fp32 asset, exported with a `score` function of k tokens for each k of
`--widths` (the verify call: k - 1 guesses checked at once, `zoo.core.speculative`), is
asked prompts of three kinds through its chat template: rewriting a given text
(copy-heavy), code, open chat. For each: tokens per second of plain greedy decoding and of
prompt lookup (same asset, same process, one after the other), verify calls, guesses, the
share accepted and the mean run of accepted guesses per verify call. The two token lists
are asserted identical. Beside them, what one verify call of k costs against one decode
call (`call_costs`): the accepted guesses a call must yield to pay for itself. A number of
this machine (Linux CPU runtime), not a test.
"""

from __future__ import annotations

import argparse
import json
import sys

from zoo.lab.isolate import run_isolated

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
CALL_REPEATS = 9  # calls of each kind timed; the median kept


def call_costs(asset: str, prompt: list[int]) -> dict:
    """Median ms of one decode call and one verify call of the asset's k tokens, at the
    same position after `prompt` (the position rewound after each; run it isolated)."""
    import time

    import numpy as np

    from zoo.core.generator import Generator

    with Generator(asset) as generator:
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--widths", default="4,8", help="verify calls of k tokens")
    parser.add_argument("--record", default=None, help="write bench-speculative.json here")
    args = parser.parse_args(argv)
    from zoo.core.speculative import compare_on_runtime
    from zoo.core.text import encode_prompt, load_tokenizer
    from zoo.fetch import fetch
    from zoo.real_assets import exported

    checkpoint = fetch(args.model)
    tokenizer = load_tokenizer(checkpoint / "tokenizer.json")
    rows, calls = [], []
    for width in [int(w) for w in args.widths.split(",")]:
        asset = exported(args.model, "fp32", capacity=512, score_chunk=width)
        prompt = encode_prompt(tokenizer, checkpoint, PROMPTS["chat"], chat=True)
        cost = run_isolated(call_costs, str(asset), prompt)
        calls.append(cost.result if cost.ok else {"k": width, "outcome": cost.summary()})
        print(json.dumps(calls[-1]), file=sys.stderr, flush=True)
        for kind, text in PROMPTS.items():
            prompt = encode_prompt(tokenizer, checkpoint, text, chat=True)
            outcome = run_isolated(compare_on_runtime, str(asset), prompt, NEW_TOKENS)
            if not outcome.ok:
                rows.append({"k": width, "prompt": kind, "outcome": outcome.summary()})
                continue
            got = outcome.result
            assert got["lookup"] == got["plain"], (kind, width)  # lossless, token for token
            tokens = len(got["plain"])
            rows.append(
                {
                    "k": width,
                    "prompt": kind,
                    "new tokens": tokens,
                    "plain tok/s": round(tokens / got["plain s"], 2),
                    "lookup tok/s": round(tokens / got["lookup s"], 2),
                    "speed-up": round(got["plain s"] / got["lookup s"], 2),
                    "verify calls": got["verify calls"],
                    "decode calls": got["decode calls"],
                    "guesses accepted": f"{got['accepted']} of {got['guesses']}",
                    "mean accepted per verify": round(
                        got["accepted"] / max(1, got["verify calls"]), 2
                    ),
                    "identical tokens": True,
                }
            )
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    results = {"model": args.model, "preset": "fp32", "rows": rows, "calls": calls}
    if args.record:
        from zoo.site.records import write_record

        print(f"wrote {write_record(args.record, 'bench-speculative', results)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
