"""Run what may crash the Core AI runtime in a child process, and say what happened.

A fatal error in the runtime (a Swift `fatalError`, an MPSGraph null dereference) kills the
process that called it: on Linux an `index_put` KV write dies with SIGILL. So anything that
may crash runs here, in its own process with a timeout, and comes back as an `Outcome`:

- `ok`: the callable returned (its JSON-able return value is in `result`)
- `wrong numbers`: it raised `WrongNumbers` (see `check_close`)
- `failed to export`: it raised `zoo.core.export.convert.ExportError`
- `error`: it raised anything else (the traceback tail is in `detail`)
- `crashed`: the process died of a signal (`signal` is SIGILL, SIGSEGV, SIGTRAP, SIGABRT...)
- `timed out`: it ran past `timeout` seconds and was killed

Runs on a GPU or the Neural Engine (`$ZOO_COMPUTE_UNIT` gpu / ane) are serialized across
every process of this machine by a lock file: two exports compiling for, and two decodes
running on, one GPU at once make timings meaningless and crashes ambiguous.

The callable is found again in the child by name: it must be a module-level function of an
importable module or of a `.py` file (whose top level must not do the work itself: keep that
under `if __name__ == "__main__":`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from zoo.core.io.staging import locked

OK, WRONG_NUMBERS, FAILED_TO_EXPORT, ERROR, CRASHED, TIMED_OUT = (
    "ok",
    "wrong numbers",
    "failed to export",
    "error",
    "crashed",
    "timed out",
)
TAIL_CHARS = 4000


class WrongNumbers(AssertionError):
    """The code ran, but its results differ from the reference."""


def check_close(name: str, got, want, *, atol: float = 1e-5, rtol: float = 1e-5) -> float:
    """Raise `WrongNumbers` unless `got` matches `want`; return the max absolute error."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise WrongNumbers(f"{name}: shape {got.shape}, expected {want.shape}")
    error = float(np.max(np.abs(got - want))) if got.size else 0.0
    if not np.allclose(got, want, atol=atol, rtol=rtol):
        raise WrongNumbers(f"{name}: max abs error {error:.3g} (atol {atol}, rtol {rtol})")
    return error


@dataclass
class Outcome:
    status: str
    seconds: float
    returncode: int | None = None
    signal: str | None = None
    detail: str = ""
    result: Any = None
    stdout_tail: str = ""
    stderr_tail: str = ""
    command: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == OK

    def summary(self) -> str:
        """`ok`, `crashed (SIGILL)`, `wrong numbers: ...`: one cell of an outcome table."""
        if self.status == CRASHED:
            return f"crashed ({self.signal})"
        if self.status in (WRONG_NUMBERS, FAILED_TO_EXPORT, ERROR) and self.detail:
            return f"{self.status}: {self.detail.strip().splitlines()[-1][:160]}"
        return self.status

    def to_dict(self) -> dict:
        return asdict(self)


# set in a child while it loads a .py file to find the function it runs
LOADING_ENV = "ZOO_ISOLATE_LOADING"


