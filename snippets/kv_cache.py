"""An 8-bit KV cache: each head's key and value at a position stored as
int8 codes with one float32 scale, about a quarter of the fp32 cache's
bytes. A tiny Llama here; the compression guide's records score it on
SmolLM2-135M and Gemma 3 270M.

Run: python snippets/kv_cache.py
     (writes ./tiny-llama-kv/ and two assets)
"""

# --8<-- [start:export]
import zoo
from zoo import make_tiny_checkpoint

checkpoint = make_tiny_checkpoint("llama", "tiny-llama-kv")
assets = {
    cache: zoo.export(
        checkpoint,
        f"tiny-kv-{cache}.aimodel",
        capacity=64,
        kv_cache=cache,  # "fp32" (the default) or "int8"
        overwrite=True,
    )
    for cache in ("fp32", "int8")
}
# --8<-- [end:export]

# --8<-- [start:compare]
import numpy as np

from zoo import DecodeSpec

prompt = [5, 9, 13, 17, 21, 25, 29, 33, 37, 41]
logits = {}
for cache, asset in assets.items():
    spec = DecodeSpec.of_asset(asset)
    with zoo.Generator(asset) as generator:
        logits[cache] = generator.feed(prompt)
        tokens = generator.generate(prompt, 8)
    int8_states = sorted(spec.state_dtypes)[:2]
    print(
        f"{cache}: {spec.kv_bytes_per_token()} bytes a token, "
        f"int8 states {int8_states}, greedy {tokens}"
    )
gap = np.abs(logits["int8"] - logits["fp32"]).max()
print(f"largest logit change from the int8 cache: {gap:.4f}")
# --8<-- [end:compare]

assert 0 < gap < 0.05 * np.abs(logits["fp32"]).max()
