"""The harness catches what it is for: each breakage fails with a message naming the page."""

from __future__ import annotations

import pytest

from zoo.site.harness import PageError, build_site, execute_page, render_page, site_config

pytestmark = pytest.mark.site  # the suite's tiers: pyproject.toml's markers

SNIPPET = """\
# --8<-- [start:ok]
import math

radius = 2.0
area = math.pi * radius**2
print(f"area {area:.2f}")
# --8<-- [end:ok]

# --8<-- [start:broken]
ratio = area / 0
# --8<-- [end:broken]
"""
RECIPE = (
    SNIPPET.split("# --8<-- [start:broken]")[0]
    + """\
# --8<-- [start:second]
with open("circle.txt", "w") as out:
    out.write(str(radius))
print("wrote circle.txt")
# --8<-- [end:second]
"""
)


def page_with(*blocks: str) -> str:
    return "# A page\n\nSome text.\n\n" + "\n\n".join(blocks) + "\n"


def fence(body: str, header: str = "python") -> str:
    return f"```{header}\n{body}\n```"


def render(make_site, text: str, snippets=None):
    config = site_config(make_site({"p.md": text}, snippets or {"s.py": SNIPPET, "r.py": RECIPE}))
    return render_page("p.md", config)


def test_included_sections_are_checked_against_one_run_and_inline_blocks_share_a_namespace(
    make_site,
):
    rendered = render(
        make_site,
        page_with(
            fence('--8<-- "snippets/r.py:ok"'),
            fence('--8<-- "snippets/r.py:second"'),
            fence("x = 2"),
            fence("assert x == 2"),
        ),
    )
    assert [b.include for b in rendered.blocks] == ["snippets/r.py:ok", "snippets/r.py:second"] + [
        None
    ] * 2
    assert execute_page(rendered)["executed"] == 4


def test_sections_out_of_file_order_are_refused(make_site):
    rendered = render(
        make_site,
        page_with(fence('--8<-- "snippets/r.py:second"'), fence('--8<-- "snippets/r.py:ok"')),
    )
    with pytest.raises(PageError, match=r"docs/p.md, block 1, .*out of file order"):
        execute_page(rendered)


def test_failing_included_code_names_page_block_line_and_snippet(make_site):
    rendered = render(
        make_site,
        page_with(fence('--8<-- "snippets/s.py:ok"'), fence('--8<-- "snippets/s.py:broken"')),
    )
    with pytest.raises(PageError) as error:
        execute_page(rendered)
    message = str(error.value)
    assert message.startswith("docs/p.md, block 2, line 9 (snippets/s.py:broken): failed: Zero")
    assert 's.py", line 10' in message  # the traceback points into the snippet file


def test_command_blocks_run_in_the_directory_their_recipe_left(make_site):
    ok = fence("cat circle.txt && python -c 'print(6 * 7)'", 'bash {run="snippets/r.py"}')
    rendered = render(make_site, page_with(ok))
    assert execute_page(rendered)["executed"] == 1
    failing = fence("cat no-such-file", 'bash {run="snippets/r.py"}')
    with pytest.raises(PageError, match=r"docs/p.md, block 1, line 5: .*exited with 1"):
        execute_page(render(make_site, page_with(failing)))


def test_command_blocks_run_or_say_why_not(make_site):
    rendered = render(make_site, page_with(fence("make serve", "bash")))
    assert len(rendered.problems) == 1 and "runs after a recipe" in rendered.problems[0]


def test_the_build_shows_what_each_block_printed(make_site, tmp_path):
    page = page_with(
        fence('--8<-- "snippets/r.py:ok"'),
        fence("cat circle.txt", 'bash {run="snippets/r.py"}'),
    )
    config = make_site({"p.md": page}, {"r.py": RECIPE})
    build = build_site(config, tmp_path / "site")
    assert build.returncode == 0, build.stderr
    html = (tmp_path / "site" / "p" / "index.html").read_text()
    assert html.count(">Output</span>") == 2, html
    assert "area 12.57" in html and "2.0" in html


def test_failing_page_code_points_at_the_page_line(make_site):
    rendered = render(make_site, page_with(fence("x = 1\ny = x / 0")))
    with pytest.raises(PageError) as error:
        execute_page(rendered)
    assert str(error.value).startswith("docs/p.md, block 1, line 5: ZeroDivisionError")
    assert 'p.md", line 7' in str(error.value)


def test_missing_snippet_section_fails_the_render(make_site):
    with pytest.raises(PageError, match=r"docs/p.md: does not render.*'nosuch'"):
        render(make_site, page_with(fence('--8<-- "snippets/s.py:nosuch"')))


def test_missing_snippet_file_and_section_fail_the_strict_build(make_site, tmp_path):
    config = make_site(
        {"p.md": page_with(fence('--8<-- "snippets/s.py:nosuch"'))}, {"s.py": SNIPPET}
    )
    build = build_site(config, tmp_path / "site")
    assert build.returncode != 0
    assert "Error reading page 'p.md'" in build.stderr and "nosuch" in build.stderr
    config = make_site({"p.md": page_with(fence('--8<-- "snippets/gone.py"'))})
    build = build_site(config, tmp_path / "site")
    assert build.returncode != 0 and "p.md" in build.stderr


def test_broken_link_and_anchor_fail_the_strict_build(make_site, tmp_path):
    for link in ("[gone](nope.md)", "[gone](other.md#no-such-heading)"):
        config = make_site({"p.md": page_with(link), "other.md": "# Other\n"})
        build = build_site(config, tmp_path / "site")
        assert build.returncode != 0, link
        assert "'p.md'" in build.stderr, build.stderr


def test_unbraced_fence_option_is_reported(make_site):
    rendered = render(make_site, page_with(fence("raise SystemExit(1)", 'python test="skip"')))
    assert len(rendered.problems) == 1
    assert rendered.problems[0].startswith("docs/p.md, block 1, line 5: the fence")
    assert "not recognised" in rendered.problems[0]


def test_skip_needs_a_reason(make_site):
    rendered = render(make_site, page_with(fence("raise SystemExit(1)", 'python {test="skip"}')))
    assert rendered.problems == ['docs/p.md, block 1, line 5: test="skip" without a reason="..."']


def test_skip_with_reason_is_not_executed(make_site):
    header = 'python {test="skip" reason="needs a Mac GPU"}'
    rendered = render(make_site, page_with(fence("raise SystemExit(1)", header)))
    assert rendered.problems == []
    assert rendered.blocks[0].skipped
    assert execute_page(rendered) == {"executed": 0}


def test_other_languages_are_not_executed(make_site):
    skipped = 'bash {test="skip" reason="not on this machine"}'
    rendered = render(make_site, page_with(fence("rm -rf /", skipped), fence("x", "text")))
    assert [b.language for b in rendered.blocks] == ["bash", "text"]
    assert execute_page(rendered) == {"executed": 0}


def test_a_block_that_kills_its_process_is_reported(make_site):
    rendered = render(
        make_site, page_with(fence("import os, signal\nos.kill(os.getpid(), signal.SIGILL)"))
    )
    with pytest.raises(PageError, match=r"docs/p.md: the page's process died .* block 1"):
        execute_page(rendered)
