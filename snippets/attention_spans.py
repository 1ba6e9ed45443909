"""Prefill over attention spans: a chunk early in a long context attends over
the cache's first columns only, instead of all `capacity` of them.

Run: python snippets/attention_spans.py
     (writes ./tiny-llama/ and two .aimodel assets beside it)
"""

# --8<-- [start:export]
from zoo import export_model, make_tiny_checkpoint
from zoo.llama import load_llama

# a tiny random Llama with a context of 64 tokens; prefill chunks of 4 are
# exported three times: over the cache's first 8 columns, its first 16, all 64
checkpoint = make_tiny_checkpoint("llama", "tiny-llama")
model = load_llama(checkpoint, capacity=64)
spanned = export_model(
    model, "spans.aimodel", chunk=4, spans=[8, 16], overwrite=True
)
whole = export_model(model, "whole.aimodel", chunk=4, overwrite=True)
# --8<-- [end:export]

# --8<-- [start:run]
import numpy as np

from zoo import DecodeSpec, run_isolated
from zoo.core.host.generator import prefill_logits

spec = DecodeSpec.of_asset(spanned)
print(f"spans {spec.spans}, context {spec.capacity}, chunk {spec.chunk}")
ids = [(7 * i + 3) % 97 + 1 for i in range(22)]  # 5 chunks of 4, 2 steps
# each asset on the runtime in a process of its own (a crash is an outcome)
a = run_isolated(prefill_logits, str(spanned), ids, timeout=600).result
b = run_isolated(prefill_logits, str(whole), ids, timeout=600).result
print("calls:", ", ".join(a["ran"]))
gap = np.abs(np.array(a["logits"]) - np.array(b["logits"])).max()
print(f"largest logit difference from the whole-context asset: {gap:.1e}")
spanned_calls = ["prefill_s8", "prefill_s8", "prefill_s16", "prefill_s16"]
assert a["ran"] == spanned_calls + ["prefill", "decode", "decode"]
assert gap < 1e-4
# --8<-- [end:run]
