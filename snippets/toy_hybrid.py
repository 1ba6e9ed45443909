"""Our repro of apple/coreai-torch#2 (reported on the macOS 27 beta GPU):
NDELTA GatedDeltaNet layers + 1 attention layer in one exported function,
with a static query chunk and a dynamic KV context (the Qwen3.5 shape).

    NDELTA=2 python snippets/toy_hybrid.py           # dynamic context
    NDELTA=2 STATIC=1 python snippets/toy_hybrid.py  # everything static
    python snippets/toy_hybrid.py --matrix [--record DIR]

Built from torch, coreai-torch and the zoo's own layers; the attention
writes its chunk into a fixed-capacity cache state and reads the first
`position_ids.shape[-1]` columns (the dynamic dimension).
"""

# --8<-- [start:model]
import os
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

from zoo import Model
from zoo import export_module as export
from zoo.core.model.layers import GatedMLP, attend
from zoo.qwen3_5.config import Qwen3_5Config
from zoo.qwen3_5.model import GatedDeltaNet, RMSNorm

CHUNK, CAPACITY, CONTEXT = 12, 64, 20  # query tokens, cache size, context
CONFIG = Qwen3_5Config(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    linear_key_head_dim=8,
    linear_value_head_dim=8,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
)


class ToyHybrid(nn.Module):
    """embed -> NDELTA x [norm, GatedDeltaNet, MLP] -> [norm, attention, MLP]
    -> norm -> head. States: k_cache, v_cache, conv_state, ssm_state (the
    last two packed over the DeltaNet layers)."""

    def __init__(self, ndelta: int) -> None:
        super().__init__()
        c, self.ndelta = CONFIG, ndelta
        self.embed = nn.Embedding(c.vocab_size, c.hidden_size)
        self.deltas = nn.ModuleList(GatedDeltaNet(c) for _ in range(ndelta))
        self.mlps = nn.ModuleList(
            GatedMLP(
                c.hidden_size, c.intermediate_size, torch.nn.functional.silu
            )
            for _ in range(ndelta + 1)
        )
        self.norms = nn.ModuleList(
            RMSNorm(c.hidden_size, c.rms_norm_eps)
            for _ in range(2 * ndelta + 3)
        )
        heads, kv, dim = (
            c.num_attention_heads,
            c.num_key_value_heads,
            c.head_dim,
        )
        self.q_proj = nn.Linear(c.hidden_size, heads * dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, kv * dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, kv * dim, bias=False)
        self.o_proj = nn.Linear(heads * dim, c.hidden_size, bias=False)
        self.head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)

    def attention(self, x, position_ids, k_cache, v_cache):
        c = CONFIG
        length = position_ids.shape[-1]  # the dynamic context length
        torch._check(length <= k_cache.shape[2])
        start = length - CHUNK  # the chunk's first position, from a shape
        q = self.q_proj(x).reshape(1, CHUNK, -1, c.head_dim).transpose(1, 2)
        k = self.k_proj(x).reshape(1, CHUNK, -1, c.head_dim).transpose(1, 2)
        v = self.v_proj(x).reshape(1, CHUNK, -1, c.head_dim).transpose(1, 2)
        k_cache[:, :, start:length] = k
        v_cache[:, :, start:length] = v
        rows = start + torch.arange(CHUNK).reshape(-1, 1)
        columns = torch.arange(length).reshape(1, -1)
        mask = torch.where(columns <= rows, 0.0, float("-inf"))
        out = attend(
            q, k_cache.narrow(2, 0, length), v_cache.narrow(2, 0, length), mask
        )
        return self.o_proj(out.transpose(1, 2).reshape(1, CHUNK, -1))

    def forward(
        self, input_ids, position_ids, k_cache, v_cache, conv_state, ssm_state
    ):
        x = self.embed(input_ids)
        for i, delta in enumerate(
            self.deltas
        ):  # the last MLP follows attention
            x = x + delta(self.norms[2 * i](x), conv_state[i], ssm_state[i])
            x = x + self.mlps[i](self.norms[2 * i + 1](x))
        x = x + self.attention(
            self.norms[-3](x), position_ids, k_cache, v_cache
        )
        x = x + self.mlps[-1](self.norms[-2](x))
        return self.head(self.norms[-1](x))


