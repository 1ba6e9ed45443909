"""The targets a quality record is judged against, each from its measured rows (the
compression guide shows them met or not)."""

from __future__ import annotations


def _change(value: float, base: float) -> str:
    return f"{100 * (value / base - 1):+.2f}%"


def targets(results: dict) -> list[dict]:
    """Issue 27's targets, each judged from the measured rows of a quality record: int8
    within 1% of fp32, the mixed preset within 5 bits per weight, within +10% of fp32 and
    below int4-block32, runtime and eager perplexity of one asset within 0.5%."""
    rows = {row["preset"].split(":")[0]: row for row in results["rows"]}

    def ppl(row: dict) -> float | None:  # the asset's own number where it was scored
        return row.get("perplexity (runtime)") or row.get("perplexity (eager)")

    fp32 = ppl(rows["fp32"])
    judged = []

    def judge(target: str, measured: str, met: bool) -> None:
        judged.append({"target": target, "measured": measured, "met": "yes" if met else "no"})

    if "int8" in rows and ppl(rows["int8"]):
        int8 = ppl(rows["int8"])
        judge(
            "int8 perplexity within 1% of fp32", _change(int8, fp32), abs(int8 / fp32 - 1) <= 0.01
        )
    if "mixed" in rows and ppl(rows["mixed"]):
        mixed_row, mixed_ppl = rows["mixed"], ppl(rows["mixed"])
        bits = mixed_row["bits per weight"]
        judge("mixed at <= 5 bits per weight", f"{bits:.2f} bits per weight", bits <= 5.0)
        judge(
            "mixed perplexity at most +10% over fp32",
            _change(mixed_ppl, fp32),
            mixed_ppl <= 1.1 * fp32,
        )
        if "int4-block32" in rows and ppl(rows["int4-block32"]):
            int4 = rows["int4-block32"]
            judge(
                "mixed below int4-block32",
                f"{mixed_ppl:.3f} at {bits:.2f} bits vs {ppl(int4):.3f} at "
                f"{int4['bits per weight']:.2f} bits",
                mixed_ppl < ppl(int4),
            )
    gaps = {
        preset: abs(row["perplexity (runtime)"] / row["perplexity (eager)"] - 1)
        for preset, row in rows.items()
        if row.get("perplexity (runtime)") and row.get("perplexity (eager)")
    }
    if gaps:
        worst = max(gaps, key=gaps.get)
        judge(
            "runtime and eager perplexity of one asset within 0.5%",
            f"largest gap {100 * gaps[worst]:.3f}% ({worst}; {len(gaps)} presets scored)",
            gaps[worst] <= 0.005,
        )
    return judged
