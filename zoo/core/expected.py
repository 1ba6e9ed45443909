"""Expected outcomes per platform, as data: what we measured, and what others reported.

`LINUX` is what the Linux CPU runtime in coreai-core does today (measured by the tests, which
fail if it changes). `REPORTED` holds outcomes on Apple's betas as reported elsewhere, with
their source, until a record measured on a Mac replaces them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reported:
    """Outcomes on a platform this project has not measured, and who reported them."""

    platform: str
    source: str
    outcomes: dict[str, str]


KV_WRITE_SEED = (
    "reported by the community Core AI model zoo, 'Beta gotcha: the data-indexed in-graph KV "
    "write crashes MPSGraph' (Apple Feedback FB23024751, apple/coreai-models#5), macOS 27 / "
    "iOS 27 betas"
)

RAN_EXACT = "ran exact"

# strategy -> outcome on the Linux CPU runtime (coreai-core 1.0.0b3)
LINUX_KV_WRITE: dict[str, str] = {
    "shape-symint": RAN_EXACT,
    "runtime-index-dynamic": RAN_EXACT,
    "runtime-index": RAN_EXACT,
    "host-cache": RAN_EXACT,
    "input-mask-blend": RAN_EXACT,
    "in-graph-one-hot": RAN_EXACT,
    "shift-append": RAN_EXACT,
    "packed-slot-view": RAN_EXACT,
    "packed-slot-whole": RAN_EXACT,
    "constant-mask-blend": RAN_EXACT,
    "index-put": "crashed (SIGILL)",
}

_MAC_GPU_KV_WRITE = {
    "shape-symint": "runs, but re-specializes per length (~27 ms -> ~1.9 s/step)",
    "runtime-index-dynamic": "crashed (SIGTRAP, exit 133)",
    "runtime-index": "crashed (SIGTRAP, exit 133)",
    "host-cache": "runs (8/8 top-1 vs HF on a full Gemma 4)",
    "input-mask-blend": "runs (35-layer Gemma 4 E2B, 8/8 greedy-exact)",
    "in-graph-one-hot": "crashed, like slice_update",
    "shift-append": "runs",
    "packed-slot-view": "runs",
    "packed-slot-whole": "runs",
    "constant-mask-blend": "runs",
    "index-put": "not reported",
}

TOY_HYBRID_SEED = (
    "reported in apple/coreai-torch#2 (coreai-torch 0.4.0, macOS 27.0 beta 26A5353q, "
    "M1 Max): MPSGraph null dereference in mlir::FloatType::getWidth() at the first execute"
)

# (NDELTA, context) -> outcome on the Linux CPU runtime
LINUX_TOY_HYBRID: dict[str, str] = {
    f"{n}/{context}": RAN_EXACT for n in (1, 2, 3) for context in ("dynamic", "static")
}

_MAC_GPU_TOY_HYBRID = {
    "1/dynamic": "runs (exit 0; an ANE compile failure is logged first)",
    "2/dynamic": "crashed (EXC_BAD_ACCESS in MPSGraph)",
    "3/dynamic": "crashed, as reported for 2+ layers (N = 3 not listed)",
    "1/static": "runs (the repro's STATIC=1 note)",
    "2/static": "runs (the repro's STATIC=1 note)",
    "3/static": "runs (the repro's STATIC=1 note)",
}

REPORTED = {
    "kv-write-mac-gpu": Reported("Mac GPU, macOS 27 beta", KV_WRITE_SEED, _MAC_GPU_KV_WRITE),
    "toy-hybrid-mac-gpu": Reported("Mac GPU, macOS 27 beta", TOY_HYBRID_SEED, _MAC_GPU_TOY_HYBRID),
}


def mismatch(kind: str, key: str, expected: str, got: str) -> str | None:
    """None when `got` is what was expected; otherwise a message that says what to do."""
    if got == expected:
        return None
    if expected != RAN_EXACT and got == RAN_EXACT:
        return (
            f"{kind} {key!r}: expected {expected!r} but it now runs exactly: the runtime may "
            "have been fixed. Check it, then update zoo/core/expected.py and the pages."
        )
    return f"{kind} {key!r}: expected {expected!r}, got {got!r}"
