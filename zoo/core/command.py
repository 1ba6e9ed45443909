"""The `zoo` command (`zoo export | generate | list`, installed with the package; also
`python -m zoo`): the entry is picked from a checkpoint's config.json `model_type` or an
asset's metadata, then `zoo.core.cli.run` does what `python -m zoo.<entry>` does."""

from __future__ import annotations

import sys
from pathlib import Path

from zoo.core.cli import run, say


def entry_for_checkpoint(directory: str | Path):
    """The zoo entry that loads a checkpoint directory, by its config.json `model_type` (as
    `mlx_lm.convert` and Apple's `coreai.llm.export` pick the family)."""
    from zoo.core.checkpoint import read_json
    from zoo.core.entry import all_entries

    config = read_json(Path(directory) / "config.json")
    model_type = config.get("model_type") if isinstance(config, dict) else None
    by_type = {}
    for entry in all_entries().values():
        for kind in entry.config.model_types():
            if kind:
                by_type[kind] = entry
    if model_type not in by_type:
        known = ", ".join(f"{t} (zoo.{e.name})" for t, e in sorted(by_type.items()))
        raise ValueError(
            f"{directory}/config.json has model_type {model_type!r}, which no zoo entry "
            f"loads; the entries load: {known}"
        )
    return by_type[model_type]


def main(argv: list[str] | None = None) -> int:
    """`zoo export CKPT OUT.aimodel ...`, `zoo generate ASSET ...`, `zoo list`: the entry is
    picked from the checkpoint's `model_type` (export) or the asset's metadata (generate);
    `python -m zoo.<entry>` takes the same options."""
    from zoo.core.entry import all_entries

    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    if command == "list" or not argv or argv[0] in ("-h", "--help"):
        if command != "list":
            print(main.__doc__.split("\n")[0].strip(), "\n")
        from zoo.released import released_configs

        for entry in all_entries().values():
            types = "/".join(entry.config.model_types())
            sizes = ", ".join(released_configs(entry.name))
            print(f"{entry.name:8} {entry.title:9} model_type {types}: {sizes}")
        return 0
    try:
        if command == "export":
            position = argv.index("export")
            checkpoint = next((a for a in argv[position + 1 :] if not a.startswith("-")), None)
            if checkpoint is None:
                raise ValueError("zoo export CHECKPOINT OUT.aimodel: name the checkpoint")
            name = entry_for_checkpoint(checkpoint).name
        elif command == "generate":
            from zoo.core.spec import DecodeSpec

            position = argv.index("generate")
            asset = next((a for a in argv[position + 1 :] if not a.startswith("-")), None)
            if asset is None:
                raise ValueError("zoo generate ASSET.aimodel: name the asset")
            name = DecodeSpec.of_asset(asset).model
        else:
            raise ValueError(f"unknown command {command!r}: zoo export | generate | list")
    except (ValueError, OSError) as error:
        say(f"error: {error}")
        return 2
    return run(name, argv)
