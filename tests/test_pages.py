"""Every page in the nav, rendered as the site renders it, with its python blocks executed."""

from __future__ import annotations

import pytest

from zoo.site.harness import PageError, execute_page, nav_pages, render_page, site_config

pytestmark = pytest.mark.site  # the suite's tiers: pyproject.toml's markers

CONFIG = site_config()
PAGES = [page for page in nav_pages(CONFIG) if page.endswith(".md")]


@pytest.mark.parametrize("page", PAGES)
def test_page_executes(page):
    try:
        rendered = render_page(page, CONFIG)
        assert not rendered.problems, "\n".join(rendered.problems)
        execute_page(rendered)
    except PageError as error:
        pytest.fail(str(error), pytrace=False)
