"""mkdocs hooks: render tables and provenance lines from the records in docs/records/.

Markers a page may hold (an HTML comment, so the raw Markdown still reads well):

    <!-- zoo:verified NAME -->      "Verified on linux x86_64 · coreai-core ... · DATE"
    <!-- zoo:table NAME KEY -->     the list of rows at results[KEY] of record NAME, as a table

A marker whose record or key is missing fails the build, naming the page.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from mkdocs.exceptions import PluginError

from zoo.core.provenance import describe

MARKER = re.compile(r"<!--\s*zoo:(?P<kind>\w+)\s+(?P<args>[^>]*?)\s*-->")


def on_page_markdown(markdown: str, page, config, files) -> str:
    records_dir = Path(config["docs_dir"]) / "records"

    def replace(match: re.Match) -> str:
        kind, args = match["kind"], match["args"].split()
        try:
            return render_marker(kind, args, records_dir, page.file.src_uri)
        except (KeyError, FileNotFoundError, ValueError) as exc:
            raise PluginError(f"docs/{page.file.src_uri}: {match[0]}: {exc}") from exc

    return MARKER.sub(replace, markdown)


def render_marker(kind: str, args: list[str], records_dir: Path, page: str) -> str:
    if not args:
        raise ValueError("the marker names no record")
    record = _load(records_dir, args[0])
    link = _relative_link(page, f"records/{args[0]}.json")
    if kind == "verified":
        return (
            f"<small markdown>:material-check-decagram: Verified on "
            f"{describe(record['provenance'])} ([record]({link}))</small>"
        )
    if kind == "table":
        if len(args) != 2:
            raise ValueError("zoo:table takes a record name and a results key")
        rows = record["results"][args[1]]
        return markdown_table(rows) + (
            f"\n\n<small>Measured on {describe(record['provenance'])} ([record]({link}))</small>"
        )
    raise ValueError(f"unknown marker kind {kind!r} (known: verified, table)")


def markdown_table(rows: list[dict]) -> str:
    if not rows:
        raise ValueError("the record has no rows")
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(c)) for c in columns) + " |")
    return "\n".join(lines)


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e-2 or abs(value) >= 1e4 else f"{value:g}"
    return str(value).replace("|", "\\|")


def _load(records_dir: Path, name: str) -> dict:
    path = records_dir / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(
            f"no record {path}; generate it with `make records` (python -m zoo.core.records "
            "regenerate)"
        )
    return json.loads(path.read_text())


def _relative_link(page: str, target: str) -> str:
    depth = page.count("/")
    return "../" * depth + target
