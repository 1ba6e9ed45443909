"""Speculative decoding given drafts that cannot draft, verify widths that cannot verify,
and prompts that do not fit: `zoo export --verify / --first-layers` (in this process) and
`zoo generate --speculate` (a child each: it loads the runtime). A speculative answer
that is accepted must be the plain answer, token for token (greedy)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from zoo.lab.sweep.harness import Bench, Case, Result, Run, planned, zoo_command

SURFACE = "speculation"
PROMPT = ("--prompt-ids", "2,17,33,2,17,33,2,17")
VERIFY = ("--verify", "4")


def speculate(how: str, *options: str, target: tuple[str, ...] = VERIFY):
    """`zoo generate` of the tiny Llama exported with `target` options, `--speculate how`
    (`{draft}` in it: the tiny Llama's first layer, a draft of it; `{other}`: a model of
    another tokenizer; `{hybrid}`: one with recurrent states)."""

    def make(bench: Bench, folder: Path) -> Run:
        asset = bench.asset(*target)
        how_ = how.format(
            draft=bench.asset("--first-layers", "1"),
            other=bench.asset("--capacity", "128", "--chunk", "4", model="gemma4"),
            hybrid=bench.asset(model="qwen3_5"),
            missing=folder / "none.aimodel",
        )
        return Run(["generate", str(asset), "--speculate", how_, *options])

    return make


def like_plain(folder: Path, result: Result) -> str | None:
    """The same tokens as the plain greedy answer of the same asset."""
    asset = result.argv[1]
    plain = subprocess.run(
        zoo_command("generate", asset, *result.argv[4:]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if plain.returncode != 0:
        return f"the plain run failed: {plain.stderr[-200:]}"
    return (
        None
        if plain.stdout.split() == result.out.split()
        else (f"{result.out.split()} != plain {plain.stdout.split()}")
    )


def counted(count: int):
    def check(folder: Path, result: Result) -> str | None:
        return None if len(result.out.split()) == count else f"{result.out!r}"

    return check


def export_case(name: str, options: tuple[str, ...], names: tuple[str, ...] = (), **more):
    def make(bench: Bench, folder: Path) -> Run:
        checkpoint = bench.checkpoint()
        return Run(
            [
                "export",
                str(checkpoint),
                str(folder / "out.aimodel"),
                "--capacity",
                "32",
                "--chunk",
                "4",
                *options,
            ]
        )

    return Case(SURFACE, name, make, names=names, **more)


def generate_case(
    name: str,
    how: str,
    *options: str,
    names: tuple[str, ...] = (),
    target: tuple[str, ...] = VERIFY,
    **more,
) -> Case:
    return Case(
        SURFACE, name, speculate(how, *options, target=target), names=names, child=True, **more
    )


CASES = [
    generate_case(
        "lookup, greedy: the plain answer",
        "lookup",
        *PROMPT,
        "--max-new-tokens",
        "8",
        works=True,
        check=like_plain,
    ),
    generate_case(
        "a draft, greedy: the plain answer",
        "draft:{draft}",
        *PROMPT,
        "--max-new-tokens",
        "8",
        works=True,
        check=like_plain,
    ),
    generate_case(
        "lookup, sampled",
        "lookup",
        *PROMPT,
        "--max-new-tokens",
        "6",
        "--temperature",
        "0.7",
        "--seed",
        "1",
        works=True,
        check=counted(6),
    ),
    generate_case(
        "lookup on an asset without --verify", "lookup", *PROMPT, names=("--verify",), target=()
    ),
    generate_case("a draft not there", "draft:{missing}", *PROMPT, names=("none.aimodel",)),
    generate_case("a draft of another tokenizer", "draft:{other}", *PROMPT, names=("tokenizer",)),
    generate_case("a recurrent draft", "draft:{hybrid}", *PROMPT, names=("draft",)),
    generate_case("a draft given as a name", "draft:", *PROMPT, names=("draft",)),
    generate_case("an unknown way", "oracle", *PROMPT, names=("--speculate",)),
    generate_case(
        "a prompt longer than the context",
        "lookup",
        "--prompt-ids",
        ",".join(["5"] * 40),
        names=("capacity",),
    ),
    generate_case(
        "more new tokens than the context holds",
        "lookup",
        *PROMPT,
        "--max-new-tokens",
        "100",
        names=("--max-new-tokens",),
    ),
    generate_case(
        "with --image", "lookup", "--image", "x.png", "--prompt", "w5", names=("--speculate",)
    ),
    # a width given twice is one width
    export_case(
        "--verify 4,4, planned", ("--verify", "4,4", "--dry-run"), works=True, check=planned
    ),
    export_case("--verify 0", ("--verify", "0"), ("--verify",)),
    export_case("--verify 1", ("--verify", "1"), ("--verify",)),
    export_case("--verify 100000", ("--verify", "100000"), ("--verify",)),
    export_case("--verify as words", ("--verify", "four"), ("--verify",)),
    export_case("--verify with an empty width", ("--verify", "4,,8"), ("--verify",)),
    export_case(
        "--verify 4,8, planned", ("--verify", "4,8", "--dry-run"), works=True, check=planned
    ),
    export_case("--first-layers 0", ("--first-layers", "0"), ("--first-layers",)),
    export_case("--first-layers -1", ("--first-layers", "-1"), ("--first-layers",)),
    export_case("--first-layers above the layers", ("--first-layers", "99"), ("--first-layers",)),
    export_case(
        "--first-layers 1, planned", ("--first-layers", "1", "--dry-run"), works=True, check=planned
    ),
    export_case(
        "--first-layers with --layers-per-function, planned",
        ("--first-layers", "1", "--layers-per-function", "1", "--dry-run"),
        works=True,
        check=planned,
    ),
]
