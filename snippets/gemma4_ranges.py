"""Gemma 4 as layer ranges: the per-layer inputs computed once and passed on,
KV-shared layers reading a cache another range writes, and the cut a Mac's
Neural Engine needs for E2B's 35 layers (planned here, not run).

Run: python snippets/gemma4_ranges.py
     (writes ./tiny-gemma4-shared/ and two .aimodel assets beside it)
"""

# --8<-- [start:export]
from zoo import export_model, make_tiny_checkpoint
from zoo.gemma4 import load_gemma4

# 6 layers, the last 2 KV-shared (they read the caches of layers 2 and 3),
# per-layer inputs; cut into three ranges of 2 layers
checkpoint = make_tiny_checkpoint("gemma4", "tiny-gemma4-shared", "kv-sharing")
model = load_gemma4(checkpoint, capacity=64)
ranged = export_model(
    model, "g4-ranges.aimodel", chunk=4, layers_per_function=2, overwrite=True
)
whole = export_model(model, "g4-whole.aimodel", chunk=4, overwrite=True)
# --8<-- [end:export]

# --8<-- [start:run]
import numpy as np

from zoo import DecodeSpec, run_isolated
from zoo.core.host.generator import prefill_logits

spec = DecodeSpec.of_asset(ranged)
for start, stop in spec.ranges:
    reads = model.read_only_states(start, stop)
    print(f"layers {start}-{stop - 1}: reads {reads or 'only its own caches'}")
rng = np.random.default_rng(0)
ids = [int(i) for i in rng.integers(0, 128, 3 * spec.chunk)]  # 3 chunks
# each asset on the runtime in a process of its own (a crash is an outcome)
a = run_isolated(prefill_logits, str(ranged), ids, timeout=600).result
b = run_isolated(prefill_logits, str(whole), ids, timeout=600).result
gap = np.abs(np.array(a["logits"]) - np.array(b["logits"])).max()
print(f"largest logit difference from the one-function asset: {gap:.1e}")
assert gap < 1e-4
# --8<-- [end:run]

# --8<-- [start:ane]
import json

import torch

from zoo import get_strategy
from zoo.core.export.ranges import NEURAL_ENGINE_LAYERS, split_layers
from zoo.gemma4 import Gemma4, Gemma4Config
from zoo.released import released_configs

# Gemma 4 E2B at its published size, on the meta device (no memory): how
# `--layers-per-function ane` cuts its 35 layers
released = released_configs("gemma4")["gemma-4-E2B-it"].read_text()
config = Gemma4Config.from_dict(json.loads(released))
with torch.device("meta"):
    e2b = Gemma4(config, get_strategy("input-mask-blend"), 2048)
for start, stop in split_layers(len(e2b.layers), NEURAL_ENGINE_LAYERS):
    reads = e2b.read_only_states(start, stop)
    assert stop - start <= NEURAL_ENGINE_LAYERS
    print(
        f"layers {start:2}-{stop - 1:2} ({stop - start}): reads {reads or '-'}"
    )
# --8<-- [end:ane]
