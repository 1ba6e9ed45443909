"""An export larger than memory, range by range: each layer range is read
from its own tensors, compressed, converted and written as a part before the
next is read, so peak memory follows the largest range, not the model. A
tiny GPT-OSS checkpoint here; the same call exports gpt-oss-20b on a 24 GB
machine (docs/records/export-streamed.json).

Run: python snippets/streamed_export.py
     (writes ./tiny-gpt_oss/ and two assets beside it)
"""

# --8<-- [start:plan]
import zoo
from zoo import make_tiny_checkpoint

checkpoint = make_tiny_checkpoint("gpt_oss", "tiny-gpt_oss")
plan = zoo.plan_export(
    checkpoint,
    "tiny-gpt_oss-streamed.aimodel",
    compress="int4-block32",  # experts compressed stacked, router fp32
    layers_per_function=1,  # one part per layer (default: ~2 GB fp32 each)
    stream="on",  # "auto": when the model would not fit in half the memory
    overwrite=True,
)
print(plan.describe())
# --8<-- [end:plan]

# --8<-- [start:run]
streamed = zoo.run_plan(plan, progress=print)
print(sorted(p.name for p in streamed.iterdir()))
# --8<-- [end:run]

# --8<-- [start:same]
import numpy as np

from zoo import Generator

whole = zoo.export(
    checkpoint,
    "tiny-gpt_oss-whole.aimodel",
    compress="int4-block32",
    layers_per_function=1,
    stream="off",
    overwrite=True,
)
prompt = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]
logits = {}
for name, asset in (("streamed", streamed), ("in one piece", whole)):
    with Generator(asset) as generator:
        logits[name] = generator.feed(prompt)
        tokens = generator.generate(prompt, 6, stop_token_ids=[])
    print(f"{name:12}: {tokens}")
np.testing.assert_array_equal(logits["streamed"], logits["in one piece"])
print("the same logits, bit for bit")
# --8<-- [end:same]
