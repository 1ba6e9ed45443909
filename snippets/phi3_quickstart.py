"""Phi-3 / Phi-4 on Core AI: a tiny checkpoint in Phi-4-mini's proportions,
exported and decoded on the Core AI runtime beside transformers, its states,
and the cache it refuses (the page then runs the command line in the
directory this recipe leaves).

Run: python snippets/phi3_quickstart.py
     (writes ./tiny-phi4-mini/ and ./tiny-phi4-mini.aimodel)
"""

# --8<-- [start:checkpoint]
from zoo import make_tiny_checkpoint

# 4 layers of 4 heads (16 wide) over a hidden size of 64, 2 KV heads, a tied
# head, RoPE on 12 of each head's 16 dims, longrope short factors over an
# original context of 64; written by transformers' save_pretrained
checkpoint = make_tiny_checkpoint(
    "phi3", "tiny-phi4-mini", variant="phi4-mini"
)
# --8<-- [end:checkpoint]

# --8<-- [start:export]
from zoo import export_model
from zoo.phi3 import load_phi3

model = load_phi3(checkpoint, strategy="runtime-index", capacity=64)
asset = export_model(
    model,
    "tiny-phi4-mini.aimodel",
    chunk=4,
    checkpoint=checkpoint,
    overwrite=True,
)
# --8<-- [end:export]

# --8<-- [start:generate]
from zoo import Generator, greedy_reference, reference_model

prompt = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]  # 2 prefill chunks + 2 steps
with Generator(asset) as generator:
    tokens = generator.generate(prompt, max_new_tokens=8, stop_token_ids=[])

expected = greedy_reference(reference_model("phi3", checkpoint), prompt)
assert tokens == expected, (tokens, expected)
print(tokens, "8/8 identical to transformers")
# --8<-- [end:generate]

# --8<-- [start:states]
import numpy as np

from zoo import Model

with Model.load(asset) as loaded:
    states = loaded.function("decode").states
# a key and a value cache per layer, the whole head (rotated dims and the
# rest); keys stored transposed on Linux: k [1, KV heads, head dim,
# capacity], v [1, KV heads, capacity, head dim]
for name, (shape, dtype) in states.items():
    print(f"{name:10} {str(shape):16} {np.dtype(dtype).name}")
# --8<-- [end:states]

# --8<-- [start:refused]
from zoo.core.io.files import UnsupportedConfig

# past the original context, longrope switches every position to its long
# factors: the entry refuses that cache instead of computing something else
try:
    load_phi3(checkpoint, capacity=128)
except UnsupportedConfig as refused:
    print(f"refused: {refused}")
# --8<-- [end:refused]
