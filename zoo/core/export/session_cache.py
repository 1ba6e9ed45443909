"""Exports shared within one test session: an export identical to an earlier one is copied.

The suite exports the same tiny model with the same options from several places (a
family's tests, the recipe its page shows, the page's commands), each in its own process,
and a tiny export costs seconds where a copy costs milliseconds. When `$ZOO_EXPORT_CACHE`
names a directory (the zoo's pytest plugin makes one per session; a user's export never
has it), `export_entry_points` keys each export by what decides the asset and stores the
asset there, or copies the stored one.

The key (`export_key`) is everything torch.export and the converter read, walked as data:
every module of every function (its class, the source file the class lives in, every
attribute, parameter and buffer, bytes included), the objects it holds (KV strategies,
specs, functions with their code and closures), the example inputs, the names, the
program pass, the metadata and the files written beside the program. A value the walk
cannot read as data makes the export uncacheable, never a guess: it is exported as usual.
What the walk cannot see is a module-level function of another file replaced at run time
(a monkeypatch); the suite's tests do not export under one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import hashlib
import json
import os
import shutil
import sys
import time
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from zoo.core.io.staging import locked

CACHE_ENV = "ZOO_EXPORT_CACHE"
# one line per cached export (key, hit or stored, seconds): how much the cache saved
LOG_NAME = "exports.jsonl"


# packages whose plain objects are read as data (their attributes); others: Uncacheable
KNOWN = ("zoo", "torch", "coreai_opt", "__main__")


class Uncacheable(TypeError):
    """A value the key cannot be made of (it would be a guess): export as usual."""


@functools.cache
def _file_digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@functools.cache
def _class_identity(cls: type) -> str:
    """A class as its name and the file it is written in, down its bases; a class no file
    holds (a page's or a notebook's, one a script defines) by the code of its methods.
    Only those: libraries patch classes of files as they run (transformers adds
    `nn.Module.smart_apply` when it builds a model), so the same class read in two
    processes would differ by what each had run."""
    digest = hashlib.sha256()
    for klass in cls.__mro__:
        source = getattr(sys.modules.get(klass.__module__), "__file__", None)
        digest.update(f"{klass.__module__}.{klass.__qualname__}".encode())
        digest.update(_file_digest(source).encode() if source else b"")
        if source and klass.__module__ != "__main__":
            continue
        for name, member in vars(klass).items():
            if isinstance(member, staticmethod | classmethod):
                member = member.__func__
            functions = [member.fget, member.fset] if isinstance(member, property) else [member]
            for function in functions:
                if isinstance(function, types.FunctionType):
                    _code(function.__code__, lambda text: digest.update(text.encode()))
            if isinstance(member, bool | int | float | str | type(None)):
                digest.update(f"{name}={member!r}".encode())
    return f"{cls.__module__}.{cls.__qualname__}@{digest.hexdigest()}"


def _code(code: types.CodeType, out: Callable[[str], None]) -> None:
    out(f"code {code.co_filename}:{code.co_name} {code.co_code.hex()} {code.co_names}")
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code(const, out)
        elif isinstance(const, frozenset):  # `x in {...}`: its order follows the hash seed
            out(f"frozenset {sorted(map(repr, const))}")
        else:
            out(repr(const))


class _Walk:
    """Feeds a digest with a value read as data; a value met again is named by its index."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256()
        self.seen: dict[int, int] = {}
        self.kept: list[Any] = []  # keeps walked objects alive, so ids stay unique

    def out(self, text: str) -> None:
        self.digest.update(text.encode() + b"\0")

    def value(self, value: Any) -> None:  # noqa: C901 (one case per kind of value)
        if value is None or isinstance(value, bool | int | float | complex | str | bytes):
            self.out(f"{type(value).__name__} {value!r}")
            return
        if isinstance(value, torch.dtype | torch.device | torch.memory_format | enum.Enum):
            self.out(repr(value))
            return
        if id(value) in self.seen:
            self.out(f"seen {self.seen[id(value)]}")
            return
        self.seen[id(value)] = len(self.seen)
        self.kept.append(value)
        if isinstance(value, torch.Tensor):
            self.tensor(value)
        elif isinstance(value, np.ndarray):
            self.out(f"ndarray {value.dtype} {value.shape}")
            self.digest.update(np.ascontiguousarray(value).tobytes())
        elif isinstance(value, list | tuple):
            self.out(f"{type(value).__name__} {len(value)}")
            for item in value:
                self.value(item)
        elif isinstance(value, dict):
            self.out(f"dict {len(value)}")
            for key, item in value.items():
                self.value(key)
                self.value(item)
        elif isinstance(value, set | frozenset):
            self.out(f"set {sorted(map(repr, value))}")
        elif isinstance(value, Path):
            self.out(f"path {value}")
        elif isinstance(value, functools.partial):
            self.partial(value)
        elif isinstance(value, types.FunctionType):
            self.function(value)
        elif isinstance(value, types.MethodType):
            self.value(value.__func__)
            self.value(value.__self__)
        elif isinstance(value, types.BuiltinFunctionType | types.ModuleType):
            self.out(f"{type(value).__name__} {getattr(value, '__module__', '')}.{value.__name__}")
        elif isinstance(value, type) and value.__module__ == "torch.export.dynamic_shapes":
            self.out(f"dim {value!r}")  # torch.export's Dim: its name, min and max
        elif isinstance(value, type):
            self.out(f"class {_class_identity(value)}")
        elif (
            isinstance(value, torch.nn.Module)
            or dataclasses.is_dataclass(value)
            or (hasattr(value, "__dict__") and type(value).__module__.split(".")[0] in KNOWN)
        ):
            self.out(f"object {_class_identity(type(value))}")
            self.value(dict(vars(value)))
        else:  # e.g. a converter's or a runtime's object: its repr would hold an address
            raise Uncacheable(f"no key for a {type(value).__module__}.{type(value).__qualname__}")

    def tensor(self, tensor: torch.Tensor) -> None:
        if type(tensor) not in (torch.Tensor, torch.nn.Parameter):
            raise Uncacheable(f"no key for a tensor subclass {type(tensor).__qualname__}")
        self.out(f"tensor {tensor.dtype} {tuple(tensor.shape)} {tensor.device}")
        if tensor.device.type != "meta":
            data = tensor.detach().contiguous().reshape(-1)
            self.digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")

    def function(self, function: types.FunctionType) -> None:
        self.out(f"function {function.__module__}.{function.__qualname__}")
        _code(function.__code__, self.out)
        self.value(function.__defaults__)
        self.value(function.__kwdefaults__)
        for cell in function.__closure__ or ():
            self.value(cell.cell_contents)

    def partial(self, partial: functools.partial) -> None:
        if partial.func is shutil.copyfile:  # a file copied into the asset: its bytes
            self.out(f"copy of {_file_digest(str(partial.args[0]))} {partial.args[1:]}")
            return
        self.value(partial.func)
        self.value(partial.args)
        self.value(partial.keywords)


