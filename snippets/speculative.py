"""Speculative decoding by prompt lookup: guesses taken from the context,
checked several at a time by the asset's score function; the greedy tokens
are plain greedy decoding's, token for token. A tiny Llama here; the bench
(`python -m zoo.bench.speculative`) runs SmolLM2-135M-Instruct.

Run: python snippets/speculative.py   (writes ./tiny-llama/ and an asset)
"""

# --8<-- [start:export]
import zoo
from zoo.reference import make_tiny_checkpoint

checkpoint = make_tiny_checkpoint("llama", "tiny-llama")
asset = zoo.export(
    checkpoint,
    "tiny-llama.aimodel",
    capacity=64,
    chunk=4,
    score_chunk=4,  # the verify call: 4 tokens in, 4 rows of logits out
    overwrite=True,
)
# --8<-- [end:export]

# --8<-- [start:decode]
from zoo.core.speculative import generate_by_lookup

prompt = [3, 17, 5, 3, 17, 5, 3, 17]
with zoo.Generator(asset) as generator:
    plain = generator.generate(prompt, 24)
    looked, calls = generate_by_lookup(generator, prompt, 24)
print("plain: ", plain)
print("lookup:", looked)
print(calls)
assert looked == plain
# --8<-- [end:decode]
