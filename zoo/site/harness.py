"""The page harness: render each page as the site does, and execute its python blocks.

A page is rendered with the site's own Markdown configuration (mkdocs.yml: the same
extensions, snippets expanded from the same files), and every fenced block the renderer
recognises is collected. The python blocks of a page then run in order, in one namespace, in
a child process of their own (the Core AI runtime can kill the process that calls it).

A python block is executed unless it says why not: ```` ```python {test="skip" reason="..."} ````.
Failures read `docs/PAGE.md, block N, line L: ...` with the traceback; a block included from
a file (`--8<-- "snippets/x.py:section"`) is compiled with that file's name and line numbers,
so its traceback points into the snippet.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import markdown
from mkdocs.config import load_config

from zoo.site.recipes import (
    RecipeError,
    child_env,
    read_sections,
    run_commands,
    run_recipe,
)

ROOT = Path(__file__).resolve().parents[2]
PYTHON_LANGUAGES = {"python", "py", "python3"}
SHELL_LANGUAGES = {"bash", "sh", "console"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<header>.*)$")
INCLUDE = re.compile(r"""^\s*--8<--\s+["'](?P<path>[^"':]+)(?::(?P<section>[\w-]+))?["']\s*$""")


class PageError(Exception):
    """A page failed: the message names the page, the block and the line."""


@dataclass
class Block:
    page: str  # docs-relative path, e.g. guides/conversion-guide.md
    index: int  # 1-based among the page's fenced blocks
    line: int  # 1-based line of the opening fence in the page source
    language: str
    source: str  # after snippet expansion, as the reader sees it
    attrs: dict = field(default_factory=dict)
    include: str | None = None  # "snippets/x.py:section[,section...]": includes only
    # (recipe as written, recipe file, section) of each include line of such a block
    includes: list[tuple[str, str, str]] = field(default_factory=list)
    filename: str = ""  # what tracebacks name
    first_lineno: int = 1

    @property
    def is_python(self) -> bool:
        return self.language in PYTHON_LANGUAGES

    @property
    def is_shell(self) -> bool:
        return self.language in SHELL_LANGUAGES

    @property
    def skipped(self) -> bool:
        return self.attrs.get("test") == "skip"

    def where(self) -> str:
        return f"docs/{self.page}, block {self.index}, line {self.line}"


@dataclass
class RenderedPage:
    page: str
    blocks: list[Block]
    problems: list[str]  # fences the renderer did not recognise, skips without a reason


def site_config(config_file: Path = ROOT / "mkdocs.yml"):
    return load_config(str(config_file))


def nav_pages(config) -> list[str]:
    """Every page file in the nav, in nav order (docs-relative paths)."""
    pages: list[str] = []

    def walk(items) -> None:
        for item in items:
            value = next(iter(item.values())) if isinstance(item, dict) else item
            if isinstance(value, list):
                walk(value)
            elif isinstance(value, str) and not value.startswith(("http://", "https://")):
                pages.append(value)

    walk(config["nav"] or [])
    return pages


def page_url(page: str) -> str:
    """A page's built URL relative to the site ("index.md" -> "", "zoo/index.md" -> "zoo/",
    "guides/x.md" -> "guides/x/"), the way mkdocs' directory URLs place it."""
    stem = page.removesuffix(".md").removesuffix(".ipynb")
    if stem == "index" or stem.endswith("/index"):
        return stem.removesuffix("index")
    return stem + "/"


def _markdown(config) -> markdown.Markdown:
    return markdown.Markdown(
        extensions=config["markdown_extensions"], extension_configs=config["mdx_configs"]
    )


def _scan_fences(lines: list[str]) -> list[tuple[int, str, str]]:
    """(0-based line, header, body) of each top-level fence, nested ones skipped."""
    fences, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        marker, indent = m["fence"], len(m["indent"].expandtabs(4))
        body, j = [], i + 1
        while j < len(lines):
            close = FENCE.match(lines[j])
            if (
                close
                and close["fence"][0] == marker[0]
                and len(close["fence"]) >= len(marker)
                and not close["header"].strip()
            ):
                break
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        fences.append((i, m["header"].strip(), "\n".join(body)))
        i = j + 1
    return fences


