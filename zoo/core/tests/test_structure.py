"""The shape of `zoo/`, read from its imports: `zoo.core` is the ground floor (it imports
nothing above it, the `zoo` facade included), no two modules and no two packages import each
other round a circle, no module passes 400 lines, and the host loop (`zoo generate`)
imports no torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit  # the suite's tiers: pyproject.toml's markers

ZOO = Path(__file__).resolve().parents[2]
# What zoo.core must never import: the floors above it.
ABOVE_CORE = (
    "zoo.lab",
    "zoo.testing",
    "zoo.pytest_plugin",
    "zoo.quality",
    "zoo.fetch",
    "zoo.released",
    "zoo.bench",
    "zoo.site",
    "zoo.reference",
    "zoo.command",
)
LONGEST_MODULE = 400


def modules() -> dict[str, Path]:
    """Every module of the zoo but its tests, by dotted name."""
    found = {}
    for path in sorted(ZOO.rglob("*.py")):
        parts = path.relative_to(ZOO.parent).with_suffix("").parts
        if "tests" in parts or path.name == "conftest.py":
            continue
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """The zoo modules `path` imports, at its top or inside functions."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports_of(path, name, set(found)) for name, path in found.items()}


def test_core_is_the_ground_floor():
    wrong = {
        (name, target)
        for name, targets in graph().items()
        if name.startswith("zoo.core")
        for target in targets
        if target.startswith(ABOVE_CORE) or not target.startswith("zoo.core")
    }
    assert not wrong, f"zoo.core imports from above it: {sorted(wrong)}"


def circles_of(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    circles, index, low, stack, on_stack = [], {}, {}, [], set()

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return circles


def test_no_import_circles():
    circles = circles_of(graph())
    assert not circles, f"modules that import one another round a circle: {circles}"


def package_of(module: str) -> str:
    """`zoo.X` for every module of `zoo/X/` or `zoo/X.py`; `zoo` for the facade."""
    return ".".join(module.split(".")[:2])


def test_no_loop_between_packages():
    """Lazy imports inside functions count: a loop of packages is one room, whatever
    import time says (8 packages were one loop before zoo.core took records and isolate)."""
    edges: dict[str, set[str]] = {}
    for name, targets in graph().items():
        edges.setdefault(package_of(name), set()).update(
            package_of(t) for t in targets if package_of(t) != package_of(name)
        )
    circles = circles_of(edges)
    assert not circles, f"packages that import one another round a loop: {circles}"


def test_no_loop_between_the_rooms_of_core():
    """zoo.core is split by job (io, checkpoint, asset, model, compression, export, host,
    cli): each folder a floor, none importing a folder that imports it back."""
    edges: dict[str, set[str]] = {}
    for name, targets in graph().items():
        if name.startswith("zoo.core."):
            room = ".".join(name.split(".")[:3])
            edges.setdefault(room, set()).update(
                ".".join(t.split(".")[:3])
                for t in targets
                if t.startswith("zoo.core.") and not t.startswith(room + ".") and t != room
            )
    assert len(edges) >= 8, sorted(edges)  # the folders are there to be checked
    circles = circles_of(edges)
    assert not circles, f"rooms of zoo.core that import one another round a loop: {circles}"


def test_the_facade_and_pyproject_name_one_version():
    import tomllib

    from zoo.core.io.provenance import ZOO_VERSION

    pyproject = tomllib.loads((ZOO.parent / "pyproject.toml").read_text())
    assert pyproject["project"]["version"] == ZOO_VERSION


def test_no_module_is_longer_than_400_lines():
    long = {
        name: lines
        for name, path in modules().items()
        if (lines := len(path.read_text().splitlines())) > LONGEST_MODULE
    }
    assert not long, f"split by what the code does: {long}"


def test_the_host_loop_imports_no_torch():
    code = (
        "import sys\n"
        "import zoo.core.host.generator, zoo.core.cli.commands, zoo.core.host.request\n"
        "import zoo.command\n"
        "from zoo import Generator, GenerationRequest, DecodeSpec\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'coreai_torch')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


def test_the_facade_names_what_a_user_needs():
    import zoo

    for name in ("export", "export_model", "load", "plan_export", "run_plan", "Generator"):
        assert name in zoo.__all__
    assert all(getattr(zoo, name) is not None for name in zoo.__all__)


def test_no_public_name_of_the_facade_is_a_module_of_zoo():
    """`from zoo import fetch` would give the module zoo.fetch once it was imported, not
    the facade's function: a public name must not be a submodule's."""
    import zoo

    submodules = {
        p.stem for p in ZOO.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()
    }
    assert not set(zoo.__all__) & submodules


def test_a_test_file_of_the_checkout_without_a_tier_is_refused(tmp_path):
    """`make check` selects by tier: a file of the zoo's own without one is refused at
    collection (a file outside the checkout, a device's own test, is not the zoo's)."""
    import os

    untiered = ZOO / "core" / "tests" / f"test_untiered_{os.getpid()}.py"
    outside = tmp_path / "test_outside.py"
    for path in (untiered, outside):
        path.write_text("def test_nothing():\n    assert True\n")
    try:
        said = {}
        for path in (untiered, outside):
            run = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "-p",
                    "zoo.pytest_plugin",
                    str(path),
                ],
                capture_output=True,
                text=True,
                cwd=tmp_path,
                timeout=300,
            )
            said[path] = (run.returncode, run.stdout + run.stderr)
        assert said[untiered][0] == 4 and "every test file names one tier" in said[untiered][1]
        assert said[outside][0] == 0, said[outside][1]
    finally:
        untiered.unlink()
