"""Quality on enough text to trust: perplexity with a 95 % interval, on two kinds of text.

`python -m zoo.evaluation smollm2-135m-instruct [--presets fp32,int8,...] [--windows 64]
[--record DIR]` scores `windows` windows of `WINDOW` tokens (64 x 512: 32,768 tokens) of
each of two texts nobody chose anything on (`TEXTS`: held-out State of the Union addresses,
and the Python tutorial's reST sources: technical prose with code), with each preset's
weights in torch eager: coreai-opt's compressed modules, the very codes the asset holds
(`zoo.quality`'s records show the runtime computing what eager computes; `--check-runtime`
exports each preset and asserts it again on a window). Per preset and text:

- perplexity, with a 95 % interval from a bootstrap over windows, and its change against
  fp32 with a paired interval (the same resampled windows for both: the two perplexities
  move together, so the change is known far better than either);
- mean KL(fp32 || preset) in nats and top-1 agreement with fp32;
- bits per weight as Apple counts them (`zoo.core.compression.stores.stored_bits`: codes, scales,
  offsets and lookup tables, over every weight including the embedding), and the KV
  cache's bytes a token.

A preset named with `+int8-kv` (`int4-block64+int8-kv`) is scored with its KV cache
stored int8 as well (`zoo.core.model.kv_cache`): every window's keys and values go through the
int8 cache as the asset's would.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

WINDOW = 512
WINDOWS = 64
TEXTS = ("sotu-held-out", "python-tutorial")
# what a calibrated preset (gptq:...) learns from: neither text above (zoo.texts)
CALIBRATION = ("sotu-calibration", "python-howto")
CALIBRATION_WINDOWS = 16  # of each calibration text: 32 x 512 tokens
RESAMPLES = 2000
PRESETS = ("fp32", "int8", "int4-block32", "palettize4")
BITS = (
    "bits per weight (with scales)"  # as Apple counts them: zoo.core.compression.stores.stored_bits
)
INT8_KV = "+int8-kv"  # a scored preset's suffix: its KV cache stored int8 (zoo.core.model.kv_cache)


def split_variant(variant: str) -> tuple[str, str]:
    """The weights preset and the KV cache of a scored variant ("int4-block64+int8-kv":
    int4-block64 weights, an int8 cache)."""
    if variant.endswith(INT8_KV):
        return variant.removesuffix(INT8_KV), "int8"
    return variant, "fp32"


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def text_windows(name: str, text: str, windows: int, window: int = WINDOW) -> list[list[int]]:
    """`windows` consecutive windows of `window` ids of fetched `text` (its files in name
    order), as real model `name` tokenizes it; each starts with the tokenizer's own
    special tokens (a bos), as a text would."""
    from zoo.core.asset.tokenizer import load_tokenizer
    from zoo.fetch import fetch
    from zoo.texts import fetch_text

    folder = fetch_text(text)
    files = sorted(p for p in folder.iterdir() if p.name.endswith(".txt"))
    body = "\n\n".join(p.read_text(encoding="utf-8") for p in files)
    tokenizer = load_tokenizer(fetch(name) / "tokenizer.json")
    start = tokenizer.encode("").ids  # what the tokenizer puts before any text
    ids = tokenizer.encode(body).ids[len(start) :]
    step = window - len(start)
    if len(ids) < windows * step:
        raise ValueError(
            f"{text} has {len(ids):,} tokens for {name}, fewer than {windows} windows of {step}"
        )
    return [start + ids[i * step : (i + 1) * step] for i in range(windows)]


def calibration_windows(name: str, windows: int = CALIBRATION_WINDOWS, window: int = WINDOW):
    """`windows` windows of each calibration text (`CALIBRATION`), as `name` tokenizes it."""
    return [ids for text in CALIBRATION for ids in text_windows(name, text, windows, window)]


def log_probs(logits) -> torch.Tensor:
    """Log-probabilities `[T - 1, vocab]` (float32) of a window's logits `[T, vocab]`, the
    rows that predict a next token."""
    return torch.log_softmax(torch.as_tensor(logits)[:-1].float(), -1)


def window_scores(logits, ids: list[int], reference: torch.Tensor) -> np.ndarray:
    """`[negative log-likelihood sum, predictions, KL sum, top-1 matches]` of one window:
    row i predicts ids[i + 1]; KL(reference || logits) per row, `reference` the fp32
    model's `log_probs` (float32 terms, float64 sums)."""
    mine = log_probs(logits)
    rows = torch.arange(len(ids) - 1)
    nll = -float(mine[rows, torch.tensor(ids[1:])].double().sum())
    kl = float((reference.exp() * (reference - mine)).double().sum())
    top1 = int((mine.argmax(-1) == reference.argmax(-1)).sum())
    return np.array([nll, len(rows), kl, top1])


