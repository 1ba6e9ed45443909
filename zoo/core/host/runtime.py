"""Load a `.aimodel` asset on this platform and call its functions synchronously.

The Core AI runtime API is async (`await fn(inputs=..., state=...)`). Callers here are
decode loops, tests and notebooks, so `Model` owns an event loop on a background thread and
every call blocks until the runtime answers; that also works inside Jupyter's running loop.

Platforms:
- Linux: coreai-core's in-package CPU runtime. `AIModel.load(path)` wants a compiled
  artifact, so the asset is compiled through `AIModelAsset.executable()`.
- macOS 27+: the OS Core AI framework, `AIModel.load(path, SpecializationOptions)` with the
  compute unit the caller chose (cpu / gpu / ane / auto). Not yet run on a Mac by this
  project: the code path exists and is selected by `compute_unit`.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import gc
import os
import sys
import threading
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np
from coreai.authoring.asset import AIModelAsset
from coreai.runtime import NDArray

from zoo.core.asset.opened import OpenedAsset, open_asset
from zoo.core.host.compute_unit import (  # noqa: F401 - where callers have imported them from
    COMPUTE_UNIT_ENV,
    COMPUTE_UNITS,
    ComputeUnitError,
    default_compute_unit,
    os_framework_available,
    specialization,
)

_NUMPY_DTYPES = {
    "float32": np.float32,
    "float16": np.float16,
    "int32": np.int32,
    "int8": np.int8,
    "uint8": np.uint8,
    "int16": np.int16,
    "bool": np.bool_,
}


class RuntimeInputError(ValueError):
    """Inputs or states do not match what the function declares."""


class _LoopThread:
    """An event loop on a daemon thread: run coroutines from sync code, even in Jupyter."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine):
        if not self.thread.is_alive():  # at interpreter exit: waiting would hang forever
            coroutine.close()
            raise RuntimeError("the runtime's event loop has stopped (interpreter exiting?)")
        return self.start(coroutine).result()

    def start(self, coroutine) -> concurrent.futures.Future:
        """The call in flight: the runtime runs calls started together at the same time."""
        if not self.thread.is_alive():
            coroutine.close()
            raise RuntimeError("the runtime's event loop has stopped (interpreter exiting?)")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def stop(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join()
        if not self.loop.is_running():
            self.loop.close()


# Models still open at exit are closed by atexit, while their loop threads still run: left
# to `__del__` during finalization, closing would wait on a stopped thread and hang.
_OPEN_MODELS: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_open_models() -> None:
    for model in list(_OPEN_MODELS):
        model.close()


class Model:
    """A loaded asset. Use as a context manager, or call `close()` when done.

    >>> with Model.load("tiny.aimodel") as model:       # doctest: +SKIP
    ...     step = model.function("main")
    ...     states = step.new_states()
    ...     outputs = step({"x": x}, states)
    """

    def __init__(
        self, asset: OpenedAsset, compute_unit: str, loop: _LoopThread, loaded: list
    ) -> None:
        self.asset = asset
        self.path = asset.path
        self.compute_unit = compute_unit
        self._loop = loop
        # (compiled artifact on Linux, loaded model): one, or one per part of an asset
        # exported range by range (zoo.core.export.stream); the artifact keeps the model alive
        self._loaded = loaded
        self._functions: dict[str, Function] = {}
        _OPEN_MODELS.add(self)
        self.capacity = asset.capacity  # zoo decoders: the KV cache's length

    @classmethod
    def load(cls, path: str | os.PathLike | OpenedAsset, compute_unit: str | None = None) -> Model:
        """Load an asset (each part of one exported range by range) on `compute_unit`;
        a path is opened and checked first (`open_asset`: a damaged file would kill the
        process inside the runtime), an `OpenedAsset` was."""
        asset = open_asset(path)
        compute_unit = compute_unit or default_compute_unit()
        options = specialization(compute_unit)
        loop = _LoopThread()
        loaded: list = []
        try:
            for part in [p.path for p in asset.parts] or [asset.path]:
                if options is None:
                    context = AIModelAsset.load(part).executable()
                    loaded.append((context, loop.run(context.__aenter__())))
                else:
                    from coreai.runtime import AIModel

                    loaded.append((None, loop.run(AIModel.load(part, options))))
        except BaseException:
            if loaded:  # released in order, the loop stopped
                cls(asset, compute_unit, loop, loaded).close()
            else:
                loop.stop()
            raise
        return cls(asset, compute_unit, loop, loaded)

    @property
    def function_names(self) -> list[str]:
        return [name for _, model in self._loaded for name in model.function_names]

    def function(self, name: str = "main", profiler=None) -> Function:
        """The function `name`; with a `coreai.runtime.Profiler`, a fresh profiled one."""
        if not self._loaded:
            raise RuntimeError(f"{self.path} was closed; load it again")
        owner = next((m for _, m in self._loaded if name in m.function_names), None)
        if owner is None:
            raise KeyError(
                f"{self.path.name} has no function {name!r}; it has {self.function_names}"
            )
        if profiler is not None:
            profiled = Function(self, name, owner.load_function(name, profiler=profiler))
            self._functions[f"{name} (profiled {id(profiler)})"] = profiled  # closed with the rest
            return profiled
        if name not in self._functions:
            self._functions[name] = Function(self, name, owner.load_function(name))
        return self._functions[name]

    def close(self) -> None:
        """Release the runtime objects in order: functions, model, then compiled artifact.

        Left to the interpreter's exit, the runtime's objects can be destroyed after the
        compiled artifact they point into, and the process aborts (SIGABRT, "C++ exception
        handling detected but the Swift runtime was compiled with exceptions disabled").
        """
        if not self._loaded:
            return
        _OPEN_MODELS.discard(self)
        loaded, self._loaded = self._loaded, []
        if not self._loop.thread.is_alive() or sys.is_finalizing():
            return  # too late to release in order; never hang
        for function in self._functions.values():
            function._function = None
        self._functions.clear()
        contexts = [context for context, _ in loaded]
        del loaded
        gc.collect()
        for context in contexts:
            if context is not None:
                self._loop.run(context.__aexit__(None, None, None))
        del contexts
        gc.collect()
        self._loop.stop()

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class Function:
    """One function of a loaded model. Call it with arrays; states persist in `NDArray`s.

    The runtime writes each state back into the `NDArray` passed for it, so the same
    `states` dict carries the cache from one call to the next.
    """

    def __init__(self, model: Model, name: str, function) -> None:
        self.model = model  # keeps the model alive while the function is in use
        self.name = name
        self._function = function
        desc = function.desc
        self.input_names = list(desc.input_names)
        self.output_names = list(desc.output_names)
        self.state_names = list(desc.state_names)
        self.inputs = {n: _spec(desc.input_descriptor(n)) for n in self.input_names}
        self.states = {n: _spec(desc.state_descriptor(n)) for n in self.state_names}

    def new_states(self, **initial: Any) -> dict[str, NDArray]:
        """Zero-filled state arrays (or the given initial values) for every state."""
        unknown = set(initial) - set(self.state_names)
        if unknown:
            raise RuntimeInputError(f"{self.name}: no states named {sorted(unknown)}")
        states = {}
        for name, (shape, dtype) in self.states.items():
            if None in shape and name not in initial:
                raise RuntimeInputError(
                    f"{self.name}: state {name!r} has a dynamic shape {shape}; pass its "
                    "initial value"
                )
            value = initial.get(name)
            array = np.zeros(shape, dtype) if value is None else _as_numpy(value)
            _check_array(self.name, "state", name, array, shape, dtype)
            states[name] = NDArray(np.ascontiguousarray(array))
        return states

    def __call__(
        self,
        inputs: Mapping[str, Any] | None = None,
        states: Mapping[str, NDArray] | None = None,
    ) -> dict[str, np.ndarray]:
        return self.start(inputs, states).result()

    def start(
        self,
        inputs: Mapping[str, Any] | None = None,
        states: Mapping[str, NDArray] | None = None,
    ) -> _Call:
        """Start a call and return at once; `.result()` waits for its outputs. Calls in
        flight together run at the same time (each on a thread of the runtime's own)."""
        inputs = dict(inputs or {})
        states = dict(states or {})
        _check_names(self.name, "input", inputs, self.input_names)
        _check_names(self.name, "state", states, self.state_names, hint="fn.new_states()")
        arrays = {}
        for name, value in inputs.items():
            array = _as_numpy(value)
            _check_array(self.name, "input", name, array, *self.inputs[name])
            arrays[name] = NDArray(np.ascontiguousarray(array))
        for name, value in states.items():
            if not isinstance(value, NDArray):
                raise RuntimeInputError(
                    f"{self.name}: state {name!r} must be a coreai NDArray so the runtime "
                    "can write it back; create states with fn.new_states()"
                )
            _check_array(self.name, "state", name, value, *self.states[name])
        if self._function is None:
            raise RuntimeError(f"{self.model.path} was closed; load it again")
        capacity = self.model.capacity
        if capacity is not None and "in_step" in arrays:
            # A write index past the cache runs and writes nothing: refuse it instead.
            step = np.asarray(inputs["in_step"])
            rows = inputs.get("positions", inputs.get("input_ids"))  # a range: no ids
            length = np.asarray(rows).shape[-1] if rows is not None else 1
            if step.size and not (0 <= int(step.min()) and int(step.max()) + length <= capacity):
                raise RuntimeInputError(
                    f"{self.name}: in_step {step.tolist()} with {length} token(s) is outside "
                    f"the cache of {capacity} positions"
                )
        return _Call(self.model._loop.start(self._function(inputs=arrays, state=states)))

    def __repr__(self) -> str:
        return (
            f"Function({self.name!r}, inputs={self.inputs}, states={self.states}, "
            f"outputs={self.output_names})"
        )


class _Call:
    """A runtime call in flight (`Function.start`)."""

    def __init__(self, future: concurrent.futures.Future) -> None:
        self.future = future

    def result(self) -> dict[str, np.ndarray]:
        outputs = self.future.result()
        return {name: np.array(value.numpy()) for name, value in outputs.items()}


def states_to_numpy(states: Mapping[str, NDArray]) -> dict[str, np.ndarray]:
    """Copies of the current state values."""
    return {name: np.array(value.numpy()) for name, value in states.items()}


def _spec(descriptor) -> tuple[tuple[int | None, ...], Any]:
    dtype = _NUMPY_DTYPES.get(descriptor.dtype, descriptor.dtype)
    # A dynamic dimension comes back as None or -1: both mean "any size".
    shape = tuple(None if d is None or d < 0 else d for d in descriptor.shape)
    return shape, dtype


def _as_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # torch.Tensor, without importing torch here
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def _check_names(function: str, kind: str, given, expected, hint: str = "") -> None:
    missing = [n for n in expected if n not in given]
    unknown = [n for n in given if n not in expected]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing {kind}s {missing}")
        if unknown:
            parts.append(f"unknown {kind}s {unknown}")
        note = f"; every {kind} must be passed on every call" if missing else ""
        if hint and missing:
            note += f" (create them with {hint})"
        raise RuntimeInputError(
            f"{function}: {' and '.join(parts)}; it takes {list(expected)}{note}"
        )


def _check_array(function: str, kind: str, name: str, array, shape, dtype) -> None:
    actual_dtype = np.dtype(array.dtype) if isinstance(array, np.ndarray) else array.dtype
    if isinstance(actual_dtype, str):
        actual_dtype = np.dtype(_NUMPY_DTYPES.get(actual_dtype, actual_dtype))
    if actual_dtype == np.int64 and dtype == np.int32:
        raise RuntimeInputError(
            f"{function}: {kind} {name!r} is int64, but the Core AI runtime takes int32 "
            "(int64 example inputs are exported as int32); pass it as np.int32"
        )
    if actual_dtype != np.dtype(dtype):
        raise RuntimeInputError(
            f"{function}: {kind} {name!r} has dtype {actual_dtype}, expected {np.dtype(dtype)}"
        )
    actual_shape = tuple(array.shape)
    if len(actual_shape) != len(shape) or any(
        want is not None and want != got for want, got in zip(shape, actual_shape, strict=False)
    ):
        raise RuntimeInputError(
            f"{function}: {kind} {name!r} has shape {actual_shape}, expected {shape} "
            "(None: any size)"
        )
