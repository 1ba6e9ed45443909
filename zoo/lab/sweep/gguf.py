"""GGUF files that are damaged, foreign or not files at all: `zoo export FILE.gguf OUT`.

Each is written here with the `gguf` package (a llama-architecture file with one tensor)
and then cut or patched at the field the case names; every one must be refused in a line
that names the file, before anything is written (the conversion cache is the case's own)."""

from __future__ import annotations

import struct
from pathlib import Path

from zoo.lab.sweep.harness import Bench, Case, Run

SURFACE = "gguf"


def tiny_gguf(path: Path, arch: str = "llama", tensor_type=None, **fields) -> Path:
    """A GGUF file of `arch` with one 8 x 4 tensor and `fields` as extra metadata."""
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_uint32(f"{arch}.block_count", 1)
    for key, value in fields.items():
        if isinstance(value, str):
            writer.add_string(key, value)
        else:
            writer.add_uint32(key, value)
    writer.add_tensor("token_embd.weight", np.zeros((8, 4), np.float32), raw_dtype=tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def patched(path: Path, at: int | str, value: bytes, after: int = 0) -> Path:
    """`path` with `value` written at byte `at` (or `after` bytes past the first place the
    text `at` appears: a tensor's own fields follow its name)."""
    data = bytearray(path.read_bytes())
    start = at if isinstance(at, int) else data.index(at.encode()) + len(at) + after
    data[start : start + len(value)] = value
    path.write_bytes(bytes(data))
    return path


def export_of(file: Path, folder: Path, *options: str) -> Run:
    out = folder / "out.aimodel"
    return Run(
        ["export", str(file), str(out), *options],
        env={"ZOO_CACHE": str(folder / "cache")},
    )


def gguf_case(name: str, write, names: tuple[str, ...] = (), **more) -> Case:
    """A case whose file `write(folder)` makes; the refusal must name it."""

    options = more.pop("options", ())

    def make(bench: Bench, folder: Path) -> Run:
        return export_of(write(folder), folder, *options)

    return Case(SURFACE, name, make, names=names or ("x.gguf",), **more)


def base(folder: Path) -> Path:
    return tiny_gguf(folder / "x.gguf")


def u32(number: int) -> bytes:
    return struct.pack("<I", number)


def u64(number: int) -> bytes:
    return struct.pack("<Q", number)


def written(data: bytes, name: str = "x.gguf"):
    def write(folder: Path) -> Path:
        (folder / name).write_bytes(data)
        return folder / name

    return write


# the tensor's fields after its name: n_dims (u32), dims (u64 each), type (u32), offset (u64)
NAME = "token_embd.weight"
CASES = [
    gguf_case("empty file", written(b"")),
    gguf_case("magic only", written(b"GGUF")),
    gguf_case("GGML magic", lambda f: patched(base(f), 0, b"GGML")),
    gguf_case("text named .gguf", written(b"this is not a model\n" * 20)),
    gguf_case("version 0", lambda f: patched(base(f), 4, u32(0))),
    gguf_case("version 99", lambda f: patched(base(f), 4, u32(99))),
    gguf_case("tensor count 2^62", lambda f: patched(base(f), 8, u64(1 << 62))),
    gguf_case("tensor count 0 with a tensor", lambda f: patched(base(f), 8, u64(0))),
    gguf_case("metadata count 2^62", lambda f: patched(base(f), 16, u64(1 << 62))),
    gguf_case("first key 2^60 bytes long", lambda f: patched(base(f), 24, u64(1 << 60))),
    gguf_case(
        "first value of an unknown type", lambda f: patched(base(f), "architecture", u32(99))
    ),
    gguf_case("tensor with 2^31 dimensions", lambda f: patched(base(f), NAME, u32(1 << 31))),
    gguf_case("tensor with a zero dimension", lambda f: patched(base(f), NAME, u64(0), after=4)),
    gguf_case("tensor 2^40 rows long", lambda f: patched(base(f), NAME, u64(1 << 40), after=4)),
    gguf_case("tensor of an unknown type", lambda f: patched(base(f), NAME, u32(250), after=20)),
    gguf_case("tensor data past the end", lambda f: patched(base(f), NAME, u64(1 << 40), after=24)),
    gguf_case("cut in its metadata", lambda f: written(base(f).read_bytes()[:60])(f)),
    gguf_case("cut in its tensor data", lambda f: written(base(f).read_bytes()[:-40])(f)),
    gguf_case("an unknown architecture", lambda f: tiny_gguf(f / "x.gguf", "notanarch")),
    gguf_case(
        "llama without its sizes or tokenizer",
        lambda f: tiny_gguf(f / "x.gguf", "llama", **{"llama.context_length": 64}),
    ),
    gguf_case("alignment 0", lambda f: tiny_gguf(f / "x.gguf", **{"general.alignment": 0})),
    gguf_case("upper-case suffix, damaged", written(b"GGML" * 64, "x.GGUF"), names=("x.GGUF",)),
    gguf_case("a folder named .gguf", lambda f: _folder(f / "x.gguf"), names=("x.gguf", "folder")),
    gguf_case("a path that is not there", lambda f: f / "x.gguf", names=("x.gguf", "not exist")),
    gguf_case("a link to nowhere", lambda f: _dangling(f / "x.gguf"), names=("x.gguf",)),
    gguf_case(
        "damaged, with --dry-run", lambda f: patched(base(f), 0, b"GGML"), options=("--dry-run",)
    ),
]


def _folder(path: Path) -> Path:
    path.mkdir()
    return path


def _dangling(path: Path) -> Path:
    path.symlink_to(path.parent / "gone.gguf")
    return path
