"""How a sweep case runs and how its outcome is classed.

A case writes what it needs into a folder of its own (a damaged file, an edited copy of a
tiny checkpoint, a hub cache) and names a `zoo` command line. It runs in this process (an
export refused before any conversion costs milliseconds) or, when it loads the Core AI
runtime or sends a signal, as a child `python -m zoo` with a time limit: a runtime crash
kills the process that hosts it. Its outcome is one of `CLASSES`:

- clear: refused in one line (exit 2) that names what the case says it must (the option,
  the file, the field), no traceback, no Python exception's name standing for a message;
- right: a valid input did what it asks (the case's own check says so);
- vague: refused, but the line misses what to name, or names a library's exception;
- wrongly refused, silently wrong: a valid input refused; a bad one accepted, or a
  valid one done wrong;
- hang: still running at the time limit; crash: a traceback, or a child killed by a
  signal; data lost: a file the user owns changed or gone; outside: a file written
  outside the case's folder (the shared fixtures included).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

CLASSES = (
    "clear",
    "right",
    "vague",
    "wrongly refused",
    "silently wrong",
    "hang",
    "crash",
    "data lost",
    "outside",
)
GOOD = ("clear", "right")
# a library's exception named in the line: the zoo did not say what went wrong
LEAKED = re.compile(r"^error: (\w+(Error|Exception)): ")


@dataclass(frozen=True)
class Run:
    """One command line of a case, and what must hold around it."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # set for this case only
    kept: tuple[Path, ...] = ()  # what the user owns: unchanged afterwards, byte for byte
    # (signal, text): sent to a child once its stderr has said the text (it is at work)
    interrupt: tuple[int, str] | None = None
    cwd: Path | None = None  # a child's working folder


@dataclass
class Result:
    code: int | None  # None: an exception escaped; negative: a child killed by a signal
    out: str
    err: str
    seconds: float
    timed_out: bool = False
    argv: list[str] = field(default_factory=list)  # the command line that ran
    sent: int | None = None  # the signal sent to the child, if one was


@dataclass(frozen=True)
class Case:
    """One input tried: `make(bench, folder)` writes it and names the command."""

    surface: str
    name: str
    make: Callable[[Bench, Path], Run]
    names: tuple[str, ...] = ()  # what a clear refusal names
    works: bool = False  # a valid input: it must be done, and done right
    check: Callable[[Path, Result], str | None] | None = None  # None: right; else what is wrong
    child: bool = False  # run as `python -m zoo` in a child process
    limit: float = 120.0  # seconds before it counts as a hang

    @property
    def key(self) -> str:
        return f"{self.surface}/{self.name}"


class Bench:
    """The shared fixtures, made once on first use under `root` and never written again:
    a case that edits one edits its own copy (`copied`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)

    def made(self, name: str, build: Callable[[Path], object]) -> Path:
        path = self.root / name
        if not path.exists():
            staging = self.root / f".partial-{name}"
            build(staging)
            staging.rename(path)
        return path

    def checkpoint(self, model: str = "llama", **options) -> Path:
        from zoo.reference import make_tiny_checkpoint

        suffix = "-".join(f"{k}" for k, v in sorted(options.items()) if v)
        return self.made(
            f"{model}{'-' + suffix if suffix else ''}",
            lambda path: make_tiny_checkpoint(model, path, **options),
        )

    def asset(self, *options: str, model: str = "llama") -> Path:
        """The tiny `model` exported with the given `zoo export` options (capacity 32 and
        chunk 4 unless they say otherwise)."""
        checkpoint = self.checkpoint(model, **multimodal(model))
        name = "-".join([model, *(o.strip("-") for o in options)]) + ".aimodel"
        defaults = [] if "--capacity" in options else ["--capacity", "32", "--chunk", "4"]

        def export(path: Path) -> None:
            run = Run(["export", str(checkpoint), str(path), *defaults, *options])
            done = in_process(run, limit=600)
            assert done.code == 0, f"the sweep's fixture {name} failed: {done.err}"

        return self.made(name, export)


def planned(folder: Path, result: Result) -> str | None:
    """A dry run's check: the plan printed, no asset written."""
    if (folder / "out.aimodel").exists():
        return "a dry run wrote the asset"
    return None if "dry run: nothing written" in result.err else f"no plan: {result.err[-200:]}"


def multimodal(model: str) -> dict:
    return {"images": True, "audio": True} if model == "gemma4" else {}


def copied(source: Path, folder: Path, name: str | None = None) -> Path:
    """A copy of a fixture (a file or a folder) the case may damage."""
    import shutil

    target = folder / (name or source.name)
    if source.is_dir():
        shutil.copytree(source, target, symlinks=True)
    else:
        shutil.copyfile(source, target)
    return target


class Hung(BaseException):
    """The time limit of an in-process case (not an Exception: `act` must not catch it)."""


