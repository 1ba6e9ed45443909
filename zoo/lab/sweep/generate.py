"""`zoo generate` given assets that are not whole, options out of range, prompts that do not
fit, and runs side by side or stopped by a signal. Every case loads (or would load) the
Core AI runtime, so each runs as a child process with a time limit."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from zoo.lab.sweep.harness import Bench, Case, Result, Run, copied, zoo_command

SURFACE = "generate"
PROMPT = ("--prompt-ids", "2,17,33")


def generate(asset: Path, *options: str, **run) -> Run:
    return Run(["generate", str(asset), *options], **run)


def case(name: str, options: tuple[str, ...], names: tuple[str, ...] = (), **more) -> Case:
    """`zoo generate` of the tiny Llama asset (capacity 32) with `options`."""

    def make(bench: Bench, folder: Path) -> Run:
        return generate(bench.asset(), *options)

    return Case(SURFACE, name, make, names=names, child=True, **more)


def tokens(count: int):
    """A check: `count` token ids printed on stdout."""

    def check(folder: Path, result: Result) -> str | None:
        said = result.out.split()
        if len(said) != count or not all(t.isdigit() for t in said):
            return f"expected {count} token ids, got {result.out[:100]!r}"
        return None

    return check


def damaged(damage):
    """A copy of the tiny asset, damaged by `damage(asset)` before the run."""

    def make(bench: Bench, folder: Path) -> Run:
        asset = copied(bench.asset(), folder, "copy.aimodel")
        damage(asset)
        return generate(asset, *PROMPT, "--max-new-tokens", "2")

    return make


def program_files(asset: Path) -> list[Path]:
    return sorted(p for p in asset.rglob("*") if p.is_file() and p.name != "metadata.json")


def _edit_metadata(asset: Path) -> None:
    path = asset / "metadata.json"
    data = json.loads(path.read_text())
    data["creatorDefinedMetadata"]["zoo"]["decode"]["capacity"] = 4096
    path.write_text(json.dumps(data))


def _swap(asset: Path) -> None:
    first, second = program_files(asset)[-2:]
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b)
    second.write_bytes(a)


def _biggest(asset: Path) -> Path:
    return max(program_files(asset), key=lambda p: p.stat().st_size)


def _cut(asset: Path) -> None:
    biggest = _biggest(asset)
    biggest.write_bytes(biggest.read_bytes()[: biggest.stat().st_size // 2])


def _side_by_side(bench: Bench, folder: Path) -> Run:
    """A second run on the asset while a first is still running (a child of its own)."""
    asset = bench.asset()
    command = zoo_command("generate", asset, *PROMPT, "--max-new-tokens", "8")
    _side_by_side.first = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    return generate(asset, *PROMPT, "--max-new-tokens", "8")


def _same_answers(folder: Path, result: Result) -> str | None:
    first_out, _ = _side_by_side.first.communicate(timeout=300)
    if _side_by_side.first.returncode != 0:
        return f"the first run ended {_side_by_side.first.returncode}"
    return None if first_out == result.out else f"{first_out!r} != {result.out!r}"


def _with_tokenizer(content: bytes | None):
    def make(bench: Bench, folder: Path) -> Run:
        path = folder / "tokenizer.json"
        if content is not None:
            path.write_bytes(content)
        return generate(bench.asset(), "--prompt", "w5 w6", "--tokenizer", str(path))

    return make


def _long_prompt(bench: Bench, folder: Path) -> Run:
    ids = ",".join(str(3 + i % 90) for i in range(40))
    return generate(bench.asset(), "--prompt-ids", ids)


def _interrupted(number: int, said: str) -> Case:
    """A signal while a long answer is decoded: exit 130 or 143 with one line."""

    def make(bench: Bench, folder: Path) -> Run:
        asset = bench.asset("--capacity", "2048", "--chunk", "4")
        return generate(asset, *PROMPT, interrupt=(number, "loaded in"))

    return Case(
        SURFACE, f"{signal.Signals(number).name} while decoding", make, names=(said,), child=True
    )


def _a_file(bench: Bench, folder: Path) -> Run:
    (folder / "x.aimodel").write_text("no")
    return generate(folder / "x.aimodel", *PROMPT)


CASES = [
    case("greedy, 4 new tokens", (*PROMPT, "--max-new-tokens", "4"), works=True, check=tokens(4)),
    case(
        "sampled with a seed, 4 new tokens",
        (*PROMPT, "--max-new-tokens", "4", "--temperature", "0.8", "--top-k", "5", "--seed", "3"),
        works=True,
        check=tokens(4),
    ),
    Case(
        SURFACE,
        "no asset there",
        lambda b, f: generate(f / "none.aimodel", *PROMPT),
        names=("none.aimodel",),
        child=True,
    ),
    Case(SURFACE, "a file for an asset", _a_file, names=("x.aimodel",), child=True),
    Case(
        SURFACE,
        "a folder without metadata.json",
        damaged(lambda a: (a / "metadata.json").unlink()),
        names=("metadata.json",),
        child=True,
    ),
    Case(
        SURFACE,
        "metadata.json not JSON",
        damaged(lambda a: (a / "metadata.json").write_text("{not json")),
        names=("metadata.json",),
        child=True,
    ),
    Case(
        SURFACE,
        "metadata.json edited",
        damaged(_edit_metadata),
        names=("metadata.json",),
        child=True,
    ),
    Case(SURFACE, "two program files swapped", damaged(_swap), names=("copy.aimodel",), child=True),
    Case(SURFACE, "a program file cut in half", damaged(_cut), names=("copy.aimodel",), child=True),
    Case(
        SURFACE,
        "the program file gone",
        damaged(lambda a: _biggest(a).unlink()),
        names=("copy.aimodel",),
        child=True,
    ),
    case("--max-new-tokens 0", (*PROMPT, "--max-new-tokens", "0"), ("--max-new-tokens",)),
    case("--max-new-tokens -1", (*PROMPT, "--max-new-tokens", "-1"), ("--max-new-tokens",)),
    case(
        "--max-new-tokens past the context",
        (*PROMPT, "--max-new-tokens", "500"),
        ("--max-new-tokens",),
    ),
    case("--temperature -1", (*PROMPT, "--temperature", "-1"), ("--temperature",)),
    case("--temperature nan", (*PROMPT, "--temperature", "nan"), ("--temperature",)),
    case("--temperature inf", (*PROMPT, "--temperature", "inf"), ("--temperature",)),
    case("--top-k 0", (*PROMPT, "--top-k", "0", "--temperature", "1"), ("--top-k",)),
    case("--top-k -3", (*PROMPT, "--top-k", "-3", "--temperature", "1"), ("--top-k",)),
    case("--seed -1", (*PROMPT, "--seed", "-1", "--temperature", "1"), ("--seed",)),
    case("--seed as text", (*PROMPT, "--seed", "abc"), ("--seed",)),
    case("--prompt-ids empty", ("--prompt-ids", ""), ("--prompt-ids",)),
    case("--prompt-ids with an empty id", ("--prompt-ids", "1,,2"), ("--prompt-ids",)),
    case("--prompt-ids as words", ("--prompt-ids", "a,b"), ("--prompt-ids",)),
    case("--prompt-ids outside the vocabulary", ("--prompt-ids", "2,99999"), ("99999",)),
    case("--prompt-ids negative", ("--prompt-ids", "2,-4"), ("-4",)),
    case("--prompt empty", ("--prompt", ""), ("--prompt",)),
    case("--prompt and --prompt-ids", ("--prompt", "w5", *PROMPT), ("--prompt-ids",)),
    Case(
        SURFACE, "a prompt longer than the context", _long_prompt, names=("capacity",), child=True
    ),
    case("--compute-unit gpu on Linux", (*PROMPT, "--compute-unit", "gpu"), ("gpu",)),
    case(
        "--compute-unit of an unknown name", (*PROMPT, "--compute-unit", "npu"), ("--compute-unit",)
    ),
    Case(
        SURFACE,
        "--tokenizer not there",
        _with_tokenizer(None),
        names=("tokenizer.json",),
        child=True,
    ),
    Case(
        SURFACE,
        "--tokenizer not JSON",
        _with_tokenizer(b"{nope"),
        names=("tokenizer.json",),
        child=True,
    ),
    case("--image on a text-only asset", ("--image", "x.png", "--prompt", "w5"), ("--image",)),
    case("--audio on a text-only asset", ("--audio", "x.wav", "--prompt", "w5"), ("--audio",)),
    Case(
        SURFACE,
        "two runs on one asset at once",
        _side_by_side,
        works=True,
        check=_same_answers,
        child=True,
    ),
    _interrupted(signal.SIGINT, "interrupted"),
    _interrupted(signal.SIGTERM, "terminated"),
]
