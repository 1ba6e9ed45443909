"""Callables that tests run in child processes (they must be importable by name)."""

import os
import signal
import time

import numpy as np

from zoo.core.isolate import check_close


def add(a: int, b: int) -> dict:
    return {"sum": a + b, "array": np.arange(3)}


def off_by_a_bit() -> None:
    check_close("logits", [1.0, 2.0], [1.0, 2.1], atol=1e-3)


def raises() -> None:
    raise ValueError("bad input: give me a .aimodel")


def export_fails() -> None:
    from zoo.core.export.convert import ExportError

    raise ExportError("entry point 'main' failed to export: unsupported op")


def die(signal_name: str) -> None:
    print("about to die", flush=True)
    os.kill(os.getpid(), getattr(signal, signal_name))


def sleep(seconds: float) -> None:
    time.sleep(seconds)


def interval(seconds: float) -> dict:
    """When this call ran: [start, end] in wall-clock seconds."""
    start = time.time()
    time.sleep(seconds)
    return {"start": start, "end": time.time()}


def leave_temp_files_and_die() -> None:
    """What a crashing export looks like to the file system: temp files, then a signal."""
    import tempfile

    tempfile.mkdtemp(suffix=".aimodelx")
    tempfile.mkstemp(suffix=".partial")
    os.kill(os.getpid(), signal.SIGKILL)