def in_process(run: Run, limit: float) -> Result:
    """`zoo ARGV` in this process, its output captured, stopped at `limit` seconds."""
    from zoo.command import main

    out, err = io.StringIO(), io.StringIO()
    # before the environment changes: the hub library, imported here, reads it once
    hub = hub_cache_at(Path(run.env["HF_HOME"]) / "hub" if "HF_HOME" in run.env else None)
    saved = {name: os.environ.get(name) for name in run.env}
    os.environ.update(run.env)
    here = Path.cwd()
    if run.cwd:
        os.chdir(run.cwd)

    def stop(*_) -> None:
        raise Hung

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, limit)
    started, code, timed_out = time.monotonic(), None, False
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(run.argv))
            except SystemExit as exit_:  # argparse's refusals
                code = exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 2
            except Hung:
                timed_out = True
            except BaseException:
                err.write(traceback.format_exc())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        os.chdir(here)
        hub_cache_at(hub)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    seconds = time.monotonic() - started
    return Result(code, out.getvalue(), err.getvalue(), seconds, timed_out, list(run.argv))


def hub_cache_at(folder: Path | None) -> Path | None:
    """Point the hub library at `folder` (it reads `HF_HOME` once, when imported); the
    folder it pointed at before. None: leave it."""
    if folder is None:
        return None
    from huggingface_hub import constants

    before, constants.HF_HUB_CACHE = constants.HF_HUB_CACHE, str(folder)
    return Path(before)


def zoo_command(*argv) -> list[str]:
    """`python -m zoo ARGV` as a child process's command line."""
    return [sys.executable, "-m", "zoo", *map(str, argv)]


def in_child(run: Run, limit: float) -> Result:
    """`python -m zoo ARGV` as a child process, killed at `limit` seconds."""
    command = zoo_command(*run.argv)
    env = {**os.environ, **run.env}
    started = time.monotonic()
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=run.cwd
    ) as child:
        said, sent = "", None  # stderr read before the signal, and the signal
        if run.interrupt:  # sent once the child says it is at work: on any machine's speed
            number, marker = run.interrupt
            while marker not in said and (line := child.stderr.readline()):
                said += line
            time.sleep(0.3)
            if child.poll() is None:
                child.send_signal(number)
                sent = number
        try:
            out, err = child.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
            return Result(None, out, said + err, time.monotonic() - started, True, run.argv, sent)
    seconds = time.monotonic() - started
    return Result(child.returncode, out, said + err, seconds, False, run.argv, sent)


def tree_digest(path: Path) -> str:
    """What a user's file or folder holds: names and bytes (a folder: every file in it)."""
    digest = hashlib.sha256()
    if not path.exists() and not path.is_symlink():
        return "gone"
    files = [path] if not path.is_dir() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        digest.update(str(file.relative_to(path.parent)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def listing(folder: Path, leave_out: Path | None = None) -> dict[str, tuple[int, int]]:
    """Every file under `folder` (but under `leave_out`) with its size and mtime."""
    found = {}
    for root, _, files in os.walk(folder):  # a folder that goes while it is read is passed
        for path in [Path(root)] + [Path(root) / name for name in files]:
            if leave_out is not None and (path == leave_out or leave_out in path.parents):
                continue
            with contextlib.suppress(OSError):
                stat = path.lstat()
                found[str(path)] = (stat.st_size, stat.st_mtime_ns)
    found.pop(str(folder), None)
    return found


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def classify(case: Case, folder: Path, result: Result) -> tuple[str, str]:
    """The outcome of a run that kept what the user owns and wrote nothing outside."""
    message = last_line(result.err)
    if result.timed_out:
        return "hang", f"still running after {case.limit:g} s"
    # a child that ended by the signal it was sent after saying so (as Python itself ends
    # on an unhandled Ctrl-C) is judged by its line, as a refusal is; any other signal is
    # a crash
    killed = result.code is not None and result.code < 0 and -result.code != result.sent
    if result.code is None or killed or "Traceback (most recent call last)" in result.err:
        how = f"killed by signal {-result.code}" if result.code else "a traceback"
        return "crash", f"{how}: {message}"
    if case.works:
        if result.code != 0:
            return "wrongly refused", message
        problem = case.check(folder, result) if case.check else None
        if problem is not None:
            return "silently wrong", problem
        return "right", last_line(result.out)[:200]
    if result.code == 0:
        return "silently wrong", f"accepted: {last_line(result.out or result.err)[:200]}"
    if LEAKED.match(message):
        return "vague", message
    missing = [name for name in case.names if name not in message]
    if missing:
        return "vague", f"does not name {missing}: {message}"
    problem = case.check(folder, result) if case.check else None  # e.g. nothing left behind
    return ("clear", message) if problem is None else ("silently wrong", problem)


def run_case(case: Case, bench: Bench, folder: Path) -> tuple[str, str, float]:
    """Run `case` in `folder` (made, empty): its class, the line that shows it, seconds."""
    folder.mkdir(parents=True, exist_ok=True)
    run = case.make(bench, folder)
    kept = {path: tree_digest(path) for path in run.kept}
    shared, around = listing(bench.root), listing(folder.parent, leave_out=folder)
    result = (in_child if case.child else in_process)(run, case.limit)
    lost = [str(path) for path, digest in kept.items() if tree_digest(path) != digest]
    written = sorted(
        set(listing(bench.root).items()) ^ set(shared.items())
        | set(listing(folder.parent, leave_out=folder).items()) ^ set(around.items())
    )
    if lost:
        return "data lost", f"changed or gone: {lost}", result.seconds
    if written:
        return "outside", f"written outside its folder: {written[:3]}", result.seconds
    kind, shown = classify(case, folder, result)
    return kind, shown, result.seconds