def run_isolated(
    function: Callable[..., Any],
    *args: Any,
    timeout: float = 300,
    env: dict[str, str] | None = None,
    **kwargs: Any,
) -> Outcome:
    """Call `function(*args, **kwargs)` in a child Python process and classify the outcome.

    Arguments and the return value travel as JSON.
    """
    loading = os.environ.get(LOADING_ENV)
    if loading:  # without this, each child would load the file and start another child
        raise RuntimeError(
            f"{loading} calls run_isolated at its top level, so the child process that loads "
            "it to find the function would start another child, and so on: put the work "
            'under `if __name__ == "__main__":` or import the function from a module'
        )
    target = _locate(function)
    with tempfile.TemporaryDirectory(prefix="zoo-isolate-") as tmp:
        call = Path(tmp) / "call.json"
        result = Path(tmp) / "result.json"
        payload = {"target": target, "args": args, "kwargs": kwargs}
        call.write_text(json.dumps(payload, default=_jsonable))
        # The child's temporary files (compiled .aimodelx, staging directories) go into a
        # directory removed with this one, also when the child crashes and cannot clean up.
        child_tmp = Path(tmp) / "tmp"
        child_tmp.mkdir()
        env = {**(env if env is not None else os.environ), "TMPDIR": str(child_tmp)}
        command = [sys.executable, "-m", "zoo.core.isolate", str(call), str(result)]
        outcome = _run(command, timeout, env)
        if outcome.status == CRASHED and result.exists():
            # The callable returned, then the process died (e.g. while shutting down).
            outcome.result = json.loads(result.read_text()).get("result")
            outcome.detail = "the callable returned; the process died afterwards"
        elif outcome.status in (OK, ERROR) and result.exists():
            reply = json.loads(result.read_text())
            outcome.status = reply["status"]
            outcome.result = reply.get("result")
            outcome.detail = reply.get("detail", "")
        elif outcome.status == ERROR:
            outcome.detail = outcome.stderr_tail[-1000:]
        return outcome


def run_script(
    script: str | os.PathLike,
    args: Sequence[str] = (),
    *,
    timeout: float = 300,
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
) -> Outcome:
    """Run `python script args...` and classify it: exit 0 is `ok`, a signal is `crashed`."""
    command = [sys.executable, str(script), *args]
    outcome = _run(command, timeout, env, cwd)
    if outcome.status == ERROR:
        outcome.detail = outcome.stderr_tail[-1000:]
    return outcome


SERIALIZED_UNITS = ("gpu", "ane")


@contextlib.contextmanager
def device_lock(compute_unit: str | None):
    """Hold this machine's lock for `compute_unit` if it is shared hardware (gpu, ane)."""
    if compute_unit not in SERIALIZED_UNITS:
        yield
        return
    path = Path(tempfile.gettempdir()) / f"zoo-{compute_unit}.lock"
    with locked(path):  # blocks until the other run is done
        yield


def _run(command, timeout, env, cwd=None) -> Outcome:
    child_env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
    with device_lock(child_env.get("ZOO_COMPUTE_UNIT")):
        return _run_child(command, timeout, child_env, cwd)


def _run_child(command, timeout, child_env, cwd) -> Outcome:
    started = time.perf_counter()
    # A session of its own, so a timeout kills the child's children too.
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=child_env,
        cwd=cwd,
        start_new_session=True,
        text=True,
        errors="replace",
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        status = OK if process.returncode == 0 else ERROR
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        status = TIMED_OUT
    seconds = time.perf_counter() - started
    signal_name = None
    if status != TIMED_OUT and process.returncode < 0:
        status = CRASHED
        signal_name = _signal_name(-process.returncode)
    outcome = Outcome(
        status=status,
        seconds=round(seconds, 3),
        returncode=process.returncode,
        signal=signal_name,
        stdout_tail=stdout[-TAIL_CHARS:],
        stderr_tail=stderr[-TAIL_CHARS:],
        command=[str(c) for c in command],
    )
    if status == TIMED_OUT:
        outcome.detail = f"killed after {timeout} s"
    return outcome


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _locate(function: Callable[..., Any]) -> dict:
    qualname = getattr(function, "__qualname__", "")
    if "<locals>" in qualname or "<lambda>" in qualname or not qualname:
        raise ValueError(
            f"run_isolated needs a module-level function, got {function!r}: the child "
            "process finds it again by module and name"
        )
    module = function.__module__
    if module and not module.startswith("__") and _importable(module):
        return {"module": module, "qualname": qualname}
    filename = function.__code__.co_filename
    if not Path(filename).is_file():
        raise ValueError(
            f"run_isolated cannot find {qualname!r} again in a child process: it was "
            f"defined in {filename!r}, not in an importable module or a .py file"
        )
    return {"file": str(Path(filename).resolve()), "qualname": qualname}