def example_inputs(ndelta: int) -> dict[str, torch.Tensor]:
    c = CONFIG
    generator = torch.Generator().manual_seed(0)
    return {
        "input_ids": torch.randint(
            1, c.vocab_size, (1, CHUNK), generator=generator, dtype=torch.int32
        ),
        "position_ids": torch.arange(CONTEXT, dtype=torch.int32).reshape(
            1, -1
        ),
        "k_cache": torch.zeros(1, c.num_key_value_heads, CAPACITY, c.head_dim),
        "v_cache": torch.zeros(1, c.num_key_value_heads, CAPACITY, c.head_dim),
        "conv_state": torch.zeros(ndelta, 1, 3, c.conv_dim),
        "ssm_state": torch.zeros(ndelta, 1, 4, 8, 8),
    }


# --8<-- [end:model]


# --8<-- [start:run]
def run_toy(ndelta: int, static: bool) -> dict:
    """Export, execute once on the runtime, compare logits with eager."""
    torch.manual_seed(0)
    model, inputs = ToyHybrid(ndelta).eval(), example_inputs(ndelta)
    # Random (not zero) DeltaNet states, as after an earlier chunk.
    inputs["conv_state"].normal_()
    inputs["ssm_state"].normal_(std=0.1)
    with torch.no_grad():
        want = model(*(t.clone() for t in inputs.values()))
    context = (
        None
        if static
        else torch.export.Dim("context", min=CHUNK + 1, max=CAPACITY - 1)
    )
    dynamic_shapes = [
        None,
        {1: context} if context else None,
        None,
        None,
        None,
        None,
    ]
    path = export(
        model,
        tuple(inputs.values()),
        Path(tempfile.mkdtemp()) / f"toy_hybrid_{ndelta}.aimodel",
        input_names=["input_ids", "position_ids"],
        output_names=["logits"],
        state_names=["k_cache", "v_cache", "conv_state", "ssm_state"],
        dynamic_shapes=None if static else dynamic_shapes,
    )
    with Model.load(path) as loaded:
        main = loaded.function("main")
        states = main.new_states(**{n: inputs[n].numpy() for n in main.states})
        got = main(
            {
                "input_ids": inputs["input_ids"],
                "position_ids": inputs["position_ids"],
            },
            states,
        )["logits"]
    error = float(
        np.abs(got - want.numpy()).max() / np.abs(want.numpy()).max()
    )
    return {"relative_error": error}


# --8<-- [end:run]


# --8<-- [start:matrix]
def run_matrix() -> list[dict]:
    """NDELTA 1..3 x dynamic/static, each cell in a process of its own."""
    from zoo.core.isolate import cached_call, run_isolated

    rows = []
    for ndelta in (1, 2, 3):
        for static in (False, True):
            outcome = cached_call(
                lambda n=ndelta, s=static: run_isolated(run_toy, n, s),
                [
                    Path(run_toy.__code__.co_filename),
                    "run_toy",
                    ndelta,
                    static,
                ],
            )
            error = (outcome.result or {}).get("relative_error")
            ran = outcome.ok and error is not None and error < 1e-5
            context = "static" if static else "dynamic"
            rows.append(
                {
                    "key": f"{ndelta}/{context}",
                    "NDELTA": ndelta,
                    "context": context,
                    "outcome": "ran exact" if ran else outcome.summary(),
                    "relative error": error,
                }
            )
    return rows


# --8<-- [end:matrix]


if __name__ == "__main__":
    import sys

    if "--matrix" in sys.argv or "--record" in sys.argv:
        # --8<-- [start:check]
        rows = run_matrix()
        for row in rows:
            print(
                f"NDELTA={row['NDELTA']} {row['context']:<8} {row['outcome']}"
            )
        assert all(row["outcome"] == "ran exact" for row in rows), rows
        # --8<-- [end:check]
        if "--record" in sys.argv:
            from zoo import write_record

            directory = sys.argv[sys.argv.index("--record") + 1]
            record = write_record(directory, "toy-hybrid", {"outcomes": rows})
            print(f"wrote {record}")
    else:
        ndelta = int(os.environ.get("NDELTA", "2"))
        static = os.environ.get("STATIC", "0") == "1"
        result = run_toy(ndelta, static)
        print(
            f"[NDELTA={ndelta} {'static' if static else 'dynamic'}] RAN, "
            f"relative error vs eager {result['relative_error']:.2e}"
        )
