"""Fixtures of the docs harness tests: the built site, and throwaway copies of the site."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from zoo.site.harness import ROOT, build_site


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("site")
    build = build_site(ROOT / "mkdocs.yml", site)
    output = build.stdout + build.stderr
    assert build.returncode == 0, f"mkdocs build --strict failed:\n{output}"
    # mkdocs' own warnings ("WARNING -  ..."); a notebook kernel's log lines are not ours
    warnings = [line for line in output.splitlines() if re.match(r"WARNING\s+-", line)]
    assert not warnings, f"the strict build printed warnings:\n{output}"
    return site


@pytest.fixture
def make_site(tmp_path):
    """A copy of the site's mkdocs.yml over pages and snippets of the test's own."""

    def make(pages: dict[str, str], snippets: dict[str, str] | None = None) -> Path:
        config = (ROOT / "mkdocs.yml").read_text()
        nav = "nav:\n" + "".join(f"  - {name}\n" for name in pages)
        config = re.sub(r"^nav:\n(?:  .*\n)+", nav, config, flags=re.M)
        config = config.replace("- zoo/site/hooks.py", f"- {ROOT / 'zoo/site/hooks.py'}")
        # llms.txt lists the site's own pages by name: not those of a test site
        config = re.sub(
            r"^  # /llms\.txt.*?(?=^markdown_extensions:)", "", config, flags=re.M | re.S
        )
        (tmp_path / "mkdocs.yml").write_text(config)
        for name, text in pages.items():
            (tmp_path / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / "docs" / name).write_text(text)
        for name, text in (snippets or {}).items():
            (tmp_path / "snippets").mkdir(exist_ok=True)
            (tmp_path / "snippets" / name).write_text(text)
        return tmp_path / "mkdocs.yml"

    return make
