"""Site-wide rules: nothing on a page is unexecuted, every recipe is shown and run, strict."""

from __future__ import annotations

from pathlib import Path

from zoo.site.harness import INCLUDE, ROOT, nav_pages, render_page, site_config

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


def test_strict_build_passes_without_warnings(built_site):
    assert (built_site / "index.html").exists()
    assert (built_site / "guides" / "conversion-guide" / "index.html").exists()


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make serve" in readme
    assert "make test" in ci


def test_llms_txt_lists_every_page_and_the_full_text_has_the_code(built_site):
    from zoo.site.harness import nav_pages, site_config

    index = (built_site / "llms.txt").read_text()
    for page in nav_pages(site_config()):
        if page.endswith(".md"):
            url = "" if page == "index.md" else page.removesuffix(".md") + "/"
            assert f"({_site_url()}{url}index.md)" in index, f"{page} is missing from llms.txt"
    full = (built_site / "llms-full.txt").read_text()
    assert "from zoo.gemma4 import" in full and "--compress int4-block32" in full


def _site_url() -> str:
    import os

    return os.environ.get("SITE_URL", "http://127.0.0.1:8000/")