def summarize(scores: np.ndarray, reference: np.ndarray, seed: int = 0) -> dict:
    """Perplexity with its 95 % bootstrap interval over windows, and its change against
    `reference`'s (the fp32 windows) with a paired interval. `scores`: `[windows, 4]`."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(scores), size=(RESAMPLES, len(scores)))

    def perplexity(table, rows=slice(None)):
        chosen = table[rows]
        return np.exp(chosen[..., 0].sum(-1) / chosen[..., 1].sum(-1))

    ppl, ref = perplexity(scores), perplexity(reference)
    boot, boot_ref = perplexity(scores, picks), perplexity(reference, picks)
    low, high = np.percentile(boot, [2.5, 97.5])
    change, (less, more) = (
        100 * (ppl / ref - 1),
        np.percentile(100 * (boot / boot_ref - 1), [2.5, 97.5]),
    )
    return {
        "perplexity": round(float(ppl), 3),
        "95% interval": [round(float(low), 3), round(float(high), 3)],
        "change vs fp32 %": round(float(change), 2),
        "change 95% interval": [round(float(less), 2), round(float(more), 2)],
        # as the pages show them
        "perplexity (95% interval)": f"{ppl:.2f} ({low:.2f} to {high:.2f})",
        "vs fp32 (95% interval)": f"{change:+.2f} % ({less:+.2f} to {more:+.2f})",
        "KL vs fp32": round(float(scores[:, 2].sum() / scores[:, 1].sum()), 5),
        "top-1 vs fp32": round(float(scores[:, 3].sum() / scores[:, 1].sum()), 4),
    }


def evaluate(
    name: str,
    presets: list[str],
    windows: int = WINDOWS,
    window: int = WINDOW,
    texts: tuple[str, ...] = TEXTS,
    progress=say,
    check_runtime: str | Path | None = None,
) -> dict:
    """Every preset of real model `name` scored on `windows` windows of each text, in
    torch eager, against fp32 on the same windows. With `check_runtime` (a directory),
    each scored model is exported there and its runtime logits checked against eager's
    (`runtime_equals_eager`)."""
    from zoo.core.compression.presets import get_preset
    from zoo.core.compression.stores import stored_bits
    from zoo.core.model.eager import decode_spec, torch_logits
    from zoo.core.model.entry import get_entry
    from zoo.core.model.kv_cache import set_kv_cache
    from zoo.fetch import fetch, get_real_model

    entry, checkpoint = get_entry(get_real_model(name).entry), fetch(name)
    names = ["fp32", *[p for p in presets if p != "fp32"]]
    models, facts = {}, {}
    for preset in names:
        started = time.perf_counter()
        weights_preset, kv_cache = split_variant(preset)
        calibrated = get_preset(weights_preset).calibrated
        models[preset] = entry.load(
            checkpoint,
            compress=get_preset(weights_preset),
            capacity=window,
            calibration=calibration_windows(name, window=window) if calibrated else None,
        )
        set_kv_cache(models[preset], kv_cache)
        bits, weights = stored_bits(models[preset])
        facts[preset] = {
            BITS: round(bits / weights, 3),
            "weights": weights,
            "KV cache": kv_cache,
            "KV cache bytes a token": decode_spec(models[preset]).kv_bytes_per_token(),
            "load and compress s": round(time.perf_counter() - started, 1),
            **getattr(models[preset], "calibration", {}),
        }
    rows, seconds = [], {}
    for text in texts:
        tables = {preset: [] for preset in names}
        started = time.perf_counter()
        for number, ids in enumerate(text_windows(name, text, windows, window)):
            if number % 16 == 0:
                progress(f"{name}: {text}, window {number + 1} of {windows}")
            fp32_logits = torch_logits(models["fp32"], ids)[0]
            reference = log_probs(fp32_logits)
            for preset in names:
                logits = fp32_logits if preset == "fp32" else torch_logits(models[preset], ids)[0]
                tables[preset].append(window_scores(logits, ids, reference))
        seconds[text] = round(time.perf_counter() - started, 1)
        fp32 = np.array(tables["fp32"])
        for preset in names:
            summary = summarize(np.array(tables[preset]), fp32)
            rows.append({"preset": preset, "text": text, **summary, **facts[preset]})
    checks = {}
    if check_runtime is not None:
        checks["runtime equals eager"] = [
            runtime_equals_eager(name, preset, models[preset], check_runtime) for preset in names
        ]
    return {
        "model": name,
        "windows": windows,
        "window tokens": window,
        "scored tokens per text": windows * (window - 1),
        "bootstrap resamples": RESAMPLES,
        "scoring s per text (all presets)": seconds,
        "rows": rows,
        **checks,
    }


def method_of(preset: str) -> str:
    """How a preset chose its codes, as the compression guide's plot names its series."""
    if preset.startswith("gptq:"):
        return "GPTQ"
    return "LUT (k-means)" if "palettize" in preset else "rounded"


