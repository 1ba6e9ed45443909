"""Library source shown on pages by name: `<!-- zoo:source zoo.gemma4.model.RMSNorm -->`.

A name is a module path plus a qualified name inside it (a function, a class, or a method
`Class.method`), resolved the way mkdocstrings resolves identifiers but read with `ast` from
the file, so nothing is imported and library files carry no section markers. The block
shows the definition verbatim (decorators included), titled with its file; a name that does
not resolve fails the build. mkdocstrings renders signatures and docstrings, and its source
view is a collapsed extra under them, not a plain block of one method.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _module_file(name: str) -> tuple[Path, list[str]]:
    """The file of the longest module prefix of `name`, and the rest of the name."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        path = ROOT.joinpath(*parts[:cut]).with_suffix(".py")
        if path.exists():
            return path, parts[cut:]
    raise ValueError(f"{name!r}: no module of the repository holds it")


def definition(name: str) -> tuple[str, str]:
    """(repository-relative file, the definition's source dedented) of `name`."""
    path, attributes = _module_file(name)
    text = path.read_text(encoding="utf-8")
    scope: list[ast.stmt] = ast.parse(text).body
    node = None
    for attribute in attributes:
        node = next(
            (
                n
                for n in scope
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and n.name == attribute
            ),
            None,
        )
        if node is None:
            raise ValueError(f"{name!r}: {path.relative_to(ROOT)} defines no {attribute!r} there")
        scope = node.body
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    lines = text.split("\n")[first - 1 : node.end_lineno]
    return str(path.relative_to(ROOT)), textwrap.dedent("\n".join(lines))


def source_block(names: list[str]) -> str:
    """A titled python block with the definitions of `names` (one file), in the given order."""
    files, sources = set(), []
    for name in names:
        file, source = definition(name)
        files.add(file)
        sources.append(source)
    if len(files) != 1:
        raise ValueError(f"one zoo:source block shows one file; {names} span {sorted(files)}")
    title = f"{files.pop()} · " + ", ".join(_qualified(n) for n in names)
    return f'```python title="{title}"\n' + "\n\n\n".join(sources) + "\n```"


def _qualified(name: str) -> str:
    """`zoo.gemma4.model.Attention.forward` -> `Attention.forward`."""
    _, attributes = _module_file(name)
    return ".".join(attributes)
