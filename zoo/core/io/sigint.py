"""Ctrl-C (SIGINT) taken by the main thread only; SIGTERM taken as Ctrl-C is.

The Core AI runtime installs a SIGINT handler of its own while it loads an asset (strace: a
runtime thread's `rt_sigaction(SIGINT, ...)`), and a Ctrl-C that handler took on another
thread aborted `zoo generate` ("Program aborted due to an unhandled Error", SIGABRT: about
one Ctrl-C in a hundred during loading, on this machine under load).
`zoo.core.cli.commands.Interruption` blocks SIGINT in the main thread while the runtime works,
so every thread the runtime starts inherits the block and the signal waits, pending, for
the main thread. A thread started before that still takes it: numpy starts OpenBLAS's
thread pool when it is first imported. So the zoo imports numpy with SIGINT blocked: those
threads never take a Ctrl-C (Python acts on signals in the main thread only anyway).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator


def import_numpy_without_sigint() -> None:
    """Import numpy (once, from the main thread) with SIGINT blocked, so the threads it
    starts inherit the block; the main thread's mask is restored after."""
    if "numpy" in sys.modules or not hasattr(signal, "pthread_sigmask"):
        return  # imported already (its threads are as they are), or no POSIX signals
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        import numpy  # noqa: F401
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class Terminated(KeyboardInterrupt):
    """SIGTERM, taken as Ctrl-C is: what was being written is cleaned up, then exit 143."""


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM raises `Terminated` in the main thread (Python's own
    default dies at once, leaving a half-written export's staging behind)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminated(signum, frame) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
