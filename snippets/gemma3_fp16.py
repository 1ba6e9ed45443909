"""Gemma 3 in float16: its residual stream passes fp16's largest value
(65,504) at the first token, and every position's logits become NaN.

Run: python snippets/gemma3_fp16.py [--record DIR [--runtime]]
     (--runtime: an fp16 asset on the Core AI runtime too, a few minutes)
"""

# --8<-- [start:peaks]
from zoo import reference_model
from zoo.fetch import fetch
from zoo.lab.fp16 import FP16_MAX, residual_peaks
from zoo.quality import SCORED, text_ids

name = "gemma3-270m"
ids = text_ids(name, SCORED)  # <bos> + 255 tokens of Lincoln's 1862 address
model = reference_model("gemma3", fetch(name))  # transformers, fp32
fp32_peaks = residual_peaks(model, ids)
for peak in fp32_peaks:
    past = "  past fp16" if peak["max |h|"] > FP16_MAX else ""
    print(
        f"layer {peak['layer']:2}  max |h| {peak['max |h|']:>9,.0f}"
        f"  at position {peak['at position']}{past}"
    )
# --8<-- [end:peaks]

# --8<-- [start:fp16]
from zoo.lab.fp16 import fp16_eager

half = fp16_eager(model, ids)  # the same weights, computed in float16
print("first layer past fp16:", half["first layer past fp16"])
print("positions with finite logits:", half["finite positions"])
assert half["finite positions"] == f"0/{len(ids)}"  # what this page says
# --8<-- [end:fp16]

import sys

if __name__ == "__main__" and "--record" in sys.argv:
    from zoo import write_record

    directory = sys.argv[sys.argv.index("--record") + 1]
    results = {
        "text": f"{SCORED}, first {len(ids)} tokens",
        "fp32 peaks": fp32_peaks,
        "fp16 eager": [{k: v for k, v in half.items() if k != "peaks"}],
    }
    if "--runtime" in sys.argv:  # minutes: fp16 runs seconds a token here
        from zoo.lab.fp16 import fp16_on_runtime

        results["runtime (first 4 tokens)"] = fp16_on_runtime(name, ids[:4])
    print(f"wrote {write_record(directory, 'gemma3-fp16', results)}")
