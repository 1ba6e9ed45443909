"""`zoo export FILE.gguf` under damaged and foreign GGUF files: each refused in one line that
names the file and what to do (ffe1239 ended in numpy's words: "cannot reshape array of
size 2961480 into shape (49152,64)", "index 0 is out of bounds"), nothing written."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from zoo.fetch import CACHE_ENV, fetched_gguf

pytestmark = pytest.mark.real_weights  # the suite's tiers: pyproject.toml's markers

REAL = "smollm2-135m-instruct"


def damaged(name: str, real: bytes, folder) -> None:
    """Write the case `name` as folder/NAME.gguf."""
    if name == "foreign-architecture":
        import gguf

        writer = gguf.GGUFWriter(str(folder / f"{name}.gguf"), "notanarch")
        writer.add_uint32("notanarch.block_count", 1)
        writer.add_tensor("x", np.zeros((4, 4), np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        return
    cases = {
        "wrong-magic": lambda: b"GGML" + real[4:1000],
        "cut-to-a-third": lambda: real[: len(real) // 3],
        "header-only": lambda: real[:200_000],
        "huge-tensor-count": lambda: real[:8] + (1 << 62).to_bytes(8, "little") + real[16:100_000],
        "empty": lambda: b"",
    }
    (folder / f"{name}.gguf").write_bytes(cases[name]())


@pytest.mark.parametrize(
    "name,says",
    [
        ("wrong-magic", "is not a GGUF file (it starts with b'GGML'"),
        ("empty", "is not a GGUF file (it starts with b''"),
        ("cut-to-a-third", "damaged or cut short: download it again"),
        ("header-only", "damaged or cut short: download it again"),
        ("huge-tensor-count", "damaged or cut short: download it again"),
        ("foreign-architecture", "does not convert it: use a safetensors checkpoint"),
    ],
)
def test_a_damaged_or_foreign_gguf_file_is_named(tmp_path, name, says):
    damaged(name, fetched_gguf(REAL).read_bytes(), tmp_path)
    env = {**os.environ, CACHE_ENV: str(tmp_path / "cache")}
    out = tmp_path / "x.aimodel"
    command = [sys.executable, "-m", "zoo", "export", str(tmp_path / f"{name}.gguf"), str(out)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2 and says in done.stderr, done.stderr[-1500:]
    assert f"{name}.gguf" in done.stderr and "Traceback" not in done.stderr
    assert not out.exists() and list((tmp_path / "cache").glob("gguf/*")) == []
