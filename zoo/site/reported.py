"""Quality figures others report, with their sources: drawn beside the zoo's measured ones
and labelled as theirs, never written into a record (`<!-- zoo:quality_plot ... -->`)."""

from __future__ import annotations

from zoo.evaluation import BITS, method_of

RATIO = "perplexity / unquantized"

# Apple's rows: WikiText-2 through lm-evaluation-harness on its PyTorch models (not on
# assets), bits per weight with scales as its BPW column counts them; read 2026-12-03
APPLE = [
    ("SmolLM2-1.7B", "int4, fp16 embedding", 4.56, 14.17, 12.27, "models/smollm2/README.md"),
    ("SmolLM2-1.7B", "mixed 4/8-bit palettized", 4.67, 13.41, 12.27, "models/smollm2/README.md"),
    ("Gemma 3 4B", "4-bit", 4.50, 19.28, 17.90, "models/gemma3/README.md"),
]


def quality_points(records: list[dict]) -> list[dict]:
    """Perplexity as a multiple of the unquantized model's, against bits per weight: a
    series per measured model, text and method (fp32 at 32 bits its first point), and one
    per method Apple reports (fp16 at 16 bits its first point), labelled "reported by
    Apple". Rows scored with an int8 KV cache are left out (the same bits per weight)."""
    points = []
    for record in records:
        results = record["results"]
        rows = [r for r in results["rows"] if not r["preset"].endswith("+int8-kv")]
        base = {r["text"]: r for r in rows if r["preset"] == "fp32"}
        for row in rows:
            if row["preset"] == "fp32":
                continue
            method = method_of(row["preset"])
            series = f"{results['model']}, {row['text']}, {method}"
            for source in (base[row["text"]], row):
                ratio = source["perplexity"] / base[row["text"]]["perplexity"]
                points.append({"series": series, BITS: source[BITS], RATIO: round(ratio, 4)})
    for model, preset, bits, perplexity, fp16, _ in APPLE:
        series = f"{model}, {preset} (reported by Apple)"
        points.append({"series": series, BITS: 16.0, RATIO: 1.0})
        points.append({"series": series, BITS: bits, RATIO: round(perplexity / fp16, 4)})
    return points


def apple_sources() -> str:
    """The line under the plot that says where Apple's points come from."""
    files = sorted({source for *_, source in APPLE})
    return (
        "Reported by Apple (WikiText-2, lm-evaluation-harness, its PyTorch models, not "
        f"assets): apple/coreai-models {', '.join(f'`{f}`' for f in files)}, read 2026-12-03."
    )
