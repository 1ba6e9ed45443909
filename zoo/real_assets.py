"""A real model's exported asset, made once per version of the zoo's code and toolchain
(`exported`): the tests and the pages share it from the cache `zoo.fetch` fills.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from zoo.core.io.staging import locked
from zoo.fetch import cache_root, fetch, get_real_model, say


def code_key() -> str:
    """What an exported asset depends on besides its options: the zoo's source and the
    toolchain's versions (a change to either exports anew)."""
    from importlib.metadata import version

    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for source in sorted(package.rglob("*.py")):
        if "tests" not in source.relative_to(package).parts:
            digest.update(source.relative_to(package).as_posix().encode())
            digest.update(source.read_bytes())
    for name in ("torch", "coreai-torch", "coreai-core", "coreai-opt"):
        digest.update(f"{name}=={version(name)}".encode())
    return digest.hexdigest()[:12]


def stale_assets(assets: Path, stem: str, current: Path) -> list[Path]:
    """Assets of these options under an older code key: `STEM-KEY.aimodel`, never another
    option's (`...-256-score64-KEY` also starts with `...-256-`)."""
    return [
        stale
        for stale in assets.glob(f"{stem}-*.aimodel")
        if stale != current and stale.name[len(stem) + 1 : -len(".aimodel")].isalnum()
    ]


def exported(
    name: str,
    compress: str = "fp32",
    capacity: int = 256,
    root: str | os.PathLike | None = None,
    progress: Callable = say,
    score_chunk: int | None = 64,
    layers_per_function: int | None = None,
    first_layers: int | None = None,
) -> Path:
    """Real model `name` fetched and exported with the `compress` preset (default strategy,
    layout and prefill chunk), once per zoo version: the asset is kept under the cache's
    `assets/` keyed by `code_key()`, and an older key's asset of the same options goes.
    The tests and the pages share it; an export takes 1 to 3 minutes. It has the `score`
    function (`score_chunk` rows, every row's logits: `zoo.quality`) unless
    `score_chunk=None`; `layers_per_function` exports layer ranges (`zoo.core.export.ranges`);
    `first_layers` only the first N layers and the head (an early-exit draft)."""
    from zoo.core.export.functions import export_model
    from zoo.core.model.entry import get_entry
    from zoo.core.model.layout import default_chunk

    model = get_real_model(name)
    checkpoint = fetch(name, root, progress)
    assets = (Path(root) if root is not None else cache_root()) / "assets"
    stem = f"{name}-{compress}-{capacity}" + (f"-score{score_chunk}" if score_chunk else "")
    stem += f"-ranges{layers_per_function}" if layers_per_function else ""
    stem += f"-first{first_layers}" if first_layers else ""
    path = assets / f"{stem}-{code_key()}.aimodel"
    assets.mkdir(parents=True, exist_ok=True)
    with locked(assets / f".{stem}.lock"):
        if not (path / "metadata.json").is_file():
            started = time.perf_counter()
            progress(f"exporting {model.title} ({compress}, capacity {capacity}) once ...")
            loaded = get_entry(model.entry).load(checkpoint, compress=compress, capacity=capacity)
            if first_layers:
                from zoo.core.export.ranges import keep_first_layers

                keep_first_layers(loaded, first_layers)
            chunk = min(default_chunk(), capacity)
            export_model(
                loaded,
                path,
                chunk=chunk,
                checkpoint=checkpoint,
                compress=compress,
                score_chunk=score_chunk,
                layers_per_function=layers_per_function,
            )
            progress(f"exported {path.name} in {time.perf_counter() - started:.0f} s")
            for stale in stale_assets(assets, stem, path):
                shutil.rmtree(stale, ignore_errors=True)
    return path
