"""Where an export writes, and exports range by range: `zoo export CK OUT` with `--stream`,
layer ranges, destinations that are not free, `$TMPDIR` that cannot hold the work, two
exports to one place at once, and signals at work. What the user owns (an asset, a
folder, the checkpoint) must be unchanged whatever the outcome."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from zoo.lab.sweep.harness import Bench, Case, Result, Run, copied, planned, zoo_command

SURFACE = "streaming"
TINY = ("--capacity", "32", "--chunk", "4")


def export_to(bench: Bench, out: Path, *options: str, model: str = "qwen3_moe", **run) -> Run:
    return Run(["export", str(bench.checkpoint(model)), str(out), *TINY, *options], **run)


def exporting(bench: Bench, out: Path, *options: str) -> list[str]:
    """The command line of an export of the tiny Qwen3 MoE run as a child of the case."""
    return zoo_command("export", bench.checkpoint("qwen3_moe"), out, *TINY, *options)


def case(name: str, options: tuple[str, ...], names: tuple[str, ...] = (), **more) -> Case:
    """`zoo export` of the tiny Qwen3 MoE into the case's folder with `options`."""

    def make(bench: Bench, folder: Path) -> Run:
        return export_to(bench, folder / "out.aimodel", *options)

    return Case(SURFACE, name, make, names=names, **more)


def asset_at(folder: Path, result: Result, name: str = "out.aimodel") -> str | None:
    """An asset the zoo wrote, whole, and nothing half-written beside it."""
    asset = folder / name
    if not (asset / "metadata.json").exists():
        return f"no asset at {name}"
    left = [p.name for p in folder.iterdir() if p.name.startswith(".") or "staging" in p.name]
    return f"left behind: {left}" if left else None


def nothing_left(folder: Path, result: Result) -> str | None:
    """Refused or interrupted: no asset and nothing half-written in the folder."""
    left = [p.name for p in folder.iterdir() if p.name not in ("owned.aimodel", "ck.aimodel")]
    return f"left behind: {left}" if left else None


def streamed_ranges(folder: Path, result: Result) -> str | None:
    problem = asset_at(folder, result)
    if problem:
        return problem
    parts = json.loads((folder / "out.aimodel" / "metadata.json").read_text())
    return None if "parts" in json.dumps(parts) else "not written range by range"


def existing(kind: str):
    """A destination that is there already: an asset the zoo wrote, a folder of the
    user's, a file."""

    def make(bench: Bench, folder: Path, *options: str) -> Run:
        out = folder / "owned.aimodel"
        if kind == "asset":
            copied(bench.asset(), folder, out.name)
        elif kind == "folder":
            out.mkdir()
            (out / "notes.txt").write_text("mine")
        else:
            out.write_text("mine")
        return export_to(bench, out, *options, kept=(out,))

    return make


