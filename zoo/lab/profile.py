"""Where a function's time goes on the Core AI runtime: per-op totals from its profiler.

The runtime reports an interval for every operation it executes (and for its own work:
`NDArray.copy` of inputs and states, `NDArray.alloc_view`, ...). `profile_call` runs a
function once to warm up, then once with a profiler attached, and sums the intervals by
operation name. The profiler adds overhead of its own, so the shares matter, not the sum.
"""

from __future__ import annotations

import collections
import itertools
import time
from collections.abc import Mapping

import numpy as np

from zoo.core.host.runtime import Model


def profile_call(
    model: Model, function_name: str, inputs: Mapping[str, np.ndarray], states: dict
) -> list[dict]:
    """Rows `{op, calls, ms, share}` for one profiled call, the most expensive first."""
    from coreai.runtime import Profiler

    opened: dict[int, tuple[str, int]] = {}
    totals: collections.Counter = collections.Counter()
    calls: collections.Counter = collections.Counter()
    keys = itertools.count(1)

    def begin(event) -> int:
        key = next(keys)
        opened[key] = (str(event.event_id), time.perf_counter_ns())
        return key

    def end(event, key: int) -> None:
        name, started = opened.pop(key, (None, 0))
        if name is not None:
            totals[name] += time.perf_counter_ns() - started
            calls[name] += 1

    profiler = Profiler(
        on_log_event_begin=begin, on_log_event_end=end, on_log_event=lambda event: None
    )
    function = model.function(function_name, profiler=profiler)
    function(inputs, states)  # warm up (its intervals are dropped below)
    totals.clear()
    calls.clear()
    function(inputs, states)
    whole = totals.pop("Function Execute", 0) or sum(totals.values())
    calls.pop("Function Execute", None)
    return [
        {
            "op": name.removeprefix("call.").replace("coreai.decomposable.", "coreai."),
            "calls": calls[name],
            "ms": round(ns / 1e6, 2),
            "share": f"{ns / whole:.0%}",
        }
        for name, ns in totals.most_common()
    ]


def time_and_profile(path, x: np.ndarray, calls: int = 25) -> tuple[np.ndarray, list[float], dict]:
    """An exported single-input function (`main`: `x` in, `y` out) loaded from `path`: its
    output, the seconds of `calls` calls in a row (the first one first after the load), and
    the profiler's most expensive op."""
    with Model.load(path) as model:
        function, inputs = model.function("main"), {"x": x}
        seconds = []
        for _ in range(calls):
            started = time.perf_counter()
            output = function(inputs, {})["y"]
            seconds.append(time.perf_counter() - started)
        ops = profile_call(model, "main", inputs, {})
    return output, seconds, ops[0] if ops else {"op": "-", "share": "-"}
