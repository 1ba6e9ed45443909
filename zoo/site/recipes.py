"""Recipes (`snippets/*.py`) run once, with what each section prints.

A page shows a recipe by including its sections (`--8<-- "snippets/x.py:section"`). The
recipe runs as a reader runs it (`python snippets/x.py`, in a scratch directory), once per
test session or build: `run_recipe` keeps the run (outcome, the stdout of each section,
the records it wrote, the files it left) under a key made of the code it depends on, and a
second caller (another page, the build, `tests/test_snippets.py`) reuses it. The build
renders each section's output under its block; the page harness checks that every block it
includes ran. Command lines on a page (```` ```bash {run="snippets/x.py"} ````) run in the
directory the recipe left, with their output rendered the same way.

Runs live in `$ZOO_RECIPE_RUNS` (the test session sets it), else `.cache/recipes/` of the
checkout: a build with no code changed reuses them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from zoo.core.io.staging import locked

ROOT = Path(__file__).resolve().parents[2]
RUNS_ENV = "ZOO_RECIPE_RUNS"
MARKER = re.compile(r"#\s*--8<--\s*\[(?P<kind>start|end):(?P<name>[\w-]+)\]")
TIMEOUT = 900  # seconds per recipe
# directories tools keep in $TMPDIR across runs (torch.export's inductor cache): not a
# recipe's leftovers
TOOL_CACHES = ("torchinductor_",)


class RecipeError(RuntimeError):
    """A recipe (or a command line after it) failed: the message has its stderr tail."""


def read_sections(path: Path) -> dict[str, tuple[int, int]]:
    """Section name -> (line of its start marker, line of its end marker), 1-based."""
    starts, sections = {}, {}
    for number, line in enumerate(Path(path).read_text().split("\n"), start=1):
        if match := MARKER.search(line):
            if match["kind"] == "start":
                starts[match["name"]] = number
            elif match["name"] in starts:
                sections[match["name"]] = (starts.pop(match["name"]), number)
            else:
                raise ValueError(f"{path}:{number}: [end:{match['name']}] without a start")
    if starts:
        raise ValueError(f"{path}: sections never ended: {sorted(starts)}")
    return sections


@dataclass
class RecipeRun:
    recipe: str  # snippets/x.py
    directory: Path  # the run's own directory: cwd/, records/, run.json
    ok: bool
    sections: dict[str, str]  # section -> what it printed
    seconds: float
    error: str | None
    stderr_tail: str
    failed_line: int | None = None  # the recipe's line that raised, if it raised
    traceback: str = ""
    left_in_tmp: list[str] = field(default_factory=list)  # files it left in its $TMPDIR

    @property
    def cwd(self) -> Path:
        return self.directory / "cwd"

    @property
    def records(self) -> Path:
        return self.directory / "records"

    def summary(self) -> str:
        return "ran" if self.ok else f"failed: {self.error}"


def child_env(tmp: Path | None = None, **extra: str) -> dict[str, str]:
    """The environment of a recipe's or a page's child process: the checkout importable,
    and (with `tmp`) a TMPDIR of the run's own, so a recipe's temporary files go with the
    run instead of piling up in the machine's $TMPDIR."""
    env = {**os.environ, **extra}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    if tmp is not None:
        tmp.mkdir(parents=True, exist_ok=True)
        env["TMPDIR"] = str(tmp)
    return env


def runs_directory() -> Path:
    return Path(os.environ.get(RUNS_ENV) or ROOT / ".cache" / "recipes")


def code_key(*extra: str) -> str:
    """A digest of everything a recipe's run depends on: the zoo's code and data, the
    recipes, the pinned toolchain (and `extra`)."""
    digest = hashlib.sha256()
    files = [ROOT / "pyproject.toml", *sorted((ROOT / "snippets").rglob("*.py"))]
    files += sorted(
        p for p in (ROOT / "zoo").rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )
    for path in files:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    for part in extra:
        digest.update(part.encode())
    return digest.hexdigest()[:16]


def recipe_arguments(path: Path, records: Path) -> list[str]:
    """`--record DIR` for a recipe that writes records (`zoo.core.io.records.GENERATORS`)."""
    from zoo.core.io.records import GENERATORS

    writes = any(
        (ROOT / script).resolve() == path and not extra for script, extra in GENERATORS.values()
    )
    return ["--record", str(records)] if writes else []