def _streamed_then_replaced(bench: Bench, folder: Path) -> Run:
    out = folder / "out.aimodel"
    first = subprocess.run(
        exporting(bench, out, "--stream", "on", "--layers-per-function", "2"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert first.returncode == 0, first.stderr
    return export_to(bench, out, "--stream", "on", "--overwrite")


def _killed_then_again(bench: Bench, folder: Path) -> Run:
    """An export killed (SIGKILL) while it writes, then run again: the second is done."""
    out = folder / "out.aimodel"
    command = exporting(bench, out, "--stream", "on", "--layers-per-function", "1")
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as child:
        for line in child.stderr:  # killed once it has begun to write a range
            if "range" in line or "convert" in line:
                child.kill()
                break
        child.wait()
    return export_to(bench, out, "--stream", "on")


def _inside_the_checkpoint(bench: Bench, folder: Path) -> Run:
    checkpoint = copied(bench.checkpoint("qwen3_moe"), folder, "ck.aimodel")
    return Run(
        ["export", str(checkpoint), str(checkpoint / "out.aimodel"), *TINY], kept=(checkpoint,)
    )


def _onto_the_checkpoint(bench: Bench, folder: Path) -> Run:
    """A checkpoint folder named like an asset, given as both (an overwrite would delete
    the weights)."""
    checkpoint = copied(bench.checkpoint("qwen3_moe"), folder, "ck.aimodel")
    return Run(
        ["export", str(checkpoint), str(checkpoint), *TINY, "--overwrite"], kept=(checkpoint,)
    )


def _around_the_checkpoint(bench: Bench, folder: Path) -> Run:
    (folder / "owned.aimodel").mkdir()
    checkpoint = copied(bench.checkpoint("qwen3_moe"), folder / "owned.aimodel", "ck")
    return Run(
        ["export", str(checkpoint), str(folder / "owned.aimodel"), *TINY, "--overwrite"],
        kept=(folder / "owned.aimodel",),
    )


def _under_a_file(bench: Bench, folder: Path) -> Run:
    (folder / "owned.aimodel").write_text("mine")
    out = folder / "owned.aimodel" / "out.aimodel"
    return export_to(bench, out, kept=(folder / "owned.aimodel",))


def _tmpdir(kind: str) -> Case:
    """`$TMPDIR` missing or a file: the export still done (the staging sits beside the
    destination, not in $TMPDIR)."""

    def make(bench: Bench, folder: Path) -> Run:
        tmp = folder / "tmp"
        if kind == "a file":
            tmp.write_text("not a folder")
        env = {"TMPDIR": str(tmp)}
        return export_to(bench, folder / "out.aimodel", "--stream", "on", env=env)

    return Case(SURFACE, f"$TMPDIR {kind}", make, works=True, check=asset_at, child=True, limit=300)


def _two_at_once(bench: Bench, folder: Path) -> Run:
    """A second export to the destination of one still running (a child)."""
    out = folder / "out.aimodel"
    command = exporting(bench, out, "--stream", "on")
    folder.joinpath("first.log").touch()
    _two_at_once.first = subprocess.Popen(  # waited for by its check
        command, stdout=subprocess.DEVNULL, stderr=(folder / "first.log").open("w")
    )
    return export_to(bench, out, "--stream", "on")


def _both_done(folder: Path, result: Result) -> str | None:
    first = _two_at_once.first
    code = first.wait(600)
    said = (folder / "first.log").read_text()
    (folder / "first.log").unlink()
    if code not in (0, 2):
        return f"the first export ended {code}: {said[-200:]}"
    # the one that finishes second refuses: mid-export, or (a slow start) before it began
    refusals = ("appeared during the export; nothing replaced", "already exists")
    if code == 2 and not any(refusal in said for refusal in refusals):
        return f"the first export refused vaguely: {said[-200:]}"
    return asset_at(folder, result)


def _signalled(number: int, said: str) -> Case:
    """A signal while a streamed export converts: one line, and nothing left behind."""

    def make(bench: Bench, folder: Path) -> Run:
        interrupt = (number, "converting ...")  # once the first range converts
        return export_to(bench, folder / "out.aimodel", "--stream", "on", interrupt=interrupt)

    return Case(
        SURFACE,
        f"{signal.Signals(number).name} while converting",
        make,
        names=(said,),
        check=nothing_left,
        child=True,
    )


CASES = [
    case("--stream on, planned", ("--stream", "on", "--dry-run"), works=True, check=planned),
    case(
        "--stream on, ranges of 2",
        ("--stream", "on", "--layers-per-function", "2"),
        works=True,
        check=streamed_ranges,
    ),
    case("--stream of an unknown name", ("--stream", "always"), ("--stream",)),
    case("--layers-per-function 0", ("--layers-per-function", "0"), ("--layers-per-function",)),
    case("--layers-per-function -1", ("--layers-per-function", "-1"), ("--layers-per-function",)),
    case(
        "--layers-per-function as text",
        ("--layers-per-function", "two"),
        ("--layers-per-function",),
    ),
    case(
        "--layers-per-function above the layers, planned",
        ("--layers-per-function", "99", "--dry-run"),
        works=True,
        check=planned,
    ),
    case("--capacity 0", ("--capacity", "0"), ("--capacity",)),
    case("--capacity -5", ("--capacity", "-5"), ("--capacity",)),
    case("--capacity of a billion", ("--capacity", "1000000000"), ("--capacity",)),
    case("--chunk 0", ("--chunk", "0"), ("--chunk",)),
    case("--chunk above the capacity", ("--chunk", "64"), ("--chunk",)),
    case(
        "--stream on with --target apple-engine",
        ("--stream", "on", "--target", "apple-engine"),
        ("apple-engine",),
    ),
    case(
        "--stream on --compress int8, planned",
        ("--stream", "on", "--compress", "int8", "--dry-run"),
        works=True,
        check=planned,
    ),
    Case(SURFACE, "onto an asset, no --overwrite", existing("asset"), names=("--overwrite",)),
    Case(
        SURFACE,
        "onto a folder of the user's, --overwrite",
        lambda b, f: existing("folder")(b, f, "--overwrite"),
        names=("owned.aimodel",),
    ),
    Case(
        SURFACE,
        "onto a file, --overwrite",
        lambda b, f: existing("file")(b, f, "--overwrite"),
        names=("owned.aimodel",),
    ),
    Case(
        SURFACE,
        "onto an asset, --dry-run --overwrite",
        lambda b, f: existing("asset")(b, f, "--overwrite", "--dry-run"),
        works=True,
    ),
    Case(
        SURFACE,
        "a streamed asset replaced with --overwrite",
        _streamed_then_replaced,
        works=True,
        check=asset_at,
        limit=300,
    ),
    Case(
        SURFACE,
        "killed while writing, then again",
        _killed_then_again,
        works=True,
        check=asset_at,
        limit=300,
    ),
    Case(SURFACE, "into the checkpoint", _inside_the_checkpoint, names=("checkpoint",)),
    Case(SURFACE, "onto the checkpoint, --overwrite", _onto_the_checkpoint, names=("checkpoint",)),
    Case(
        SURFACE,
        "onto a folder holding the checkpoint, --overwrite",
        _around_the_checkpoint,
        names=("checkpoint",),
    ),
    Case(SURFACE, "under a file", _under_a_file, names=("owned.aimodel",)),
    *(_tmpdir(kind) for kind in ("missing", "a file")),
    Case(
        SURFACE,
        "two exports to one place at once",
        _two_at_once,
        works=True,
        check=_both_done,
        limit=600,
    ),
    *(
        _signalled(number, said)
        for number, said in ((signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated"))
    ),
]
