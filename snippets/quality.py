"""What a compression preset costs in quality, measured on the exported asset:
perplexity of a public-domain text from the asset's own logits on the Core AI
runtime, beside torch eager.

Run: python snippets/quality.py
     python snippets/quality.py --record DIR --model NAME   (every preset:
     the record quality-NAME, about 20 minutes a model on two cores)
"""

# --8<-- [start:score]
import numpy as np

from zoo import run_isolated
from zoo.quality import (
    SCORED,
    eager_logits,
    perplexity,
    runtime_logits,
    text_ids,
)
from zoo.real_assets import exported

name = "smollm2-135m-instruct"
ids = text_ids(name, SCORED)  # Lincoln's 1862 address, its first 256 tokens
# exported with a `score` function: 64 tokens in, every row's logits out
asset = exported(name, compress="fp32", capacity=256, score_chunk=64)
# the runtime in a process of its own: a crash there is an outcome, not ours
on_runtime = run_isolated(runtime_logits, str(asset), ids, timeout=900)
runtime = np.asarray(on_runtime.result, np.float32)
eager = eager_logits(name, "fp32", ids)
print(f"perplexity on the runtime {perplexity(runtime, ids):.3f}")
print(f"perplexity in torch eager {perplexity(eager, ids):.3f}")
# --8<-- [end:score]

# --8<-- [start:mixed]
from zoo import get_entry
from zoo.core.compression.presets import get_preset, mixed
from zoo.fetch import fetch

# int4-block32 everywhere but the units named, which are int8 per channel
preset = mixed(["embed_tokens", "layers.0"])
# Apple's mixed 4/8-bit palettization: a 16-entry LUT per 32 output
# channels, one 256-entry LUT a projection in the units named
palettized = get_preset("mixed-palettized:layers.28,layers.29")
model = get_entry("llama").load(fetch(name))
for chosen in ("int4-block32", preset, palettized):
    bits = get_preset(chosen).bits_per_weight(model)
    print(f"{get_preset(chosen).name:16} {bits:.2f} code bits per weight")
# --8<-- [end:mixed]

import sys

if __name__ == "__main__" and "--model" in sys.argv:
    from zoo.quality import PRESETS, quality_record

    directory = sys.argv[sys.argv.index("--record") + 1]
    model = sys.argv[sys.argv.index("--model") + 1]
    print(f"wrote {quality_record(model, list(PRESETS), directory)}")
