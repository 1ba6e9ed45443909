"""Progress on long steps: a line every few seconds while a step that prints nothing of
its own runs (the converter is silent for about a minute on a 135M model)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

EVERY = 15.0  # seconds between two lines


@contextlib.contextmanager
def still_working(
    progress: Callable[[str], None] | None, what: str, every: float = EVERY
) -> Iterator[None]:
    """While the block runs, tell `progress` "  still WHAT (N s)" every `every` seconds;
    nothing when `progress` is None. The line comes from a daemon thread that only waits
    and prints: it never holds the interpreter past the block."""
    if progress is None:
        yield
        return
    done = threading.Event()
    started = time.perf_counter()

    def tell() -> None:
        while not done.wait(every):
            progress(f"  still {what} ({time.perf_counter() - started:.0f} s)")

    thread = threading.Thread(target=tell, name="zoo-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
