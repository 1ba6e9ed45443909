"""A calibrated 4-bit preset: GPTQ chooses the codes of int4-block64 on
calibration text, and the asset is an ordinary int4-block64 asset (the same
scales, size and graph; other codes). A tiny Llama here; the records of the
compression guide run it on SmolLM2-135M and Gemma 3 270M.

Run: python snippets/gptq.py
     (writes ./tiny-llama-128/, calibration.txt and two assets)
"""

# --8<-- [start:export]
import random

import zoo
from zoo import make_tiny_checkpoint

checkpoint = make_tiny_checkpoint(
    "llama",
    "tiny-llama-128",
    hidden_size=128,  # blocks of 64 inputs: widths of 64s
    intermediate_size=256,
    num_attention_heads=8,
)
# In practice: a few thousand words like what the model will read, and not
# the text you will judge it on. Here: words of the tiny vocabulary.
random.seed(0)
words = [f"w{random.randrange(3, 128)}" for _ in range(2000)]
with open("calibration.txt", "w") as file:
    file.write(" ".join(words))

calibrated = zoo.export(
    checkpoint,
    "tiny-gptq.aimodel",
    capacity=64,
    compress="gptq:int4-block64",
    calibration="calibration.txt",  # its first 16k tokens, in windows
    overwrite=True,
)
rounded = zoo.export(
    checkpoint,
    "tiny-int4-block64.aimodel",
    capacity=64,
    compress="int4-block64",
    overwrite=True,
)
# --8<-- [end:export]

# --8<-- [start:compare]
from zoo import read_metadata


def megabytes(asset) -> float:
    files = [f for f in asset.rglob("*") if f.is_file()]
    return sum(f.stat().st_size for f in files) / 1e6


for asset in (calibrated, rounded):
    stored = read_metadata(asset)["decode"]["compression"]
    with zoo.Generator(asset) as generator:
        tokens = generator.generate([5, 9, 13, 17], 8)
    print(f"{stored:>18}: {megabytes(asset):.3f} MB, greedy {tokens}")
# --8<-- [end:compare]
