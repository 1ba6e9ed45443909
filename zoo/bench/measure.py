"""What the bench measures with: memory read bandwidth, cores busy, median timings."""

from __future__ import annotations

import statistics
import time

import torch


def measure_read_bandwidth(megabytes: int = 1024, repeats: int = 7, threads: int = 0) -> float:
    """GB/s of reading a buffer much larger than the caches (a sum over it), with `threads`
    torch threads (0: all of torch's)."""
    buffer = torch.ones(megabytes * 2**20 // 4)
    buffer.sum()  # fault the pages in
    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        seconds = []
        for _ in range(repeats):
            started = time.perf_counter()
            buffer.sum()
            seconds.append(time.perf_counter() - started)
    finally:
        torch.set_num_threads(before)
    return buffer.nbytes / statistics.median(seconds) / 1e9


def cores_busy(call, repeats: int = 5) -> float:
    """CPU seconds per wall second while `call` runs: how many cores it keeps busy."""
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(repeats):
        call()
    return (time.process_time() - cpu) / (time.perf_counter() - started)


def median_seconds(call, repeats: int) -> float:
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)
