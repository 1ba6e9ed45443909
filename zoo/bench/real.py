"""What a preset costs on a real model (`zoo.fetch`): export time, asset size, decode speed.

One row per preset, measured here and now: the export from the fetched checkpoint (timed,
into `directory`), the asset's bytes, and the median decode step on the Core AI runtime (in
a process of its own) over 16 steps after the prompt, beside transformers' fp32 model in
torch eager on the same prompt (its KV cache, one token per step; measured once, 32
steps). The pages render these rows from a record (`make records`), never the tests.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

PROMPT = "The history of the printing press begins"
CAPACITY = 256


def runtime_decode_ms(asset: str, ids: list[int], steps: int) -> dict:
    """Median ms of a decode step on the runtime after `ids`, and the load seconds."""
    import numpy as np

    from zoo.core.decode import Generator

    started = time.perf_counter()
    with Generator(asset) as generator:
        loaded = time.perf_counter() - started
        logits = generator.feed(ids)
        times = []
        for _ in range(steps):
            token = int(np.argmax(logits))
            started = time.perf_counter()
            logits = generator.feed([token])
            times.append(time.perf_counter() - started)
    return {"decode ms": 1000 * statistics.median(times), "load s": loaded}


def eager_decode_ms(entry: str, checkpoint: str | Path, ids: list[int], steps: int) -> float:
    """Median ms of a decode step of transformers' model (fp32, torch eager, KV cache)."""
    import torch

    from zoo.core.entry import get_entry

    model = get_entry(entry).reference_model(checkpoint)
    times = []
    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=True)
        for _ in range(steps):
            token = out.logits[:, -1:].argmax(-1)
            started = time.perf_counter()
            out = model(token, past_key_values=out.past_key_values, use_cache=True)
            times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def cost_row(name: str, compress: str, directory: str | Path, steps: int = 16) -> dict:
    """Export real model `name` with preset `compress` into `directory`, and measure it on
    the runtime (in a process of its own)."""
    from zoo.core.decode import export_model
    from zoo.core.entry import get_entry
    from zoo.core.layout import default_chunk
    from zoo.fetch import fetch, get_real_model
    from zoo.lab.isolate import run_isolated

    model = get_real_model(name)
    checkpoint = fetch(name)
    path = Path(directory) / f"{name}-{compress}.aimodel"
    started = time.perf_counter()
    loaded = get_entry(model.entry).load(checkpoint, compress=compress, capacity=CAPACITY)
    export_model(
        loaded,
        path,
        chunk=default_chunk(),
        checkpoint=checkpoint,
        compress=compress,
        overwrite=True,
    )
    export_s = time.perf_counter() - started
    del loaded
    outcome = run_isolated(runtime_decode_ms, str(path), prompt_ids(name), steps, timeout=1800)
    if not outcome.ok:
        raise RuntimeError(f"{name} {compress}: {outcome.summary()}")
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return {
        "preset": compress,
        "export s": round(export_s, 1),
        "asset MB": round(size / 1e6, 1),
        "load s": round(outcome.result["load s"], 1),
        "decode ms (runtime)": round(outcome.result["decode ms"], 1),
    }


def prompt_ids(name: str) -> list[int]:
    from zoo.core.text import encode_prompt, load_tokenizer
    from zoo.fetch import fetch

    checkpoint = fetch(name)
    return encode_prompt(load_tokenizer(checkpoint / "tokenizer.json"), checkpoint, PROMPT)


def write_real_record(name: str, rows: list[dict], directory: str | Path) -> Path:
    """The record of the texts a real model's recipe decoded (`real-NAME`): the same on
    every run, so the tests compare it; what each preset costs is `zoo.quality`'s record."""
    from zoo.site.records import write_record

    texts = [{k: v for k, v in row.items() if k != "tokens"} for row in rows]
    return write_record(directory, f"real-{name}", {"texts": texts})


def show(row: dict) -> None:
    """Print one `text_beside_transformers` row as a recipe shows it."""
    print(repr(row["prompt"]))
    for side in ("Core AI runtime", "transformers"):
        print(f"  {side + ':':17}{row[side]!r}")
    agree = next(v for k, v in row.items() if k.endswith("tokens agree"))
    print(f"  greedy tokens that agree before the first difference: {agree}")
