"""Each compression preset on a tiny checkpoint: size, peak memory, quality against the fp32
model, and the asset on the Core AI runtime against the compressed eager model.

`compression_row` runs in a child process (its peak RSS is the export's, and the runtime
may crash), shared within a test session by the zoo tests, the recipe and its record.
"""

from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from zoo.reference import make_tiny_checkpoint

ZOO = Path(__file__).resolve().parents[1]  # what a row depends on: the zoo's code
CAPACITY, CHUNK = 96, 8
PROMPT_LENGTH = 72  # quality over 72 positions


def prompt(vocab_size: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(0).integers(3, vocab_size, PROMPT_LENGTH)]


def tiny_checkpoint(model: str, directory: Path) -> Path:
    """The tiny checkpoint the zoo tests use for `model` (its default variant)."""
    from zoo.core.model.entry import get_entry

    return make_tiny_checkpoint(get_entry(model), directory)


def asset_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).iterdir() if f.is_file())


def check_preset(model: str, preset: str, strategy: str, workdir: str) -> dict:
    """Export the tiny `model` with `preset`; measure it against fp32 and on the runtime."""
    from zoo.core.compression.presets import quality
    from zoo.core.host.generator import Generator
    from zoo.core.model.eager import torch_logits
    from zoo.released import runtime_logits

    workdir = Path(tempfile.mkdtemp(dir=workdir))
    from zoo.core.export.functions import export_model as export
    from zoo.core.model.entry import get_entry

    load = get_entry(model).load
    checkpoint = tiny_checkpoint(model, workdir / "checkpoint")
    reference = load(checkpoint, strategy, CAPACITY)
    ids = prompt(reference.config.vocab_size)
    fp32 = torch_logits(reference, ids)[0].numpy()
    del reference

    started = time.perf_counter()
    compressed = load(checkpoint, strategy, CAPACITY)
    asset = export(compressed, workdir / f"{preset}.aimodel", chunk=CHUNK, compress=preset)
    seconds = time.perf_counter() - started
    # The compressed model in torch eager (the fp16 cast happens on the exported program
    # only, so fp16's eager model is fp32 and only the runtime shows its rounding).
    eager = torch_logits(compressed, ids)[0].detach().numpy()
    on_runtime = np.array(runtime_logits(str(asset), ids))
    with Generator(asset) as generator:
        greedy = generator.generate(ids[:10], 8, stop_token_ids=[])
        generator.reset()
        generator.feed(ids[:16])
        steps = []
        for token in ids[16:32]:
            tick = time.perf_counter()
            generator.feed([token])
            steps.append(time.perf_counter() - tick)
    want = quality(fp32, on_runtime)
    return {
        "model": model,
        "preset": preset,
        "KV strategy": strategy,
        "asset bytes": asset_bytes(asset),
        "export s": round(seconds, 1),
        "peak RSS MB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "runtime vs compressed eager (max abs)": float(f"{np.abs(on_runtime - eager).max():.2g}"),
        **{key: float(f"{value:.4g}") for key, value in want.items()},
        "greedy tokens": greedy,
        "decode ms (Linux runtime)": round(1000 * float(np.median(steps)), 2),
    }


def compression_row(model: str, preset: str, strategy: str, workdir: str | Path) -> dict:
    """`check_preset` in a process of its own, computed once per test session."""
    from zoo.core.isolate import cached_call, run_isolated

    sources = sorted(ZOO.rglob("*.py"))
    outcome = cached_call(
        lambda: run_isolated(check_preset, model, preset, strategy, str(workdir), timeout=900),
        ["compression", *sources, model, preset, strategy],
    )
    if not outcome.ok:
        raise RuntimeError(f"{model} {preset} {strategy}: {outcome.summary()}\n{outcome.detail}")
    return outcome.result


def fp16_cast_on_gated_delta(workdir: str | Path) -> str:
    """Export a tiny Qwen3.5 with coreai-opt's fp16 cast applied anyway (the `fp16` preset
    refuses it) and return how the conversion fails."""
    from zoo.core.compression.presets import PRESETS
    from zoo.core.export.convert import ExportError
    from zoo.core.export.functions import export_decoder
    from zoo.core.model.eager import decode_spec
    from zoo.qwen3_5 import load_qwen3_5

    checkpoint = tiny_checkpoint("qwen3_5", Path(workdir) / "qwen-checkpoint")
    model = load_qwen3_5(checkpoint, "input-mask-blend", 32)
    spec = decode_spec(model, chunk=4)
    try:
        export_decoder(
            model, spec, Path(workdir) / "fp16.aimodel", program_pass=PRESETS["fp16"].program_pass
        )
    except ExportError as error:
        return str(error)
    return "exported"


def projection_profile(preset: str, workdir: str, rows: int = 4096, columns: int = 1024) -> dict:
    """One `nn.Linear(columns, rows)` stored with `preset`, exported alone and timed on the
    runtime: median ms per call over 20 warm calls, the first calls, and the runtime
    profiler's most expensive op (run it with `run_isolated`)."""
    import torch

    from zoo.core.compression.presets import get_preset
    from zoo.core.export.convert import export
    from zoo.lab.profile import time_and_profile

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(columns, rows, bias=False)).eval()
    x = torch.randn(1, 1, columns)
    module = get_preset(preset).apply(module)
    path = Path(workdir) / f"projection-{preset}.aimodel"
    export(module, (x,), path, input_names=["x"], output_names=["y"], overwrite=True)
    _, seconds, top = time_and_profile(path, x.numpy())
    return {
        "preset": preset,
        "asset bytes": sum(f.stat().st_size for f in path.iterdir() if f.is_file()),
        "first call ms": round(seconds[0] * 1e3, 2),
        "call 2-5 ms": round(float(np.median(seconds[1:5])) * 1e3, 2),
        "warm ms (median of 20)": round(float(np.median(seconds[5:])) * 1e3, 2),
        "most expensive op": top["op"],
        "its share": top["share"],
    }
