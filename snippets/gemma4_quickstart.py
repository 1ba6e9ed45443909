"""Gemma 4 on Core AI: checkpoint -> .aimodel -> greedy tokens, checked
against transformers. Uses a tiny random checkpoint; point `checkpoint` at a
real Gemma 4 directory (config.json + *.safetensors) for the real thing.

Run: python snippets/gemma4_quickstart.py [--record DIR]
     (writes ./tiny-gemma4/ and ./tiny-gemma4.aimodel)
"""

# --8<-- [start:checkpoint]
from zoo import make_tiny_checkpoint

# 6 layers (sliding/full alternating), KV sharing in the last 2, per-layer
# embeddings, random weights: written by transformers' save_pretrained.
checkpoint = make_tiny_checkpoint(
    "gemma4", "tiny-gemma4", variant="kv-sharing"
)
# --8<-- [end:checkpoint]

# --8<-- [start:export]
from zoo.gemma4 import export_gemma4, load_gemma4

model = load_gemma4(checkpoint, strategy="runtime-index", capacity=64)
asset = export_gemma4(
    model,
    "tiny-gemma4.aimodel",
    chunk=4,  # prefill takes 4 tokens per call; decode takes 1
    checkpoint=checkpoint,  # remembered, to find its tokenizer.json
    overwrite=True,
)
# --8<-- [end:export]

# --8<-- [start:generate]
from zoo import Generator

prompt = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]
with Generator(asset) as generator:
    tokens = generator.generate(prompt, max_new_tokens=8, stop_token_ids=[])
print(tokens)
# --8<-- [end:generate]

# --8<-- [start:compare]

from zoo import greedy_reference, reference_model

# transformers' Gemma4ForCausalLM
reference = reference_model("gemma4", checkpoint)
expected = greedy_reference(reference, prompt)
assert tokens == expected, (tokens, expected)
print("8/8 greedy tokens identical to transformers")
# --8<-- [end:compare]

# --8<-- [start:states]
import numpy as np

from zoo import Model

with Model.load(asset) as loaded:
    decode = loaded.function("decode")
    state_table = [
        {"state": name, "shape": str(shape), "dtype": np.dtype(dtype).name}
        for name, (shape, dtype) in decode.states.items()
    ]
    print(decode.input_names)
for row in state_table:
    print(row)
# --8<-- [end:states]

import sys

if __name__ == "__main__" and "--record" in sys.argv:
    from zoo import write_record

    directory = sys.argv[sys.argv.index("--record") + 1]
    record = write_record(directory, "gemma4-states", {"states": state_table})
    print(f"wrote {record}")
