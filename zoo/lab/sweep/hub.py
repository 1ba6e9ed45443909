"""Hugging Face ids read from the local hub cache: `zoo export ORG/NAME OUT`, offline.

Each case lays the tiny Llama out as `hf download` leaves it (blobs named by their sha256,
the snapshot's files relative links to them, `refs/main`) under the case's own `HF_HOME`,
then damages the layout (the hub library pointed at it for the case's run)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from zoo.lab.sweep.harness import Bench, Case, Result, Run, planned

SURFACE = "hub"
REPO = "tiny-org/ours"
REVISION = "0123456789abcdef0123456789abcdef01234567"


def cache(bench: Bench, folder: Path, repo: str = REPO, source: Path | None = None) -> Path:
    """The tiny checkpoint (or `source`) in `folder/hf` as `repo`; its snapshot."""
    from zoo.reference import as_hub_download

    return as_hub_download(source or bench.checkpoint(), folder / "hf", repo, REVISION)


def export_id(folder: Path, repo: str = REPO, *options: str, cwd: Path | None = None) -> Run:
    env = {"HF_HOME": str(folder / "hf"), "HF_HUB_OFFLINE": "1"}
    out = folder / "out.aimodel"
    return Run(["export", repo, str(out), "--capacity", "32", *options], env=env, cwd=cwd)


def hub_case(name: str, damage, names: tuple[str, ...] = (), **more) -> Case:
    """A case: the cache laid out, then `damage(snapshot, folder)` returns the command."""

    def make(bench: Bench, folder: Path) -> Run:
        snapshot = cache(bench, folder)
        return damage(snapshot, folder) or export_id(folder)

    return Case(SURFACE, name, make, names=names, **more)


def refs(snapshot: Path) -> Path:
    return snapshot.parents[1] / "refs" / "main"


def blob_of(snapshot: Path, name: str) -> Path:
    return (snapshot / name).resolve()


def other_repo(snapshot: Path, folder: Path) -> Path:
    """A second repository in the same cache: what a revision file may point at."""
    from zoo.reference import as_hub_download

    return as_hub_download(snapshot, folder / "hf", "other/repo", REVISION)


def sharded_snapshot(bench: Bench, folder: Path) -> Path:
    """The tiny checkpoint as two shards and their index, in the cache."""
    from safetensors.torch import load_file, save_file

    source, into = bench.checkpoint(), folder / "sharded"
    into.mkdir()
    tensors = load_file(source / "model.safetensors")
    names, weight_map = sorted(tensors), {}
    for i in range(2):
        file = f"model-{i + 1:05d}-of-00002.safetensors"
        part = {n: tensors[n] for n in names[i::2]}
        save_file(part, into / file, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, file))
    (into / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    for other in source.iterdir():
        if other.name != "model.safetensors":
            (into / other.name).write_bytes(other.read_bytes())
    return cache(bench, folder, source=into)


def unlink(path: Path) -> None:
    path.unlink()


def _write(path: Path, text: str) -> None:
    path.write_text(text)


def _relink(link: Path, target: Path) -> None:
    link.unlink()
    link.symlink_to(target)


def _sharded(bench: Bench, folder: Path, edit=None, *options: str) -> Run:
    snapshot = sharded_snapshot(bench, folder)
    if edit:
        edit(snapshot)
    return export_id(folder, REPO, *options)


def _index_naming(snapshot: Path, shard: str) -> None:
    index = snapshot / "model.safetensors.index.json"
    data = json.loads(index.read_text())
    data["weight_map"] = dict.fromkeys(data["weight_map"], shard)
    index.unlink()
    index.write_text(json.dumps(data))


def _same_name_folder(bench: Bench, folder: Path) -> Run:
    """`tiny-org/ours` both a folder under the working folder and an id in the cache."""
    import shutil

    cache(bench, folder)
    shutil.copytree(bench.checkpoint(), folder / "tiny-org" / "ours")
    return export_id(folder, REPO, "--dry-run", cwd=folder)


def _the_folder_read(folder: Path, result: Result) -> str | None:
    if "local hub cache" in result.err:
        return "the cache was read, not the folder of that name"
    return planned(folder, result)


CASES = [
    hub_case(
        "an id not in the cache",
        lambda s, f: export_id(f, "nobody/nothing"),
        names=("nobody/nothing", "hf download"),
    ),
    hub_case(
        "the cached id, dry run",
        lambda s, f: export_id(f, REPO, "--dry-run"),
        works=True,
        check=planned,
    ),
    Case(
        SURFACE,
        "a sharded id, dry run",
        lambda b, f: _sharded(b, f, None, "--dry-run"),
        works=True,
        check=planned,
    ),
    Case(
        SURFACE,
        "a sharded id whose index names a shard not there",
        lambda b, f: _sharded(b, f, lambda s: _index_naming(s, "model-9.safetensors")),
        names=("model-9.safetensors",),
    ),
    Case(
        SURFACE,
        "a sharded id whose index leaves the snapshot",
        lambda b, f: _sharded(b, f, lambda s: _index_naming(s, "../../x.safetensors")),
        names=("../../x.safetensors",),
    ),
    Case(
        SURFACE,
        "a sharded id missing a shard's blob",
        lambda b, f: _sharded(
            b, f, lambda s: unlink(blob_of(s, "model-00002-of-00002.safetensors"))
        ),
        names=("model-00002-of-00002.safetensors", "hf download"),
    ),
    hub_case(
        "refs/main leading to another repository",
        lambda s, f: _point_elsewhere(s, f),
        names=("revision file", "outside"),
    ),
    hub_case(
        "refs/main an absolute path",
        lambda s, f: _write(refs(s), str(other_repo(s, f))),
        names=("revision file", "outside"),
    ),
    hub_case("refs/main empty", lambda s, f: _write(refs(s), ""), names=(REPO,)),
    hub_case("refs/main naming no snapshot", lambda s, f: _write(refs(s), "f" * 40), names=(REPO,)),
    hub_case("refs/main gone, one snapshot", lambda s, f: unlink(refs(s)), names=(REPO,)),
    hub_case(
        "a weights link leaving the cache",
        lambda s, f: _relink(s / "model.safetensors", _outside_copy(s, f)),
        names=("model.safetensors", "outside"),
    ),
    hub_case(
        "the weights' blob gone",
        lambda s, f: unlink(blob_of(s, "model.safetensors")),
        names=("model.safetensors", "hf download"),
    ),
    hub_case(
        "the config's blob gone",
        lambda s, f: unlink(blob_of(s, "config.json")),
        names=("config.json",),
    ),
    hub_case(
        "the tokenizer's blob gone",
        lambda s, f: unlink(blob_of(s, "tokenizer.json")),
        names=("tokenizer.json",),
    ),
    hub_case(
        "a config link leaving the cache",
        lambda s, f: _relink(s / "config.json", Path("/etc/hostname")),
        names=("config.json", "outside"),
    ),
    hub_case("weights as a pickle only", lambda s, f: _pickle_only(s), names=("pickle",)),
    hub_case(
        "an id with a revision suffix",
        lambda s, f: export_id(f, f"{REPO}@main"),
        names=(f"{REPO}@main",),
    ),
    hub_case(
        "an id of three parts", lambda s, f: export_id(f, f"{REPO}/extra"), names=(f"{REPO}/extra",)
    ),
    hub_case("an id climbing out", lambda s, f: export_id(f, "../ours"), names=("../ours",)),
    Case(
        SURFACE,
        "a folder and a cached id of one name: the folder, dry run",
        _same_name_folder,
        works=True,
        check=_the_folder_read,
    ),
]


def _point_elsewhere(snapshot: Path, folder: Path) -> None:
    other_repo(snapshot, folder)
    _write(refs(snapshot), f"../../models--other--repo/snapshots/{REVISION}")


def _outside_copy(snapshot: Path, folder: Path) -> Path:
    copy = folder / "elsewhere.safetensors"
    copy.write_bytes(blob_of(snapshot, "model.safetensors").read_bytes())
    return copy


def _pickle_only(snapshot: Path) -> None:
    """The weights replaced by a pickle file, in the cache's own layout."""
    blob = snapshot.parents[1] / "blobs" / ("b" * 64)
    blob.write_bytes(b"\x80\x04pickled")
    (snapshot / "model.safetensors").unlink()
    (snapshot / "pytorch_model.bin").symlink_to(os.path.relpath(blob, snapshot))
