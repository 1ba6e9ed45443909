"""Site-wide rules: nothing on a page is unexecuted, every recipe is shown and run, strict."""

from __future__ import annotations

from pathlib import Path

import pytest

from zoo.site.harness import INCLUDE, ROOT, nav_pages, render_page, site_config

pytestmark = pytest.mark.site  # the suite's tiers: pyproject.toml's markers

CONFIG = site_config()
PAGES = nav_pages(CONFIG)
SNIPPETS = sorted((ROOT / "snippets").glob("*.py"))


def test_every_nav_page_is_markdown_or_a_notebook():
    assert PAGES, "the nav is empty"
    odd = [p for p in PAGES if not p.endswith((".md", ".ipynb"))]
    assert not odd, f"pages the harness cannot execute: {odd}"


def test_every_python_block_is_executed_or_skipped_with_a_reason():
    executed, problems = 0, []
    for page in (p for p in PAGES if p.endswith(".md")):
        rendered = render_page(page, CONFIG)
        problems += rendered.problems
        executed += sum(b.is_python and not b.skipped for b in rendered.blocks)
    assert not problems, "\n".join(problems)
    assert executed > 0


def test_every_snippet_is_shown_on_a_page():
    docs = Path(CONFIG["docs_dir"])
    included = set()
    for page in (p for p in PAGES if p.endswith(".md")):
        for line in (docs / page).read_text().splitlines():
            if match := INCLUDE.match(line):
                included.add(match["path"])
    assert SNIPPETS, "no snippets/*.py"
    unshown = [s.name for s in SNIPPETS if f"snippets/{s.name}" not in included]
    assert not unshown, f"snippets no page in the nav includes: {unshown}"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make serve" in readme
    assert "make test" in ci
