"""KV cache recipes: decode with any write strategy, prefill + decode sharing
states, a sliding-window ring buffer, and the states of a hybrid model.

Run: python snippets/kv_strategies.py [--record DIR]   (writes ./*.aimodel)
"""

import sys

# --8<-- [start:decode]
import numpy as np

from zoo import Model
from zoo.lab.kv_matrix import HostDecoder, build_block, export_block

block = build_block("input-mask-blend")  # one attention layer, tiny widths
asset = export_block(block, "blend.aimodel", overwrite=True)
xs = np.random.default_rng(0).standard_normal((8, 1, 1, block.shape.hidden))
xs = xs.astype(np.float32)

with Model.load(asset) as model:
    on_runtime = HostDecoder(block, model.function("main"))
    in_eager = HostDecoder(block)
    for position, x in enumerate(xs):
        # the strategy's host half builds write_mask and attn_mask per step
        got, want = on_runtime.step(x, position), in_eager.step(x, position)
        np.testing.assert_allclose(got, want, atol=1e-5)
print("8 steps: runtime == eager")
# --8<-- [end:decode]

# --8<-- [start:prefill_decode]
import torch
from torch import nn

from zoo.core.asset.kv_writes import causal_mask
from zoo.core.export.convert import EntryPoint, export
from zoo.core.model.layers import attend


class Prefill(nn.Module):
    """Writes a T-token prompt's K/V at columns 0..T-1, attends causally.

    Shares its weights with the decode block, and its states by name.
    """

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.block = block

    def forward(self, x, attn_mask, k_cache, v_cache):
        b, s, t = self.block, self.block.shape, x.shape[1]
        q = b.q_proj(x).reshape(1, t, s.heads, s.head_dim).transpose(1, 2)
        k = b.k_proj(x).reshape(1, t, s.kv_heads, s.head_dim).transpose(1, 2)
        v = b.v_proj(x).reshape(1, t, s.kv_heads, s.head_dim).transpose(1, 2)
        k_cache[:, :, :t] = k  # a static slice: positions 0..T-1
        v_cache[:, :, :t] = v
        out = attend(q, k_cache, v_cache, attn_mask)
        return b.o_proj(out.transpose(1, 2).reshape(1, t, -1))


def prompt_mask(prompt_length: int, capacity: int) -> np.ndarray:
    """[1, 1, T, C]: row i may attend to columns 0..i."""
    rows = [
        causal_mask(np.arange(capacity) <= i) for i in range(prompt_length)
    ]
    return np.concatenate(rows, axis=2)


decode_block = build_block("runtime-index")
capacity, prompt_length = decode_block.shape.capacity, 4
caches = {n: torch.from_numpy(c) for n, c in decode_block.new_caches().items()}
step = decode_block.strategy.example_step(capacity)
decode = EntryPoint(
    "decode",
    decode_block,
    (
        torch.zeros(1, 1, decode_block.shape.hidden),
        *step.values(),
        *caches.values(),
    ),
    input_names=["x", *step],
    output_names=["y"],
    state_names=list(caches),
)
prompt = torch.randn(1, prompt_length, decode_block.shape.hidden)
mask = torch.from_numpy(prompt_mask(prompt_length, capacity))
asset = export(
    Prefill(decode_block),
    (prompt, mask, *caches.values()),
    "prefill_decode.aimodel",
    entry_point="prefill",
    input_names=["x", "attn_mask"],
    output_names=["y"],
    state_names=list(caches),
    extra_entry_points=[decode],
    overwrite=True,
)

with Model.load(asset) as model:
    prefill = model.function("prefill")
    states = prefill.new_states()  # one set of states for both functions
    prefill({"x": prompt, "attn_mask": mask}, states)
    runtime = HostDecoder(decode_block, model.function("decode"))
    runtime.caches = states  # decode continues from the prefilled cache
    tokens = torch.randn(4, 1, 1, decode_block.shape.hidden).numpy()
    got = [runtime.step(x, prompt_length + i) for i, x in enumerate(tokens)]

# The same 8 tokens in torch eager, one at a time.
eager = HostDecoder(decode_block)
for position, x in enumerate(prompt.numpy().reshape(prompt_length, 1, 1, -1)):
    eager.step(x, position)