def run_recipe(recipe: str, base: Path = ROOT, timeout: float = TIMEOUT) -> RecipeRun:
    """The run of `recipe` (a path relative to `base`, the checkout by default) for the
    current code: made now, or the one an earlier caller made."""
    path = (Path(base) / recipe).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no recipe {recipe} in {base}")
    key = code_key(str(path), path.read_text())
    directory = runs_directory() / f"{path.stem}-{key}"
    with locked(directory.with_suffix(".lock")):
        result = directory / "run.json"
        if not result.exists():
            _run(recipe, path, directory, timeout)
        report = json.loads(result.read_text())
    return RecipeRun(
        recipe=recipe,
        failed_line=report.get("failed_line"),
        traceback=report.get("traceback", ""),
        directory=directory,
        ok=report["ok"],
        sections=report.get("sections", {}),
        seconds=report.get("seconds") or 0.0,
        error=report.get("error"),
        stderr_tail=report.get("stderr_tail", ""),
        left_in_tmp=report.get("left_in_tmp", []),
    )


def _run(recipe: str, path: Path, directory: Path, timeout: float) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    (directory / "cwd").mkdir(parents=True)
    staged = directory / "run.partial.json"
    arguments = recipe_arguments(path, directory / "records")
    command = [sys.executable, "-m", "zoo.site._run_recipe", str(path), str(staged)]
    env = child_env(directory / "tmp")
    print(f"zoo: running {recipe} ...", file=sys.stderr, flush=True)
    try:
        done = subprocess.run(
            [*command, *arguments],
            cwd=directory / "cwd",
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        stderr, code = done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        stderr, code = (exc.stderr or b"").decode(errors="replace"), None
    report = json.loads(staged.read_text()) if staged.exists() else {"ok": False}
    if code is None:
        report.update(ok=False, error=f"timed out after {timeout} s")
    elif code != 0 and report.get("error") is None:
        report.update(ok=False, error=f"the recipe's process died (exit {code})")
    report["stderr_tail"] = stderr[-4000:]
    # what the recipe left in its $TMPDIR (a reader's /tmp), but torch's own caches
    report["left_in_tmp"] = sorted(
        p.name for p in (directory / "tmp").iterdir() if not p.name.startswith(TOOL_CACHES)
    )
    staged.unlink(missing_ok=True)
    (directory / "run.json").write_text(json.dumps(report))


def run_commands(recipe: str, script: str, base: Path = ROOT, timeout: float = TIMEOUT) -> str:
    """Run `script` (a page's ```bash``` block: lines as a reader types them) with bash in a
    copy of the directory `recipe` left (files hard-linked: cheap, and blocks never see each
    other's files), `python` being this interpreter; its stdout and stderr as a reader sees
    them. Kept with the recipe's run, so the page and the build share it."""
    run = run_recipe(recipe, base)
    if not run.ok:
        raise RecipeError(f"{recipe}: {run.summary()}\n{run.stderr_tail}")
    script = script.strip() + "\n"
    key = hashlib.sha256(script.encode()).hexdigest()[:12]
    result = run.directory / f"commands-{key}.json"
    with locked(run.directory / "commands.lock"):
        if not result.exists():
            scratch = run.directory / f"commands-{key}"
            shutil.rmtree(scratch, ignore_errors=True)
            shutil.copytree(run.cwd, scratch, copy_function=os.link)
            bin_dir = str(Path(sys.executable).parent)  # `python` is this interpreter
            path = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
            env = child_env(run.directory / "tmp", PATH=path)
            try:
                done = subprocess.run(
                    ["bash", "-e", "-o", "pipefail", "-c", script],
                    cwd=scratch,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    timeout=timeout,
                )
                outcome = {"code": done.returncode, "output": done.stdout}
            except subprocess.TimeoutExpired:
                outcome = {"code": None, "output": f"timed out after {timeout} s"}
            result.write_text(json.dumps(outcome))
        outcome = json.loads(result.read_text())
    if outcome["code"] != 0:
        raise RecipeError(
            f"`{script.strip()}` (in the directory {recipe} left) exited with "
            f"{outcome['code']}:\n{outcome['output'][-3000:]}"
        )
    return outcome["output"]
