"""Compressed weights through coreai-opt: export with a preset, generate,
and measure the asset against the fp32 model.

Run: python snippets/compression.py [--record DIR]  (every preset, both models)
"""

# --8<-- [start:presets]
from zoo.core.compression.presets import PRESETS

for name, preset in PRESETS.items():
    print(f"{name:13} {preset.summary}")
# --8<-- [end:presets]

# --8<-- [start:export]
import tempfile
from pathlib import Path

from zoo import Generator, make_tiny_checkpoint
from zoo.qwen3_5 import export_qwen3_5, load_qwen3_5

scratch = tempfile.TemporaryDirectory()  # removed, with the assets, at exit
workdir = Path(scratch.name)
checkpoint = make_tiny_checkpoint("qwen3_5", workdir / "tiny-qwen3_5")
sizes = {}
for preset in ("fp32", "int4-block32"):
    model = load_qwen3_5(checkpoint, "input-mask-blend", capacity=64)
    asset = export_qwen3_5(
        model, workdir / f"{preset}.aimodel", chunk=4, compress=preset
    )
    sizes[preset] = sum(f.stat().st_size for f in asset.iterdir())
    with Generator(asset) as generator:
        tokens = generator.generate([2, 17, 33, 91, 5], 6, stop_token_ids=[])
    print(f"{preset:13} {sizes[preset]:>8} bytes  {tokens}")
print(f"int4-block32 / fp32: {sizes['int4-block32'] / sizes['fp32']:.2f}")
# --8<-- [end:export]

# --8<-- [start:quality]
from zoo.lab.compression import compression_row

row = compression_row("qwen3_5", "int4-block32", "input-mask-blend", workdir)
for key in ("asset bytes", "runtime vs compressed eager (max abs)"):
    print(f"{key:38} {row[key]}")
assert row["runtime vs compressed eager (max abs)"] < 1e-4
# --8<-- [end:quality]

# --8<-- [start:sidecar]
from zoo.core.model.eager import torch_logits
from zoo.gemma4 import export_gemma4, load_gemma4

gemma = make_tiny_checkpoint("gemma4", workdir / "tiny-gemma4", "kv-sharing")
prompt = [2, 17, 33, 91, 5, 77, 12, 9]
model = load_gemma4(gemma, "input-mask-blend", capacity=64, ple_sidecar=True)
asset = export_gemma4(
    model, workdir / "gemma4-ple.aimodel", chunk=4, compress="palettize4"
)
for file in sorted(asset.iterdir()):
    print(f"{file.name:40} {file.stat().st_size:>8} bytes")
with Generator(asset) as generator:  # looks up each token's row in the sidecar
    runtime = [generator.feed([token]) for token in prompt]
eager = torch_logits(model, prompt)[0].numpy()  # the same int8 rows, in torch
error = max(abs(r - e).max() for r, e in zip(runtime, eager, strict=True))
print(f"runtime vs eager, max abs: {error:.1e}")
assert error < 1e-4
# --8<-- [end:sidecar]

# --8<-- [start:fp16]
from zoo.lab.compression import fp16_cast_on_gated_delta

failure = fp16_cast_on_gated_delta(workdir)
print(failure[:240])
assert "coreai.while" in failure
# --8<-- [end:fp16]

import sys

if __name__ == "__main__" and "--record" in sys.argv:
    from concurrent.futures import ThreadPoolExecutor

    from zoo import write_record

    directory = sys.argv[sys.argv.index("--record") + 1]
    cases = [
        (model, preset, "input-mask-blend")
        for model in ("gemma4", "qwen3_5")
        for preset in PRESETS
        if (model, preset) != ("qwen3_5", "fp16")
    ]
    # the recommended presets with the other KV strategy (zoo tests read them)
    cases += [
        ("gemma4", "palettize4", "runtime-index"),
        ("qwen3_5", "int4-block32", "runtime-index"),
    ]
    with ThreadPoolExecutor(
        2
    ) as pool:  # each row runs in a process of its own
        rows = list(pool.map(lambda c: compression_row(*c, workdir), cases))
    rows = [row for row in rows if row["KV strategy"] == "input-mask-blend"]
    for row in rows:
        row["greedy tokens"] = " ".join(map(str, row["greedy tokens"]))
    print(f"wrote {write_record(directory, 'compression', {'rows': rows})}")
