"""Speculative decoding by prompt lookup: guesses taken from the context,
checked several at a time by the asset's score function; the greedy tokens
are plain greedy decoding's, token for token. A tiny Llama here; the bench
(`python -m zoo.bench.speculative`) runs SmolLM2-135M-Instruct.

Run: python snippets/speculative.py   (writes ./tiny-llama/ and an asset)
"""

# --8<-- [start:export]
import zoo
from zoo import make_tiny_checkpoint

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
from zoo.core.host.speculative import generate_by_lookup

prompt = [3, 17, 5, 3, 17, 5, 3, 17]
with zoo.Generator(asset) as generator:
    plain = generator.generate(prompt, 24)
    looked, calls = generate_by_lookup(generator, prompt, 24)
print("plain: ", plain)
print("lookup:", looked)
print(calls)
assert looked == plain
# --8<-- [end:decode]

# --8<-- [start:draft]
from zoo.core.host.speculative import DraftAsset

# a draft: the model's own first 2 layers, then its final norm and head
early = zoo.export(
    checkpoint,
    "tiny-llama-first2.aimodel",
    capacity=64,
    chunk=4,
    first_layers=2,
    overwrite=True,
)
prompt = [2, 40, 90, 11, 7]  # nothing in it to look up
with zoo.Generator(asset) as generator, zoo.Generator(early) as drafter:
    plain = generator.generate(prompt, 24)
    draft = DraftAsset(drafter)
    drafted, calls = generate_by_lookup(generator, prompt, 24, draft=draft)
print("drafted:", drafted)
print(calls, "draft calls:", draft.feeds)
assert drafted == plain
# --8<-- [end:draft]
