"""Gemma 4 parity with transformers, per config and KV strategy: logits of
the re-authored torch model, and 8 greedy tokens on the Core AI runtime.

Run: python snippets/gemma4_parity.py [--record DIR]   (all configs)
"""

# --8<-- [start:parity]
import tempfile
from pathlib import Path

from zoo.reference import make_tiny_checkpoint, parity_row

PROMPT = [2, 17, 33, 91, 5, 77, 12, 9, 100, 3]  # longer than a prefill chunk


def parity(variant: str, strategy: str, workdir: Path) -> dict:
    checkpoint = make_tiny_checkpoint("gemma4", workdir / variant, variant)
    asset = workdir / f"{variant}-{strategy}.aimodel"
    return parity_row("gemma4", checkpoint, strategy, PROMPT, variant, asset)


# --8<-- [end:parity]

# --8<-- [start:one]
# the tiny checkpoint and asset go with the temporary directory
with tempfile.TemporaryDirectory() as workdir:
    row = parity("softcap", "input-mask-blend", Path(workdir))
print(row)
assert row["greedy tokens on the runtime"] == "8/8 identical"
assert row["logits max abs error (torch)"] < 1e-4
# --8<-- [end:one]

import sys

if __name__ == "__main__" and "--record" in sys.argv:
    from zoo import write_record

    done = {("softcap", "input-mask-blend"): row}  # the section above's
    with tempfile.TemporaryDirectory() as scratch:
        rows = [
            done.get((variant, strategy))
            or parity(variant, strategy, Path(scratch))
            for variant in ("kv-sharing", "softcap")
            for strategy in ("runtime-index", "input-mask-blend")
        ]
    directory = sys.argv[sys.argv.index("--record") + 1]
    print(f"wrote {write_record(directory, 'gemma4-parity', {'rows': rows})}")
