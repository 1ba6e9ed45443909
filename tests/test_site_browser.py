"""The built site: the strict build and its llms.txt, then headless Chromium (pages load
cleanly, search answers, code copies). One file, so a test session builds the site once: a
session fixture is per xdist worker, and `--dist loadfile` keeps a file on one worker."""

from __future__ import annotations

import functools
import http.server
import shutil
import threading

import pytest
from playwright.sync_api import sync_playwright

from zoo.site.harness import nav_pages, page_url, site_config

pytestmark = pytest.mark.site  # the suite's tiers: pyproject.toml's markers

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]
PAGES = [page_url(p) for p in nav_pages(site_config())]


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail(
            "Debian's chromium is missing: `make test` installs it (apt-get install chromium)",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="module")
def site_url(built_site):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    handler = functools.partial(Quiet, directory=built_site)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.mark.parametrize("path", PAGES)
def test_page_loads_without_console_errors_and_every_code_block_has_a_copy_button(
    browser, site_url, path
):
    page = browser.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    page.goto(site_url + path, wait_until="networkidle")
    if path.startswith("notebooks/"):  # mkdocs-jupyter renders cells of its own
        assert page.locator(".jp-CodeCell").count() > 0
    else:
        blocks = page.locator("div.highlight").count()
        assert blocks > 0
        page.wait_for_function(
            f"document.querySelectorAll('button.md-code__button').length >= {blocks}",
            timeout=10_000,
        )
    assert errors == []
    external = [
        u
        for u in page.evaluate("performance.getEntries().map(e => e.name)")
        if u.startswith("http") and not u.startswith(site_url)
    ]
    assert external == [], f"the page fetched from outside the site: {external}"
    page.close()


@pytest.mark.parametrize("word,expected_title", [("isolate", "Conversion guide")])
def test_search_finds_a_word_on_a_page(browser, site_url, word, expected_title):
    page = browser.new_page()
    page.goto(f"{site_url}?q={word}")
    results = page.locator(".md-search-result__item")
    results.first.wait_for(state="attached", timeout=15_000)
    assert expected_title in page.locator(".md-search-result").inner_text()
    page.close()


def test_strict_build_passes_without_warnings(built_site):
    assert (built_site / "index.html").exists()
    assert (built_site / "guides" / "conversion-guide" / "index.html").exists()


def test_llms_txt_lists_every_page_and_the_full_text_has_the_code(built_site):
    index = (built_site / "llms.txt").read_text()
    for page in nav_pages(site_config()):
        if page.endswith(".md"):
            link = f"({_site_url()}{page_url(page)}index.md)"
            assert link in index, f"{page} is missing from llms.txt"
    full = (built_site / "llms-full.txt").read_text()
    assert "from zoo.gemma4 import" in full and "--compress int4-block32" in full


def _site_url() -> str:
    import os

    return os.environ.get("SITE_URL", "http://127.0.0.1:8000/")
