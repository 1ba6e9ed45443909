"""A decoder exported as layer ranges: one function per range, each holding
the states of its own layers; prefill runs two ranges at once.

Run: python snippets/layer_ranges.py
     (writes ./tiny-llama-8/ and two .aimodel assets beside it)
"""

# --8<-- [start:export]
from zoo import export_model, make_tiny_checkpoint
from zoo.llama import load_llama

# a tiny random Llama of 8 layers as four ranges of 2 (SmolLM2-135M's 30
# layers with layers_per_function=8 are four ranges: 8, 8, 8 and 6)
checkpoint = make_tiny_checkpoint("llama", "tiny-llama-8", num_hidden_layers=8)
model = load_llama(checkpoint, capacity=64)
ranged = export_model(
    model, "ranges.aimodel", chunk=4, layers_per_function=2, overwrite=True
)
whole = export_model(model, "whole.aimodel", chunk=4, overwrite=True)
# --8<-- [end:export]

# --8<-- [start:run]
import numpy as np

from zoo import DecodeSpec, run_isolated
from zoo.core.host.generator import prefill_logits

spec = DecodeSpec.of_asset(ranged)
print(f"ranges {spec.ranges}, prefill chunk {spec.chunk}")
rng = np.random.default_rng(0)
ids = [int(i) for i in rng.integers(0, 128, 3 * spec.chunk)]  # 3 chunks
# each asset on the runtime in a process of its own (a crash is an outcome)
a = run_isolated(prefill_logits, str(ranged), ids, timeout=600).result
b = run_isolated(prefill_logits, str(whole), ids, timeout=600).result
print("functions:", ", ".join(a["prefill functions"]))
gap = np.abs(np.array(a["logits"]) - np.array(b["logits"])).max()
print(f"largest logit difference from the one-function asset: {gap:.1e}")
assert gap < 1e-4
# --8<-- [end:run]
