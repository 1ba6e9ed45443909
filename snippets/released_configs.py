"""Released config.json files (as published), scaled down to tiny widths:
each decodes like transformers on the Core AI runtime, or is refused.

Run: python snippets/released_configs.py [--record DIR [--model NAME]]
     (with --record: every size of every model, or of one model)
"""

# --8<-- [start:scale]
import json
import tempfile
from pathlib import Path

from zoo.released import released_configs, scale_down

published = json.loads(
    released_configs("gemma4")["gemma-4-E2B-it"].read_text()
)
tiny = scale_down(published)
text, tiny_text = published["text_config"], tiny["text_config"]
for key in ("num_hidden_layers", "hidden_size", "head_dim", "global_head_dim"):
    print(f"{key:18} {text[key]:>6} -> {tiny_text[key]}")
print("stop ids (top level)", tiny["eos_token_id"])
# --8<-- [end:scale]

# --8<-- [start:check]
from zoo.released import released_row

# the tiny checkpoint and asset go with the temporary directory
with tempfile.TemporaryDirectory() as workdir:
    row = released_row("gemma4", "gemma-4-E2B-it", Path(workdir))
print(json.dumps(row, indent=2))
assert row["greedy tokens on the runtime"] == "8/8 identical"
assert row["logits max abs error (runtime)"] < 1e-4
# --8<-- [end:check]

import sys

if __name__ == "__main__" and "--record" in sys.argv:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from zoo import write_record
    from zoo.released import MODELS

    directory = sys.argv[sys.argv.index("--record") + 1]
    models = MODELS
    if "--model" in sys.argv:
        models = (sys.argv[sys.argv.index("--model") + 1],)
    scratch = tempfile.TemporaryDirectory()  # the rows' checkpoints, assets
    workdir = Path(scratch.name)
    cases = [(m, name) for m in models for name in released_configs(m)]
    # two worker processes on two cores, each row seeded on its own
    spawn = multiprocessing.get_context("spawn")
    by_model, names = zip(*cases, strict=True)
    workdirs = [workdir] * len(cases)
    with ProcessPoolExecutor(2, mp_context=spawn) as pool:
        rows = list(pool.map(released_row, by_model, names, workdirs))
    for model in models:
        mine = [row for row in rows if row["model"] == model]
        path = write_record(directory, f"{model}-released", {"rows": mine})
        print(f"wrote {path}")
    scratch.cleanup()
