"""Expected outcomes per platform, as data: what we measured, and what others reported.

One table per matrix: cell -> target -> `Expectation(outcome, source)`. A target is a
platform and compute unit (`linux-cpu`, `macos-gpu`, ...; `current_target()` names this
run's). The tests compare what happened with what is expected (`mismatch`): an expected
crash that still crashes passes; one that now runs fails loudly as "may have been fixed"
(strict xfail); an unexpected crash fails. A target with no entry for a cell expects a
recipe to run exactly and accepts any outcome of a crash repro (recorded either way).

`linux-cpu` is measured by this project's tests; `macos-gpu` is what others reported on the
macOS 27 betas, with its source, until records measured on a Mac replace it
(docs/guides/run-on-your-mac.md).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

RAN_EXACT = "ran exact"
CRASHED = "crashed"  # any signal
ANY = "any outcome (recorded)"


@dataclass(frozen=True)
class Expectation:
    outcome: str  # RAN_EXACT, CRASHED, "crashed (SIGILL)" (that signal), or ANY
    source: str
    detail: str = ""  # what the source said, when it says more than the outcome


MEASURED_HERE = "measured by this project's tests (Linux CPU runtime, coreai-core 1.0.0b3)"

KV_WRITE_REPORT = (
    "reported by the community Core AI model zoo, 'Beta gotcha: the data-indexed in-graph KV "
    "write crashes MPSGraph' (Apple Feedback FB23024751, apple/coreai-models#5), macOS 27 / "
    "iOS 27 betas"
)
TOY_HYBRID_REPORT = (
    "reported in apple/coreai-torch#2 (coreai-torch 0.4.0, macOS 27.0 beta 26A5353q, "
    "M1 Max): MPSGraph null dereference in mlir::FloatType::getWidth() at the first execute"
)


def _measured(outcome: str) -> Expectation:
    return Expectation(outcome, MEASURED_HERE)


def _kv_report(outcome: str, detail: str) -> Expectation:
    return Expectation(outcome, KV_WRITE_REPORT, detail)


def _toy_report(outcome: str, detail: str) -> Expectation:
    return Expectation(outcome, TOY_HYBRID_REPORT, detail)


# KV-write strategy -> target -> expectation
KV_WRITE: dict[str, dict[str, Expectation]] = {
    "shape-symint": {
        "linux-cpu": _measured(RAN_EXACT),
        "macos-gpu": _kv_report(
            RAN_EXACT, "runs, but re-specializes per length (~27 ms -> ~1.9 s/step)"
        ),
    },
    "runtime-index-dynamic": {
        "linux-cpu": _measured(RAN_EXACT),
        "macos-gpu": _kv_report(CRASHED, "crashed (SIGTRAP, exit 133)"),
    },
    "runtime-index": {
        "linux-cpu": _measured(RAN_EXACT),
        "macos-gpu": _kv_report(CRASHED, "crashed (SIGTRAP, exit 133)"),
    },
    "host-cache": {
        "linux-cpu": _measured(RAN_EXACT),
        "macos-gpu": _kv_report(RAN_EXACT, "runs (8/8 top-1 vs HF on a full Gemma 4)"),
    },
    "input-mask-blend": {
        "linux-cpu": _measured(RAN_EXACT),
        "macos-gpu": _kv_report(RAN_EXACT, "runs (35-layer Gemma 4 E2B, 8/8 greedy-exact)"),
    },
    "in-graph-one-hot": {
        "linux-cpu": _measured(RAN_EXACT),
        "macos-gpu": _kv_report(CRASHED, "crashed, like slice_update"),
    },
    "shift-append": {
        "linux-cpu": _measured(RAN_EXACT),
        "macos-gpu": _kv_report(RAN_EXACT, "runs"),
    },
    "packed-slot-view": {
        "linux-cpu": _measured(RAN_EXACT),
        "macos-gpu": _kv_report(RAN_EXACT, "runs"),
    },
    "packed-slot-whole": {
        "linux-cpu": _measured(RAN_EXACT),
        "macos-gpu": _kv_report(RAN_EXACT, "runs"),
    },
    "constant-mask-blend": {
        "linux-cpu": _measured(RAN_EXACT),
        "macos-gpu": _kv_report(RAN_EXACT, "runs"),
    },
    "index-put": {
        "linux-cpu": _measured("crashed (SIGILL)"),
        "macos-gpu": _kv_report(ANY, "not reported"),
    },
}

# toy hybrid cell "NDELTA/context" -> target -> expectation
TOY_HYBRID: dict[str, dict[str, Expectation]] = {
    **{
        f"{n}/static": {
            "linux-cpu": _measured(RAN_EXACT),
            "macos-gpu": _toy_report(RAN_EXACT, "runs (the repro's STATIC=1 note)"),
        }
        for n in (1, 2, 3)
    },
    "1/dynamic": {
        "linux-cpu": _measured(RAN_EXACT),
        "macos-gpu": _toy_report(RAN_EXACT, "runs (exit 0; an ANE compile failure is logged)"),
    },
    "2/dynamic": {
        "linux-cpu": _measured(RAN_EXACT),
        "macos-gpu": _toy_report(CRASHED, "crashed (EXC_BAD_ACCESS in MPSGraph)"),
    },
    "3/dynamic": {
        "linux-cpu": _measured(RAN_EXACT),
        "macos-gpu": _toy_report(CRASHED, "crashed, as reported for 2+ layers (N = 3 not listed)"),
    },
}

TABLES = {"kv-write": KV_WRITE, "toy-hybrid": TOY_HYBRID}
CRASH_REPROS = {"index-put"}  # cells that exist to show a crash, not to decode


# Apple reports the data-indexed KV-write crash fixed from macOS 27 beta 4
# (apple/coreai-models#5, closed 2026-09-02); nobody has verified it on a release build.
REPORTED_FIXED = Expectation(
    RAN_EXACT,
    "Apple: fixed from macOS 27 beta 4 (apple/coreai-models#5, closed 2026-09-02); "
    "not verified on a release build by anyone",
    "reported fixed (unverified)",
)
FIXED_ON_RELEASE = {"kv-write": {"runtime-index", "runtime-index-dynamic", "in-graph-one-hot"}}


def macos_build() -> str | None:
    """`26A428`-style build of this Mac (a beta build ends in a lowercase letter)."""
    if not sys.platform.startswith("darwin"):
        return None
    import subprocess

    done = subprocess.run(["sw_vers", "-buildVersion"], capture_output=True, text=True)
    return done.stdout.strip() or None


def is_release_build(build: str | None) -> bool:
    return bool(build) and not build[-1].islower()


def current_target() -> str:
    """`linux-cpu` on Linux (the only compute unit there); `macos-<unit>` on a Mac."""
    from zoo.core.host.runtime import default_compute_unit

    if not sys.platform.startswith("darwin"):
        return "linux-cpu"
    return f"macos-{os.environ.get('ZOO_EXPECT_UNIT') or default_compute_unit()}"


def expected(table: str, cell: str, target: str | None = None) -> Expectation:
    """What `cell` of `table` should do on `target` (default: this run's)."""
    target = target or current_target()
    if (
        target.startswith("macos")
        and cell in FIXED_ON_RELEASE.get(table, ())
        and is_release_build(os.environ.get("ZOO_MACOS_BUILD") or macos_build())
    ):
        return REPORTED_FIXED
    known = TABLES[table][cell].get(target)
    if known is not None:
        return known
    if cell in CRASH_REPROS:
        return Expectation(ANY, f"nothing measured or reported for {target}")
    return Expectation(RAN_EXACT, f"a recipe is expected to run on {target}; nothing reported")


def matches(expected_outcome: str, got: str) -> bool:
    if expected_outcome == ANY or got == expected_outcome:
        return True
    return expected_outcome == CRASHED and got.startswith("crashed")


def mismatch(
    kind: str, key: str, expected_outcome: str, got: str, reported_fixed: bool = False
) -> str | None:
    """None when `got` is what was expected; otherwise a message that says what to do."""
    if matches(expected_outcome, got):
        return None
    if reported_fixed:
        return (
            f"{kind} {key!r}: Apple reported this fixed (unverified), but here it gave {got!r}. "
            "Record it (pytest --record), tell upstream, and update zoo/lab/expected.py."
        )
    if got == RAN_EXACT:
        return (
            f"{kind} {key!r}: expected {expected_outcome!r} but it now runs exactly: the runtime "
            "may have been fixed. Check it, then update zoo/lab/expected.py and the pages."
        )
    return f"{kind} {key!r}: expected {expected_outcome!r}, got {got!r}"


def reported_column(table: str, target: str = "macos-gpu") -> tuple[dict[str, str], str]:
    """cell -> what was reported on `target`, and the source: the pages' "reported" column."""
    column, sources = {}, []
    for cell, targets in TABLES[table].items():
        if target in targets:
            column[cell] = targets[target].detail or targets[target].outcome
            sources.append(targets[target].source)
    return column, "; ".join(dict.fromkeys(sources))


@dataclass(frozen=True)
class Report:
    """One dated fact about a gotcha: who reported what, on which builds."""

    date: str
    what: str
    source: str


@dataclass(frozen=True)
class GotchaStatus:
    title: str
    affected: str  # builds and toolchain the crash was reported on
    upstream: str  # the upstream issue and its state
    status: str  # "open upstream", "reported fixed (unverified)", "verified fixed"
    checked: str  # when this project last looked upstream
    reports: tuple[Report, ...]
    advice: tuple[tuple[str, str], ...]  # (OS builds, what to do)
    table: str  # the isolation matrix in TABLES that measures it


STATUS: dict[str, GotchaStatus] = {
    "kv-write": GotchaStatus(
        title="The data-indexed KV write crashes MPSGraph",
        affected="macOS 27 / iOS 27 beta 1 (26A5353q), coreai-torch 0.4.0, coreai-core 1.0.0b1",
        upstream="apple/coreai-models#5 (Feedback FB23024751): closed 2026-09-02",
        status="reported fixed (unverified)",
        checked="2026-12-01",
        reports=(
            Report(
                "macOS 27 beta 1",
                "crash at the first execute: Mac GPU SIGTRAP, iPhone GPU SIGSEGV, ANE SIGABRT",
                KV_WRITE_REPORT,
            ),
            Report(
                "2026-09-02",
                "issue closed; Apple says it is fixed from beta 4",
                "apple/coreai-models#5",
            ),
            Report(
                "2026-09-15",
                "macOS 27.0 released (26A428); Apple's iOS Gemma 4 recipe writes the KV cache "
                "at a runtime in_step index again",
                "apple/coreai-models models/gemma4",
            ),
        ),
        advice=(
            ("macOS / iOS 27 betas 1-3", "use input-mask-blend (runs there, as reported)"),
            (
                "macOS / iOS 27.0 and later",
                "runtime-index is expected to run (reported fixed): check it with "
                "`pytest zoo/ --compute-unit gpu --record out/` and contribute the record",
            ),
        ),
        table="kv-write",
    ),
    "toy-hybrid": GotchaStatus(
        title="GatedDeltaNet layers with a dynamic KV context crash MPSGraph",
        affected="macOS 27.0 beta (26A5353q), coreai-torch 0.4.0, Apple M1 Max",
        upstream="apple/coreai-torch#2: open",
        status="open upstream",
        checked="2026-12-01",
        reports=(
            Report(
                "macOS 27.0 beta",
                "EXC_BAD_ACCESS in MPSGraph at the first execute",
                TOY_HYBRID_REPORT,
            ),
            Report(
                "macOS 27.2 (Apple's recipe)",
                "Apple's own Qwen3.5 recipe runs 18 GatedDeltaNet + 6 attention layers over a "
                "dynamic KV cache in one graph, so 27.2+ may not crash; not verified",
                "apple/coreai-models models/qwen3_5",
            ),
        ),
        advice=(
            ("macOS 27 betas", "export with a fixed-capacity cache (the zoo's Qwen3.5 does)"),
            (
                "macOS 27.2 and later",
                "a dynamic context may run (Apple's recipe does); the zoo keeps a fixed "
                "capacity until a Mac record shows it",
            ),
        ),
        table="toy-hybrid",
    ),
}
