"""What the code on a page prints, rendered under its block at build time.

- A python block that includes recipe sections (`--8<-- "snippets/x.py:section"`) gets the
  stdout those sections printed when the recipe ran (`zoo.site.recipes.run_recipe`).
- A bash block that names a recipe (```` ```bash {run="snippets/x.py"} ````) is executed
  in the directory that recipe left, and gets what the commands printed (stdout and stderr,
  as in a terminal).

A recipe or command that fails fails the build, naming the page.
"""

from __future__ import annotations

import re
from pathlib import Path

from zoo.site.recipes import RecipeError, read_sections, run_commands, run_recipe

FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<header>[^\n`]*)\n"
    r"(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
    re.M | re.S,
)
INCLUDE = re.compile(r"""^\s*--8<--\s+["'](?P<path>snippets/[^"':]+):(?P<section>[\w-]+)["']\s*$""")
RUN = re.compile(r"""\brun=["'](?P<recipe>[^"']+)["']""")
MAX_LINES = 40  # longer outputs are cut, saying how much was left out


def python_includes(body: str) -> list[tuple[str, str]] | None:
    """(recipe, section) of each line when every line of `body` is a section include."""
    lines = [line for line in body.split("\n") if line.strip()]
    matches = [INCLUDE.match(line) for line in lines]
    if not lines or not all(matches):
        return None
    return [(m["path"], m["section"]) for m in matches]


def block_output(header: str, body: str, base: Path) -> str | None:
    """What the block prints, or None for a block that is not run here."""
    language = header.strip().split(" ", 1)[0].split("{", 1)[0].strip()
    if language in ("python", "py", "python3"):
        includes = python_includes(body)
        if includes is None:
            return None
        for recipe, section in includes:  # a missing file or section fails before any run
            if not (base / recipe).is_file():
                raise RecipeError(f"no recipe {recipe} (included as {recipe}:{section})")
            if section not in read_sections(base / recipe):
                raise RecipeError(f"{recipe} has no section {section!r}")
        printed = []
        for recipe, section in includes:
            run = run_recipe(recipe, base)
            if not run.ok:
                raise RecipeError(f"{recipe}: {run.summary()}\n{run.stderr_tail[-2000:]}")
            if section not in run.sections:
                raise RecipeError(f"{recipe} has no section {section!r}")
            printed.append(run.sections[section])
        return "".join(printed)
    if language in ("bash", "sh", "console") and (match := RUN.search(header)):
        return run_commands(match["recipe"], body, base)
    return None


def output_block(text: str, indent: str) -> str:
    lines = text.rstrip("\n").split("\n")
    if len(lines) > MAX_LINES:
        cut = len(lines) - MAX_LINES
        lines = [*lines[:MAX_LINES], f"... ({cut} more lines)"]
    fence = "````" if any(line.startswith("```") for line in lines) else "```"
    body = "\n".join(indent + line if line else line for line in lines)
    return f'\n\n{indent}{fence}text title="Output"\n{body}\n{indent}{fence}'


def add_outputs(markdown: str, base: Path) -> str:
    """`markdown` with an output block after every block that printed something; recipes
    are found under `base` (the directory of mkdocs.yml)."""

    def replace(match: re.Match) -> str:
        output = block_output(match["header"], match["body"], base)
        if not output or not output.strip():
            return match[0]
        return match[0] + output_block(output, match["indent"])

    return FENCE.sub(replace, markdown)
