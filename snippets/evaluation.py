"""Quality on enough text to trust: perplexity with a 95 % interval over
windows of two texts, each preset against fp32 on the same windows.

Small here (4 windows of 128 tokens a text: seconds); the record on the
compression guide is `python snippets/evaluation.py --record DIR`
(64 windows of 512 tokens a text: 32,704 scored tokens each).
"""

import sys

# --8<-- [start:evaluate]
from zoo.evaluation import describe, evaluate

# "+int8-kv": the KV cache stored int8 as well (zoo export --kv-cache int8)
results = evaluate(
    "smollm2-135m-instruct",
    ["fp32", "int8", "fp32+int8-kv"],
    windows=4,
    window=128,
)
for row in results["rows"]:
    print(describe(row))
# --8<-- [end:evaluate]

if __name__ == "__main__" and "--record" in sys.argv:
    import tempfile

    from zoo.evaluation import main

    def option(name, default):
        if name in sys.argv:
            return sys.argv[sys.argv.index(name) + 1]
        return default

    directory = sys.argv[sys.argv.index("--record") + 1]
    model = option("--model", "smollm2-135m-instruct")
    # a mixed preset of this kind, chosen by the sensitivity sweep, scored too
    sweep = ["--sweep", option("--sweep", "")] if "--sweep" in sys.argv else []
    with tempfile.TemporaryDirectory() as assets:  # each preset's asset
        main(
            [model, "--presets", option("--presets", "fp32,int8,int4-block32")]
            + ["--windows", option("--windows", "64")]
            + ["--texts", option("--texts", "sotu-held-out,python-tutorial")]
            + ["--name", option("--name", f"evaluation-{model}")]
            + ["--check-runtime", assets, "--record", directory]
            + sweep
        )
