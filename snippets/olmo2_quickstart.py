"""OLMo 2 on Core AI: a tiny checkpoint in the 1B's proportions, the
re-authored decoder beside transformers, then the command line exports it and
generates (the page runs those commands in the directory this recipe leaves).

Run: python snippets/olmo2_quickstart.py
     (writes ./tiny-olmo2/)
"""

# --8<-- [start:checkpoint]
from zoo import make_tiny_checkpoint

# 4 layers of 4 heads (16 wide) over a hidden size of 64, as many KV heads
# as query heads, an untied head; written by transformers' save_pretrained
checkpoint = make_tiny_checkpoint("olmo2", "tiny-olmo2")
# --8<-- [end:checkpoint]

# --8<-- [start:parity]
import torch

from zoo import reference_model
from zoo.core.model.eager import torch_logits
from zoo.olmo2 import load_olmo2

prompt = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]
ours = torch_logits(load_olmo2(checkpoint, capacity=64), prompt)
with torch.no_grad():
    theirs = reference_model("olmo2", checkpoint)(
        torch.tensor([prompt])
    ).logits
gap = (ours - theirs).abs().max().item()
print(f"largest logit difference from transformers: {gap:.1e}")
assert gap < 1e-4
# --8<-- [end:parity]