want = [eager.step(x, prompt_length + i) for i, x in enumerate(tokens)]
np.testing.assert_allclose(np.stack(got), np.stack(want), atol=1e-5)
print("prefill(4) + decode(4) on one asset == 8 eager steps")
# --8<-- [end:prefill_decode]

# --8<-- [start:ring_buffer]
from zoo.lab.kv_cells import RingBufferWrite

ring = build_block("ring-buffer")
ring.strategy = RingBufferWrite(window=8)  # 8 slots of a 32-column cache
asset = export_block(ring, "ring.aimodel", overwrite=True)
xs = np.random.default_rng(1).standard_normal((20, 1, 1, ring.shape.hidden))
xs = xs.astype(np.float32)

with Model.load(asset) as model:
    runtime = HostDecoder(ring, model.function("main"))
    got = [runtime.step(x, position) for position, x in enumerate(xs)]

# Reference: attention over exactly the last 8 tokens, no cache at all.
with torch.no_grad():
    s = ring.shape
    keys = ring.k_proj(torch.from_numpy(xs)).reshape(
        20, s.kv_heads, s.head_dim
    )
    values = ring.v_proj(torch.from_numpy(xs)).reshape(
        20, s.kv_heads, s.head_dim
    )
    for position in range(20):
        q = ring.q_proj(torch.from_numpy(xs[position])).reshape(
            1, 1, s.heads, s.head_dim
        )
        first = max(0, position - 7)
        k = keys[first : position + 1].transpose(0, 1).unsqueeze(0)
        v = values[first : position + 1].transpose(0, 1).unsqueeze(0)
        out = attend(q.transpose(1, 2), k, v).transpose(1, 2).reshape(1, 1, -1)
        want = ring.o_proj(out).numpy()
        np.testing.assert_allclose(got[position], want, atol=1e-5)
print("ring buffer of 8 == attention over the last 8 tokens, 20 steps")
# --8<-- [end:ring_buffer]


# --8<-- [start:hybrid_states]
class HybridStep(nn.Module):
    """The state set of a hybrid decoder step (attention + linear attention):
    KV caches for the attention layers, conv and recurrent states for the
    GatedDeltaNet layers. The update rules here are placeholders; the real
    layers are in the Qwen3.5 entry."""

    def forward(self, x, write_mask, k_cache, v_cache, conv_state, recurrent):
        dim = x.shape[-1]
        m = write_mask.reshape(1, 1, 1, -1, 1)  # [.., C, 1]
        column = x.reshape(1, 1, 1, 1, dim)
        k_cache.copy_(k_cache * (1 - m) + column * m)
        v_cache.copy_(v_cache * (1 - m) + column * m)
        newest = x.reshape(1, 1, dim, 1).expand(conv_state.shape[0], 1, dim, 1)
        conv_state.copy_(torch.cat([conv_state[..., 1:], newest], dim=-1))
        outer = x.reshape(dim, 1) * x.reshape(1, dim)
        recurrent.copy_(recurrent * 0.9 + outer)
        return x * 2


attention_layers, deltanet_layers, heads, capacity, dim = 1, 3, 2, 32, 16
example = (
    torch.zeros(1, dim),
    torch.zeros(capacity),
    torch.zeros(attention_layers, 1, heads, capacity, dim),  # packed per layer
    torch.zeros(attention_layers, 1, heads, capacity, dim),
    torch.zeros(deltanet_layers, 1, dim, 3),  # conv kernel 4 keeps 3 inputs
    torch.zeros(deltanet_layers, 1, 4, dim, dim),  # 4 value heads
)
names = ["k_cache", "v_cache", "conv_state", "recurrent_state"]
asset = export(
    HybridStep(),
    example,
    "hybrid_states.aimodel",
    input_names=["x", "write_mask"],
    output_names=["y"],
    state_names=names,
    overwrite=True,
)
with Model.load(asset) as model:
    state_table = [
        {"state": name, "shape": str(shape), "dtype": np.dtype(dtype).name}
        for name, (shape, dtype) in model.function("main").states.items()
    ]
for row in state_table:
    print(row)
assert [row["state"] for row in state_table] == names
# --8<-- [end:hybrid_states]

if __name__ == "__main__" and "--record" in sys.argv:
    from zoo import write_record

    directory = sys.argv[sys.argv.index("--record") + 1]
    record = write_record(directory, "hybrid-states", {"states": state_table})
    print(f"wrote {record}")
