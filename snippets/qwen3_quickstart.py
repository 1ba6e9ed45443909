"""Qwen3 (dense) on Core AI: checkpoint -> .aimodel -> greedy tokens, checked
against transformers. Uses a tiny random checkpoint in Qwen3-0.6B's shape;
point `checkpoint` at a real Qwen3 directory for the real thing.

Run: python snippets/qwen3_quickstart.py
     (writes ./tiny-qwen3/ and ./tiny-qwen3.aimodel)
"""

# --8<-- [start:checkpoint]
from zoo import make_tiny_checkpoint

# 4 layers; 6 query heads of 16 over a hidden size of 64 (0.6B: 16 x 128
# over 1024), 2 KV heads; tied head. Written by transformers.
checkpoint = make_tiny_checkpoint("qwen3", "tiny-qwen3")
# --8<-- [end:checkpoint]

# --8<-- [start:export]
from zoo import export_model
from zoo.qwen3 import load_qwen3

model = load_qwen3(checkpoint, strategy="runtime-index", capacity=64)
asset = export_model(
    model, "tiny-qwen3.aimodel", chunk=4, checkpoint=checkpoint, overwrite=True
)
# --8<-- [end:export]

# --8<-- [start:generate]
from zoo import Generator, greedy_reference, reference_model

prompt = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]  # 2 prefill chunks + 2 steps
with Generator(asset) as generator:
    tokens = generator.generate(prompt, max_new_tokens=8, stop_token_ids=[])

expected = greedy_reference(reference_model("qwen3", checkpoint), prompt)
assert tokens == expected, (tokens, expected)
print(tokens, "8/8 identical to transformers")
# --8<-- [end:generate]

# --8<-- [start:states]
import numpy as np

from zoo import Model

with Model.load(asset) as loaded:
    states = loaded.function("decode").states
# a key and a value cache per layer; keys stored transposed on Linux (the
# platform's layout): k [1, KV heads, head dim, capacity], v [1, KV heads,
# capacity, head dim]
for name, (shape, dtype) in states.items():
    print(f"{name:10} {str(shape):16} {np.dtype(dtype).name}")
# --8<-- [end:states]
