"""A decoder exported as layer ranges: one function per range, each holding
the states of its own layers; prefill runs two ranges at once.

Run: python snippets/layer_ranges.py
"""

# --8<-- [start:export]
from zoo.fetch import exported

name = "smollm2-135m-instruct"
# SmolLM2-135M's 30 layers as four functions of at most 8 layers each
ranged = exported(name, layers_per_function=8, score_chunk=None)
whole = exported(name)  # the same model as one function
# --8<-- [end:export]

# --8<-- [start:run]
import numpy as np

from zoo.core.decode import DecodeSpec
from zoo.core.ranges import prefill_logits
from zoo.lab.isolate import run_isolated
from zoo.quality import SCORED, text_ids

spec = DecodeSpec.of_asset(ranged)
print(f"ranges {spec.ranges}, prefill chunk {spec.chunk}")
ids = text_ids(name, SCORED, tokens=3 * spec.chunk)  # three chunks in a row
# each asset on the runtime in a process of its own (a crash is an outcome)
a = run_isolated(prefill_logits, str(ranged), ids, timeout=600).result
b = run_isolated(prefill_logits, str(whole), ids, timeout=600).result
print("functions:", ", ".join(a["prefill functions"]))
gap = np.abs(np.array(a["logits"]) - np.array(b["logits"])).max()
print(f"largest logit difference from the one-function asset: {gap:.1e}")
assert gap < 1e-4
# --8<-- [end:run]