def render_page(page: str, config=None) -> RenderedPage:
    """Render `page` with the site's Markdown and collect its fenced blocks."""
    config = config or site_config()
    docs_dir = Path(config["docs_dir"])
    source_path = docs_dir / page
    text = source_path.read_text(encoding="utf-8")
    md = _markdown(config)

    recognised: list[dict] = []
    fences_ext = md.preprocessors["fenced_code_block"].extension
    for entry in fences_ext.superfences:
        entry["formatter"] = _recording(entry["formatter"], recognised)
    try:
        expanded = "\n".join(md.preprocessors["snippet"].run(text.split("\n")))
        md.convert(text)
    except Exception as exc:  # a missing snippet file or section, a bad extension option
        raise PageError(f"docs/{page}: does not render: {type(exc).__name__}: {exc}") from exc

    raw_fences = _scan_fences(text.split("\n"))
    expanded_fences = _scan_fences(expanded.split("\n"))
    problems: list[str] = []
    if len(raw_fences) != len(expanded_fences):  # an include brought fences of its own
        raw_fences = [(None, h, b) for _, h, b in expanded_fences]

    blocks: list[Block] = []
    pending = list(recognised)
    for index, ((line, header, raw_body), (_, _, body)) in enumerate(
        zip(raw_fences, expanded_fences, strict=True), start=1
    ):
        where = f"docs/{page}, block {index}, line {line + 1 if line is not None else '?'}"
        match = next((r for r in pending if r["src"].strip("\n") == body.strip("\n")), None)
        if match is None:
            problems.append(
                f"{where}: the fence ```{header} was not recognised by the renderer and is "
                'shown as text (fence options need braces: ```python {test="skip" '
                'reason="..."})'
            )
            continue
        pending.remove(match)
        block = Block(
            page=page,
            index=index,
            line=line + 1 if line is not None else 0,
            language=match["language"] or "",
            source=match["src"],
            attrs=dict(match["attrs"]),
        )
        _locate_source(block, raw_body, source_path, config)
        if block.is_shell and block.attrs.get("run"):
            block.filename = str(_find_snippet(block.attrs["run"], config))
        elif block.is_shell and not block.skipped:
            problems.append(
                f'{where}: a command block runs after a recipe (```bash {{run="snippets/x.py"}}) '
                'or says why it is not run (```bash {test="skip" reason="..."})'
            )
        if (block.is_python or block.is_shell) and block.skipped and not block.attrs.get("reason"):
            problems.append(f'{where}: test="skip" without a reason="..."')
        blocks.append(block)
    return RenderedPage(page, blocks, problems)


def _recording(formatter, recognised: list[dict]):
    def record(src="", language="", options=None, md=None, **kwargs):
        recognised.append({"src": src, "language": language, "attrs": kwargs.get("attrs") or {}})
        return formatter(src=src, language=language, options=options, md=md, **kwargs)

    return record


def _locate_source(block: Block, raw_body: str, page_path: Path, config) -> None:
    """Name the file and first line that a traceback should point at, and the recipe
    sections a block of includes shows."""
    lines = [line for line in raw_body.split("\n") if line.strip()]
    includes = [INCLUDE.match(line) for line in lines]
    if lines and all(includes):
        snippet = _find_snippet(includes[0]["path"], config)
        block.include = includes[0]["path"] + (
            ":" + ",".join(m["section"] for m in includes if m["section"])
            if includes[0]["section"]
            else ""
        )
        block.includes = [
            (m["path"], str(_find_snippet(m["path"], config)), m["section"] or "") for m in includes
        ]
        block.filename = str(snippet)
        block.first_lineno = 1
        if includes[0]["section"]:
            marker = f"[start:{includes[0]['section']}]"
            for number, text in enumerate(snippet.read_text().split("\n"), start=1):
                if marker in text:
                    block.first_lineno = number + 1
                    break
    else:
        block.filename = str(page_path.resolve())
        block.first_lineno = block.line + 1


def _find_snippet(path: str, config) -> Path:
    bases = config["mdx_configs"].get("pymdownx.snippets", {}).get("base_path", ["."])
    for base in bases if isinstance(bases, list) else [bases]:
        candidate = Path(base) / path
        if candidate.exists():
            return candidate.resolve()
    raise PageError(f"snippet {path!r} not found under {bases}")