def _importable(module: str) -> bool:
    """Can a fresh process import `module` by name? (Not so for a file loaded by path.)"""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _resolve(target: dict) -> Callable[..., Any]:
    if "module" in target:
        namespace = vars(importlib.import_module(target["module"]))
    else:
        sys.path.insert(0, str(Path(target["file"]).parent))
        os.environ[LOADING_ENV] = target["file"]
        try:
            namespace = runpy.run_path(target["file"], run_name="__isolated__")
        finally:
            del os.environ[LOADING_ENV]
    obj: Any = None
    for i, part in enumerate(target["qualname"].split(".")):
        obj = namespace[part] if i == 0 else getattr(obj, part)
    return obj


def _classified_call(function: Callable[..., Any], args, kwargs) -> dict[str, Any]:
    """`function(*args, **kwargs)` as a reply: its result, or the outcome its exception is."""
    from zoo.core.export.convert import ExportError

    try:
        return {"status": OK, "result": function(*args, **kwargs)}
    except WrongNumbers as exc:
        return {"status": WRONG_NUMBERS, "detail": str(exc)}
    except ExportError:
        return {"status": FAILED_TO_EXPORT, "detail": traceback.format_exc()[-TAIL_CHARS:]}
    except SystemExit as exc:  # not a return value: say so, with the code it exited with
        return {"status": ERROR, "detail": f"the callable called sys.exit({exc.code!r})"}
    except Exception:
        return {"status": ERROR, "detail": traceback.format_exc()[-TAIL_CHARS:]}


def run_in_process(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Outcome:
    """`function(*args, **kwargs)` here, its outcome classified as `run_isolated` classifies
    a child's: for work that cannot crash the process (no runtime call of its own) and
    that `cached_call` keeps, when a child process would only add its start-up."""
    started = time.perf_counter()
    reply = _classified_call(function, args, kwargs)
    return Outcome(seconds=time.perf_counter() - started, **reply)


def _child(call_path: str, result_path: str) -> int:
    call = json.loads(Path(call_path).read_text())
    reply = _classified_call(_resolve(call["target"]), call["args"], call["kwargs"])
    try:
        text = json.dumps(reply, default=_jsonable)
    except TypeError as exc:
        text = json.dumps({"status": ERROR, "detail": str(exc)})
    Path(result_path).write_text(text)
    return 0


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"run_isolated: the return value must be JSON-able, got {type(value)}")


if __name__ == "__main__":
    # Through the package, not this __main__ module, so `WrongNumbers` is the class that
    # callables raise.
    from zoo.core.isolate import _child as child

    sys.exit(child(*sys.argv[1:]))


def cached_call(run: Callable[[], Outcome], key_parts: Sequence[Any]) -> Outcome:
    """`run()`, or the Outcome an identical earlier call stored in this test session.

    Only active when `$ZOO_RESULT_CACHE` names a directory (the zoo's pytest plugin sets
    it per session). `key_parts` must capture everything the outcome depends on: pass the
    source files of the code under test and the arguments.
    """
    directory = os.environ.get("ZOO_RESULT_CACHE")
    if not directory:
        return run()
    digest = hashlib.sha256()
    # the compute unit every load defaults to is part of what an outcome depends on
    for part in [*key_parts, os.environ.get("ZOO_COMPUTE_UNIT", "auto")]:
        data = Path(part).read_bytes() if isinstance(part, Path) else repr(part).encode()
        digest.update(data + b"\0")
    path = Path(directory) / f"{digest.hexdigest()}.json"
    # one caller computes, a concurrent one (another xdist worker, a recipe) waits for it
    with locked(path.with_suffix(".lock")):
        if path.exists():
            return Outcome(**json.loads(path.read_text()))
        outcome = run()
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(outcome.to_dict()))
        os.replace(tmp, path)
        return outcome