def describe(row: dict) -> str:
    """One line of a row: the perplexity, its change against fp32 with the interval."""
    return (
        f"{row['preset']:>13} {row['text']:>16}: perplexity {row['perplexity (95% interval)']}, "
        f"{row['vs fp32 (95% interval)']}, {row[BITS]} bits a weight, KV cache "
        f"{row['KV cache bytes a token']:,} bytes a token"
    )


def runtime_equals_eager(name: str, preset: str, model, directory: str | Path, tokens: int = 64):
    """Export `model` (real model `name` loaded with `preset`, as scored) with a score
    function and check, on the first window's first `tokens` ids of the first text, that
    the runtime's logits are eager's."""
    from zoo.core.export.functions import export_model
    from zoo.core.isolate import run_isolated
    from zoo.core.model.eager import torch_logits
    from zoo.fetch import fetch
    from zoo.quality import perplexity, runtime_logits

    ids = text_windows(name, TEXTS[0], 1, tokens)[0]
    eager = torch_logits(model, ids)[0].float().numpy()
    path = Path(directory) / f"{name}-{preset.replace(':', '-')}.aimodel"
    weights_preset, kv_cache = split_variant(preset)
    export_model(
        model,
        path,
        chunk=16,
        checkpoint=fetch(name),
        compress=weights_preset,
        kv_cache=kv_cache,
        score_chunk=tokens,
        overwrite=True,
    )
    outcome = run_isolated(runtime_logits, str(path), ids, timeout=1800)
    if not outcome.ok:
        return {"preset": preset, "outcome": outcome.summary()}
    runtime = np.asarray(outcome.result)
    gap = float(np.abs(runtime - eager).max())
    # an int8 KV cache rounds: where torch and the runtime differ in a float32 last bit at a
    # rounding boundary, a code differs by one step and every later layer reads other
    # inputs, so its logits are compared by what they predict, not bit for bit
    return {
        "preset": preset,
        "tokens": tokens,
        "max abs logit gap": float(f"{gap:.2g}"),
        "top-1 runtime = eager": round(float((runtime.argmax(-1) == eager.argmax(-1)).mean()), 3),
        "perplexity (eager)": round(perplexity(eager, ids), 3),
        "perplexity (runtime)": round(perplexity(runtime, ids), 3),
        "asset MB": round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6, 1),
    }


def main(argv: list[str] | None = None) -> int:
    from zoo.core.compression.presets import MIXED_KINDS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a real model of zoo.fetch")
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument(
        "--windows", type=windows_count, default=WINDOWS, help="per text, at least 2"
    )
    parser.add_argument("--texts", default=",".join(TEXTS), help="comma-separated (zoo.texts)")
    parser.add_argument("--window", type=int, default=WINDOW)
    parser.add_argument("--check-runtime", metavar="DIR", help="export each preset here")
    parser.add_argument("--record", metavar="DIR", help="write evaluation-MODEL.json here")
    parser.add_argument("--name", help="the record's name (default: evaluation-MODEL)")
    parser.add_argument(
        "--sweep",
        choices=list(MIXED_KINDS),
        help="also score the mixed preset of this kind the sensitivity sweep chooses "
        "(zoo.quality.sweep, on the calibration text)",
    )
    args = parser.parse_args(argv)
    record = None
    if args.record:  # refused now, not after an hour of scoring
        from zoo.core.io.records import record_path

        try:
            record = record_path(args.record, args.name or f"evaluation-{args.model}")
        except ValueError as error:
            parser.error(str(error))
    presets = args.presets.split(",")
    plan = None
    if args.sweep:
        from zoo.quality import sweep

        plan = sweep(args.model, kind=args.sweep)
        presets.append(plan["preset"])
    results = evaluate(
        args.model,
        presets,
        args.windows,
        args.window,
        tuple(args.texts.split(",")),
        check_runtime=args.check_runtime,
    )
    if plan:
        results["sweep"] = {key: value for key, value in plan.items() if key != "units"}
        results["sweep units"] = plan["units"]
    for row in results["rows"]:
        print(describe(row))
    if record:
        from zoo.core.io.records import write_record

        print(f"wrote {write_record(record.parent, record.stem, results)}")
    return 0


def windows_count(text: str) -> int:
    """--windows: a whole number of at least 2 (one window has no interval to bootstrap)."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if count < 2:
        raise argparse.ArgumentTypeError(
            f"{count}: the 95 % interval is a bootstrap over windows, it needs at least 2"
        )
    return count


if __name__ == "__main__":
    raise SystemExit(main())