def export_key(
    entry_points: Sequence[Any],
    extra_metadata: Mapping[str, Any] | None,
    extra_files: Mapping[str, Callable] | None,
) -> str | None:
    """The digest of everything the asset of these entry points depends on, or None when
    the cache is off or a value cannot be keyed (`Uncacheable`)."""
    if not os.environ.get(CACHE_ENV):
        return None
    from zoo.core.io.provenance import PACKAGES, package_version

    walk = _Walk()
    try:
        walk.value([package_version(name) for name in PACKAGES])
        for entry in entry_points:
            walk.value({f.name: getattr(entry, f.name) for f in dataclasses.fields(entry)})
        walk.value(dict(extra_metadata or {}))
        walk.value(dict(extra_files or {}))
    except Uncacheable as why:
        _log({"uncacheable": str(why)})
        return None
    return walk.digest.hexdigest()


class SharedExport:
    """One export's place in the session's store: `stored` is the asset of an identical
    earlier export (copy it), or None (export, then `keep` what was written)."""

    def __init__(self, store: Path | None) -> None:
        self.store = store
        self.stored = store if store is not None and store.is_dir() else None

    def keep(self, path: Path) -> None:
        if self.store is not None and self.stored is None:
            staging = self.store.with_suffix(f".{os.getpid()}.partial")
            shutil.copytree(path, staging)
            os.rename(staging, self.store)


@contextlib.contextmanager
def shared_export(key: str | None, path: Path) -> Iterator[SharedExport]:
    """Around one export to `path` keyed `key` (`export_key`): one process exports a key,
    a concurrent one waits for it, then copies. Every use is logged in the store."""
    directory = os.environ.get(CACHE_ENV)
    if key is None or not directory:
        yield SharedExport(None)
        return
    started = time.perf_counter()
    with locked(Path(directory) / f"{key}.lock"):
        shared = SharedExport(Path(directory) / f"{key}.aimodel")
        yield shared
    line = {
        "key": key[:16],
        "hit": shared.stored is not None,
        "seconds": round(time.perf_counter() - started, 2),
        "asset": path.name,
    }
    _log(line)


def _log(line: dict) -> None:
    line["where"] = os.environ.get("PYTEST_CURRENT_TEST") or " ".join(sys.argv[:3])
    with open(Path(os.environ[CACHE_ENV]) / LOG_NAME, "a") as log:
        log.write(json.dumps(line) + "\n")


def summary(directory: str | os.PathLike) -> str | None:
    """One line on what the store saved: exports converted, copied, seconds not spent."""
    log = Path(directory) / LOG_NAME
    if not log.exists():
        return None
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    converted = {line["key"]: line["seconds"] for line in lines if line.get("hit") is False}
    copied = [line["key"] for line in lines if line.get("hit")]
    unkeyed = sum("uncacheable" in line for line in lines)
    saved = sum(converted.get(key, 0.0) for key in copied)
    return (
        f"{len(converted) + len(copied) + unkeyed} exports: {len(converted)} converted, "
        f"{len(copied)} copied from an identical one ({saved:.0f} s of converting saved), "
        f"{unkeyed} not keyed (exported as usual)"
    )