def execute_page(rendered: RenderedPage, timeout: float = 900) -> dict:
    """Check the page's code against what ran; raise PageError naming page, block and line.

    - Blocks that include recipe sections: the recipe ran once (`zoo.site.recipes`, shared
      with the build and tests/test_snippets.py) and succeeded, and the page shows its
      sections in file order.
    - Bash blocks with `run="snippets/x.py"`: the commands ran in the directory the recipe
      left (the build shows their output).
    - Other python blocks: run in order, in one namespace, in a child process.
    """
    included = [b for b in rendered.blocks if b.is_python and not b.skipped and b.includes]
    inline = [b for b in rendered.blocks if b.is_python and not b.skipped and not b.includes]
    commands = [b for b in rendered.blocks if b.is_shell and not b.skipped and b.attrs.get("run")]
    _check_includes(rendered.page, included)
    for block in commands:
        try:  # `filename` is the recipe the commands run after
            run_commands(block.filename, block.source, base=Path("/"))
        except (RecipeError, FileNotFoundError) as error:
            raise PageError(f"{block.where()}: {error}") from error
    report = _execute_inline(rendered.page, inline, timeout) if inline else {"executed": 0}
    report["executed"] += len(included) + len(commands)
    return report


def _check_includes(page: str, blocks: list[Block]) -> None:
    shown: dict[str, list[tuple[int, Block]]] = {}  # recipe file -> (section start, block)
    for block in blocks:
        for written, recipe, section in block.includes:
            run = run_recipe(recipe, base=Path("/"))
            sections = read_sections(Path(recipe))
            if not run.ok:
                blamed = _blamed_block(blocks, recipe, sections, run.failed_line) or block
                where = f"{blamed.where()} ({blamed.include})"
                raise PageError(f"{where}: {run.summary()}\n{run.traceback or run.stderr_tail}")
            if section and section not in run.sections:
                raise PageError(f"{block.where()}: {written} has no section {section!r}")
            start = sections[section][0] if section else 0
            shown.setdefault(recipe, []).append((start, block))
    for recipe, starts in shown.items():
        lines = [start for start, _ in starts]
        if lines != sorted(lines):
            first = next(b for (a, b), (c, _) in zip(starts, starts[1:], strict=False) if a > c)
            raise PageError(
                f"{first.where()}: the page shows the sections of {Path(recipe).name} out of "
                "file order; the recipe runs top to bottom, so show them in that order"
            )


def _blamed_block(blocks, recipe: str, sections: dict, line: int | None) -> Block | None:
    """The block that shows the section holding the recipe's failing line."""
    if line is None:
        return None
    for block in blocks:
        for _, file, section in block.includes:
            if file == recipe and section and sections[section][0] < line < sections[section][1]:
                return block
    return None


def _execute_inline(page: str, runnable: list[Block], timeout: float) -> dict:
    """Run a page's own python blocks in one namespace, in a child process."""
    with tempfile.TemporaryDirectory(prefix="zoo-page-") as workdir:
        plan = Path(workdir) / "blocks.json"
        result = Path(workdir) / "result.json"
        plan.write_text(json.dumps([asdict(b) for b in runnable]))
        run_dir = Path(workdir) / "cwd"
        run_dir.mkdir()
        # The page runs in an empty directory; the repo root stays importable.
        env = child_env(Path(workdir) / "tmp")
        command = [sys.executable, "-m", "zoo.site._run_blocks", str(plan), str(result)]
        try:
            process = subprocess.run(
                command, cwd=run_dir, env=env, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired as exc:
            raise PageError(f"docs/{page}: timed out after {timeout} s") from exc
        report = json.loads(result.read_text()) if result.exists() else None
        if process.returncode == 0 and report and report.get("failed") is None:
            return report
        if report and report.get("failed") is not None:
            block = next(b for b in runnable if b.index == report["failed"])
            raise PageError(f"{block.where()}: {report['error']}\n{report['traceback']}")
        last = report["last_started"] if report else None
        raise PageError(
            f"docs/{page}: the page's process died (exit {process.returncode}) "
            f"while running block {last}\n{process.stderr[-3000:]}"
        )


def build_site(config_file: Path, site_dir: Path) -> subprocess.CompletedProcess:
    """`mkdocs build --strict`, never with -q: -q exits 0 despite warnings."""
    command = [
        sys.executable,
        "-m",
        "mkdocs",
        "build",
        "--strict",
        "-f",
        str(config_file),
        "-d",
        str(site_dir),
    ]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # the banner is not a build warning
    return subprocess.run(command, capture_output=True, text=True, env=env)
