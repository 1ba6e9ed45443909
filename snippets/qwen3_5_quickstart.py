"""Qwen3.5 (hybrid GatedDeltaNet + attention) on Core AI: checkpoint ->
.aimodel -> greedy tokens, checked against transformers. Uses a tiny random
checkpoint; point `checkpoint` at a real Qwen3.5 directory for the real thing.

Run: python snippets/qwen3_5_quickstart.py [--record DIR]
     (writes ./tiny-qwen3_5/ and ./tiny-qwen3_5*.aimodel)
"""

# --8<-- [start:checkpoint]
from zoo import make_tiny_checkpoint

# 8 layers: 3 GatedDeltaNet + 1 attention, twice; 2 key heads, 4 value heads.
checkpoint = make_tiny_checkpoint(
    "qwen3_5", "tiny-qwen3_5", num_hidden_layers=8
)
# --8<-- [end:checkpoint]

# --8<-- [start:export]
from zoo.qwen3_5 import export_qwen3_5, load_qwen3_5

model = load_qwen3_5(checkpoint, strategy="input-mask-blend", capacity=64)
asset = export_qwen3_5(
    model,
    "tiny-qwen3_5.aimodel",
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

expected = greedy_reference(reference_model("qwen3_5", checkpoint), prompt)
assert tokens == expected, (tokens, expected)
print(tokens, "8/8 identical to transformers")
# --8<-- [end:generate]

# --8<-- [start:states]
import numpy as np

from zoo import Model

with Model.load(asset) as loaded:
    states = loaded.function("decode").states
state_table = [
    {"state": name, "shape": str(shape), "dtype": np.dtype(dtype).name}
    for name, (shape, dtype) in states.items()
]
for row in state_table:
    print(row)
# --8<-- [end:states]

# --8<-- [start:loops]
from zoo.core.export.convert import program_text

graphs = program_text(asset)
# prefill runs the composite GatedDeltaUpdate: one while loop per DeltaNet
# layer; decode runs the loop-free one-token step: no loop at all.
assert graphs["prefill"].count("coreai.while") == 6
assert "coreai.while" not in graphs["decode"]
print({name: text.count("coreai.while") for name, text in graphs.items()})
# --8<-- [end:loops]


def parity_rows() -> list[dict]:
    """Both KV strategies on the 4- and 8-layer tiny checkpoints."""
    from zoo.reference import parity_row

    rows = []
    for layers in (4, 8):
        directory = make_tiny_checkpoint(
            "qwen3_5", f"tiny-qwen3_5-{layers}", num_hidden_layers=layers
        )
        for strategy in ("runtime-index", "input-mask-blend"):
            asset = f"tiny-qwen3_5-{layers}-{strategy}.aimodel"
            label = f"{layers} layers"
            rows.append(
                parity_row(
                    "qwen3_5", directory, strategy, prompt, label, asset
                )
            )
    return rows


if __name__ == "__main__":
    import sys

    if "--record" in sys.argv:
        from zoo import write_record

        directory = sys.argv[sys.argv.index("--record") + 1]
        for name, results in (
            ("qwen3_5-states", {"states": state_table}),
            ("qwen3_5-parity", {"rows": parity_rows()}),
        ):
            print(f"wrote {write_record(directory, name, results)}")
