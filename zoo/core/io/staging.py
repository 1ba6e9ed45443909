"""Writing an asset so that nothing is half-written and nothing is lost: into a staging
directory beside the destination, renamed into place; interrupted or failed, the staging
directory is removed (by a watcher process if native code ends the process), and an existing
asset is replaced only when asked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

STAGING_SUFFIX = ".partial"


def _remove_stale_staging(path: Path) -> None:
    """Staging directories of an earlier export of `path` whose process is gone."""
    for stale in path.parent.glob(f".{path.name}.*{STAGING_SUFFIX}"):
        try:
            pid = int(stale.name[len(path.name) + 2 :].split(".")[0])
            os.kill(pid, 0)  # still running: not stale
        except ProcessLookupError:
            _put_back(stale, path)
            shutil.rmtree(stale, ignore_errors=True)
        except (ValueError, PermissionError):
            continue


@contextlib.contextmanager
def _interrupts_raise():
    """SIGTERM (and SIGHUP) raise in the main thread, so `finally` blocks clean up (SIGTERM as
    `Terminated`: the command line says "terminated", exit 143)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(number, _frame):
        from zoo.core.io.sigint import Terminated  # here: the watcher runs this file alone

        said = f"export interrupted by {signal.Signals(number).name}"
        raise Terminated(said) if number == signal.SIGTERM else KeyboardInterrupt(said)

    previous = {n: signal.signal(n, stop) for n in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


# A failed native write does not raise: LLVM's "IO failure on output stream" (a full disk,
# a file size limit) ends the process with exit(1), past every `finally`, and a runtime
# crash kills it. So a small watcher process holds the other end of a pipe while a staging
# directory is built: if the pipe closes without "done", it removes the directory.
def _watch(staging: str, path: str, *created: str) -> None:
    """The watcher's whole work (this file run as a script: stdlib only, no zoo import)."""
    if sys.stdin.read() == "done":
        return
    put_back = _put_back(staging, path)
    shutil.rmtree(staging, ignore_errors=True)
    for directory in created:  # the folders made for it, if nothing else went in them
        with contextlib.suppress(OSError):
            os.rmdir(directory)
    print(
        f"error: the process writing {path} ended before it finished (killed, out of "
        "memory, or a write that failed: the lines above say which, if any); the partial "
        "asset and the folders made for it were removed" + put_back,
        file=sys.stderr,
    )


def _put_back(staging: str | os.PathLike, path: str | os.PathLike) -> str:
    """An overwrite moves the old asset to `staging/previous` and the new one into place: a
    process killed between the two renames left `path` missing, so the old asset goes back
    (never removed with the staging directory). What happened, for the watcher's line."""
    previous, path = Path(staging) / "previous", Path(path)
    if not previous.is_dir():
        return ", nothing else changed"
    if path.exists():  # both renames were done: the new asset is complete and in place
        return f"; the new asset had already replaced {path.name}"
    os.rename(previous, path)
    return f"; the earlier {path.name} was put back as it was"


@contextlib.contextmanager
def _removed_if_the_process_dies(
    staging: Path, path: Path, created: list[Path] = ()
) -> Iterator[None]:

    watcher = subprocess.Popen(
        [sys.executable, "-I", __file__, str(staging), str(path), *map(str, created)],
        stdin=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a Ctrl-C to the process group is ours to handle
    )
    try:
        yield
    finally:
        watcher.stdin.write("done")
        watcher.stdin.close()
        watcher.wait()


@contextlib.contextmanager
def replacing_directory(path: Path, overwrite: bool) -> Iterator[Path]:
    """Yield a path (not yet created) beside `path` to build a directory in; when the block
    ends it takes `path`'s place in one rename (an existing `path` only with `overwrite`).
    On an error or an interrupt nothing at `path` changes, and what the block built goes,
    with any parent directories made for it."""
    _remove_stale_staging(path)
    created = [p for p in [path.parent, *path.parent.parents] if not p.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(
        tempfile.mkdtemp(
            prefix=f".{path.name}.{os.getpid()}.", suffix=STAGING_SUFFIX, dir=path.parent
        )
    )
    done = False
    try:
        with _interrupts_raise(), _removed_if_the_process_dies(staging, path, created):
            fresh = staging / path.name
            yield fresh
            if path.exists():
                if not overwrite:  # appeared while we were exporting
                    raise FileExistsError(f"{path} appeared during the export; nothing replaced")
                previous = staging / "previous"
                os.rename(path, previous)
                try:
                    os.rename(fresh, path)
                except BaseException:
                    os.rename(previous, path)
                    raise
            else:
                os.rename(fresh, path)
            done = True
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if not done:  # directories this export created, now empty, go too
            for directory in created:
                with contextlib.suppress(OSError):
                    directory.rmdir()


@contextlib.contextmanager
def locked(path: str | os.PathLike) -> Iterator[None]:
    """Hold the lock file `path` (made with its folder if missing): one process at a time
    does what the block does; the others wait here."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


if __name__ == "__main__":  # the watcher process of `_removed_if_the_process_dies`
    _watch(*sys.argv[1:])
