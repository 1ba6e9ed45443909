"""mkdocs hooks: render tables and provenance lines from the records in docs/records/.

Markers a page may hold (an HTML comment, so the raw Markdown still reads well):

    <!-- zoo:source zoo.gemma4.model.RMSNorm [NAME ...] -->
                                    library source by qualified name, verbatim, titled
                                    with its file (`zoo.site.source`)
    <!-- zoo:verified NAME -->      "Verified on linux x86_64 · coreai-core ... · DATE"
    <!-- zoo:table NAME KEY -->     the list of rows at results[KEY] of record NAME (or the one
                                    row a dict is, or a dict's rows by name), as a table
    <!-- zoo:table NAME KEY "a,b" -->   the same, columns a and b only
    <!-- zoo:outcomes NAME KEY TABLE -->
                                    measured rows, a column per device record merged into
                                    records/devices/ (run-on-your-mac), and the outcomes
                                    others reported (`zoo.lab.expected.TABLES[TABLE]`),
                                    labelled as such
    <!-- zoo:devices NAME KEY -->   a table of results[KEY] per device record of NAME merged
                                    into records/devices/, or a note that there is none yet
    <!-- zoo:expectations TABLE -->  the expected outcome of each cell per target, with
                                    sources (`zoo.lab.expected.TABLES[TABLE]`)
    <!-- zoo:pivot NAME KEY "row column" "column column" "value column" -->
                                    the rows pivoted into a compact table
    <!-- zoo:entries -->          every zoo entry from the registry (`zoo.core.model.entry`): its
                                    model types, released sizes, what is verified here
    <!-- zoo:plot NAME KEY "x column" "y column" series-column -->
                                    an inline SVG line chart (log-log) of those rows
    <!-- zoo:quality_plot NAME [NAME ...] -->
                                    perplexity over fp32 against bits per weight of
                                    evaluation records, beside Apple's reported points
                                    (`zoo.site.reported`), labelled as theirs

A marker whose record or key is missing fails the build, naming the page.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from mkdocs.exceptions import PluginError

from zoo.core.io.provenance import describe
from zoo.site.charts import line_chart
from zoo.site.outputs import add_outputs
from zoo.site.recipes import RecipeError
from zoo.site.source import source_block

MARKER = re.compile(
    r"^(?P<indent>[ \t]*)<!--\s*zoo:(?P<kind>\w+)\s+(?P<args>[^>]*?)\s*-->", re.MULTILINE
)


def on_page_markdown(markdown: str, page, config, files) -> str:
    records_dir = Path(config["docs_dir"]) / "records"

    def replace(match: re.Match) -> str:
        kind, args = match["kind"], shlex.split(match["args"])
        try:
            rendered = render_marker(kind, args, records_dir, page.file.src_uri)
        except (KeyError, FileNotFoundError, ValueError) as exc:
            raise PluginError(f"docs/{page.file.src_uri}: {match[0].strip()}: {exc}") from exc
        # a marker inside a block (a content tab, an admonition) keeps its indentation
        return "\n".join(match["indent"] + line if line else line for line in rendered.split("\n"))

    markdown = MARKER.sub(replace, markdown)
    try:  # what the included recipe sections and the command lines print
        # recipes are found beside mkdocs.yml (the docs directory's parent by default)
        config_file = config.get("config_file_path") or Path(config["docs_dir"]).parent / "x"
        markdown = add_outputs(markdown, Path(config_file).parent)
    except (RecipeError, FileNotFoundError) as exc:
        raise PluginError(f"docs/{page.file.src_uri}: {exc}") from exc
    if re.search(r"<!--\s*zoo:", markdown):  # e.g. a marker after text on its line
        raise PluginError(f"docs/{page.file.src_uri}: a zoo: marker must start its own line")
    return markdown


def render_marker(kind: str, args: list[str], records_dir: Path, page: str) -> str:
    if kind == "entries":  # the registry, not a record
        return entries_table(records_dir, page)
    if not args:
        raise ValueError("the marker names no record")
    if kind == "expectations":  # data in zoo.lab.expected, not a record
        return expectation_table(args[0])
    if kind == "source":  # library source by qualified name (zoo.site.source)
        return source_block(args)
    if kind == "status":  # data in zoo.lab.expected, dated by the record of its matrix
        if len(args) != 2:
            raise ValueError("zoo:status takes a status name and the record of its matrix")
        return status_box(args[0], _load(records_dir, args[1]), _devices(records_dir, args[1]))
    if kind == "quality_plot":  # measured records beside Apple's reported figures
        from zoo.site.reported import BITS, RATIO, apple_sources, quality_points

        records = [_load(records_dir, name) for name in args]
        measured = "; ".join(
            f"[{name}]({_relative_link(page, f'records/{name}.json')}) on "
            f"{describe(record['provenance'])}"
            for name, record in zip(args, records, strict=True)
        )
        chart = line_chart(quality_points(records), BITS, RATIO, "series", log_y=False)
        return f"{chart}\n\n<small>Measured: {measured}. {apple_sources()}</small>"
    record = _load(records_dir, args[0])
    link = _relative_link(page, f"records/{args[0]}.json")
    if kind == "verified":
        return (
            f"<small markdown>:material-check-decagram: Verified on "
            f"{describe(record['provenance'])} ([record]({link}))</small>"
        )
    footer = f"\n\n<small>Measured on {describe(record['provenance'])} ([record]({link}))</small>"
    if kind == "table":
        if len(args) not in (2, 3):
            raise ValueError('zoo:table takes a record name, a results key [, "col,col"]')
        rows = record["results"][args[1]]
        if isinstance(rows, dict) and rows and all(isinstance(v, dict) for v in rows.values()):
            rows = list(rows.values())  # rows by name: one each
        elif isinstance(rows, dict):  # one result: a table of one row
            rows = [rows]
        if len(args) == 3:
            columns = [c.strip() for c in args[2].split(",")]
            missing = [c for c in columns if c not in rows[0]]
            if missing:
                raise KeyError(f"no column(s) {missing} in {args[0]}: {list(rows[0])}")
            rows = [{c: row.get(c) for c in columns} for row in rows]
        return markdown_table(rows) + footer
    if kind == "outcomes":
        if len(args) != 3:
            raise ValueError("zoo:outcomes takes a record name, a results key, a table name")
        devices = [json.loads(path.read_text()) for path in _devices(records_dir, args[0])]
        return outcome_table(record, args[1], args[2], devices) + footer
    if kind == "devices":
        if len(args) != 2:
            raise ValueError("zoo:devices takes a record name and a results key")
        return device_tables(records_dir, args[0], args[1], page)
    if kind == "pivot":
        if len(args) != 5:
            raise ValueError('zoo:pivot takes NAME KEY "row column" "column column" "value"')
        return pivot_table(record["results"][args[1]], *args[2:]) + footer
    if kind == "plot":
        if len(args) != 5:
            raise ValueError('zoo:plot takes NAME KEY "x column" "y column" series-column')
        return line_chart(record["results"][args[1]], *args[2:]) + footer
    raise ValueError(
        f"unknown marker kind {kind!r} (known: verified, table, outcomes, devices, pivot, plot, "
        "quality_plot)"
    )


def status_box(name: str, record: dict, device_records: list[Path]) -> str:
    """The dated status a gotcha page opens with (`zoo.lab.expected.STATUS`)."""
    from zoo.lab.expected import STATUS

    status = STATUS[name]
    kind = {"open upstream": "danger", "verified fixed": "success"}.get(status.status, "warning")
    here = record["provenance"]
    macs = [json.loads(path.read_text())["provenance"] for path in device_records]
    mac_line = (
        "; ".join(f"{p['platform']} {p['compute_unit']}, {p['date'][:10]}" for p in macs)
        if macs
        else "never on Apple hardware by this project"
    )
    lines = [
        f'!!! {kind} "Status: {status.status} (upstream checked {status.checked})"',
        f"    **Reported on:** {status.affected}.  ",
        f"    **Upstream:** {status.upstream}.  ",
        f"    **Last verified:** {here['platform']} {here['machine']} CPU runtime, "
        f"{here['date'][:10]} (re-run on every build); Mac: {mac_line}.",
        "",
        "    | when | what | source |",
        "    |---|---|---|",
        *(f"    | {r.date} | {r.what} | {r.source} |" for r in status.reports),
        "",
        "    | on | what to do |",
        "    |---|---|",
        *(f"    | {builds} | {advice} |" for builds, advice in status.advice),
    ]
    return "\n".join(lines)


def _devices(records_dir: Path, name: str) -> list[Path]:
    """Records of `name` measured on other devices, merged by `zoo.core.io.records merge`."""
    return sorted(records_dir.glob(f"devices/*/{name}.json"))


def device_tables(records_dir: Path, name: str, key: str, page: str) -> str:
    """One table per device that contributed record `name` (or a note that none has)."""
    paths = _devices(records_dir, name)
    if not paths:
        return (
            f'!!! note "No device records yet"\n    Nothing measured on Apple hardware has been '
            f"merged for `{name}` yet: [run it on your Mac]"
            f"({_relative_link(page, 'guides/run-on-your-mac.md')}) and contribute the records."
        )
    parts = []
    for path in paths:
        record = json.loads(path.read_text())
        link = _relative_link(page, f"records/devices/{path.parent.name}/{path.name}")
        parts.append(
            f"**{_device_label(record['provenance'])}**\n\n"
            + markdown_table(record["results"][key])
            + f"\n\n<small>Measured on {describe(record['provenance'])} ([record]({link}))</small>"
        )
    return "\n\n".join(parts)


def _device_label(provenance: dict) -> str:
    return f"{provenance['platform']} {provenance.get('compute_unit', '')} (measured)".replace(
        "  ", " "
    )


def outcome_table(record: dict, key: str, table: str, devices: list[dict] = ()) -> str:
    """The measured rows, a column per device record, and what others reported.

    A row names its cell with `key` (or `strategy`); `outcome` is what ran.
    """
    from zoo.lab.expected import reported_column

    reported, source = reported_column(table)
    platform = record["provenance"]["platform"]
    on_device = [
        (_device_label(d["provenance"]), {_cell_name(r): r["outcome"] for r in d["results"][key]})
        for d in devices
    ]
    rows = []
    for row in record["results"][key]:
        cell = _cell_name(row)
        shown = {k: v for k, v in row.items() if k not in ("key", "strategy", "seconds")}
        shown[f"{platform} CPU runtime (measured)"] = _mark(shown.pop("outcome"))
        for label, outcomes in on_device:
            shown[label] = _mark(outcomes.get(cell, "not run"))
        shown["Mac GPU, macOS 27 beta (reported[^reported])"] = _mark(reported.get(cell, "-"))
        rows.append(shown)
    return markdown_table(rows) + f"\n\n[^reported]: Not measured by this project: {source}."


def expectation_table(table: str) -> str:
    """Cell x target -> expected outcome, footnoted with where each expectation comes from:
    on the target's header, and on a cell whose source differs from its column's."""
    from zoo.lab.expected import TABLES, expected

    targets = ["linux-cpu", "macos-gpu", "macos-cpu", "macos-ane"]
    sources: list[str] = []

    def note(source: str) -> str:
        if source not in sources:
            sources.append(source)
        return f"[^{table}-{sources.index(source) + 1}]"

    cells = list(TABLES[table])
    headers = {t: f"{t}{note(expected(table, cells[0], t).source)}" for t in targets}
    rows = []
    for cell in cells:
        row = {"cell": cell}
        for target in targets:
            expectation = expected(table, cell, target)
            own = expectation.source != expected(table, cells[0], target).source
            row[headers[target]] = _mark(expectation.outcome) + (
                note(expectation.source) if own else ""
            )
        rows.append(row)
    notes = "\n".join(f"[^{table}-{i}]: {source}." for i, source in enumerate(sources, 1))
    return markdown_table(rows) + "\n\n" + notes


def _cell_name(row: dict) -> str:
    return row.get("key", row.get("strategy"))


def pivot_table(rows: list[dict], row_key: str, column_key: str, value_key: str) -> str:
    """`row_key` down, one column per value of `column_key`, cells `value_key`."""
    corner = f"{value_key}: {row_key} \\ {column_key}"
    table: dict[str, dict] = {}
    for row in rows:
        table.setdefault(str(row[row_key]), {corner: row[row_key]})[str(row[column_key])] = row[
            value_key
        ]
    columns = [corner] + sorted(
        {c for cells in table.values() for c in cells if c != corner}, key=float
    )
    return markdown_table([{c: cells.get(c) for c in columns} for cells in table.values()])


def _mark(outcome: str) -> str:
    if outcome.startswith(("ran", "runs")):
        return f":material-check: {outcome}"
    if outcome.startswith("crashed"):
        return f":material-close: {outcome}"
    return outcome


def markdown_table(rows: list[dict]) -> str:
    if not rows:
        raise ValueError("the record has no rows")
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(c)) for c in columns) + " |")
    return "\n".join(lines)


def _cell(value) -> str:
    if value is None:  # not measured: the row's outcome says why
        return "—"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e-2 or abs(value) >= 1e4 else f"{value:g}"
    if isinstance(value, list):
        return ", ".join(_cell(item) for item in value)
    if isinstance(value, dict):  # a nested result: its fields in one cell
        return "; ".join(f"{key} {_cell(item)}" for key, item in value.items())
    return str(value).replace("|", "\\|")


def _load(records_dir: Path, name: str) -> dict:
    path = records_dir / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(
            f"no record {path}; generate it with `make records` (python -m zoo.core.io.records "
            "regenerate), or `make bench` for a bench-* record"
        )
    return json.loads(path.read_text())


def entries_table(records_dir: Path, page: str) -> str:
    """One row per registered entry, from the registry and the records: no hand-kept list."""
    from zoo.core.asset.kv_writes import STRATEGIES
    from zoo.core.compression.presets import OTHER_SPELLINGS, PRESETS
    from zoo.core.model.entry import all_entries
    from zoo.fetch import REAL_MODELS
    from zoo.released import released_configs

    strategies = ", ".join(n for n, s in STRATEGIES.items() if s.stateful and s.chunks)
    docs = records_dir.parent
    rows = []
    for name, entry in all_entries().items():
        types = ", ".join(f"`{t}`" for t in entry.config.model_types())
        released = _load(records_dir, f"{name}-released")["results"]["rows"]
        decodes = sum(r["outcome"] == "decodes like transformers" for r in released)
        real = [m for m in REAL_MODELS.values() if m.entry == name]
        quality = [m.title for m in real if (records_dir / f"quality-{m.name}.json").exists()]
        verified = [
            f"{decodes} of {len(released_configs(name))} released configs decode 8/8 like "
            "transformers (tiny widths)"
        ]
        if real:
            verified.append("real weights: " + ", ".join(m.title for m in real))
        if quality:
            verified.append("preset quality on real text: " + ", ".join(quality))
        title = entry.title
        if (docs / "zoo" / f"{name}.md").exists():
            title = f"[{entry.title}]({_relative_link(page, f'zoo/{name}.md')})"
        rows.append(
            {
                "entry": f"`zoo.{name}`",
                "family": title,
                "model_type": types,
                "inputs": entry.inputs,
                "released sizes": ", ".join(released_configs(name)),
                # the same for nearly every entry: only what an entry lacks is listed
                "presets": "every one but "
                + ", ".join(p for p, preset in PRESETS.items() if name in dict(preset.unsupported))
                if any(name in dict(preset.unsupported) for preset in PRESETS.values())
                else "every one",
                "verified on the Linux CPU runtime": "; ".join(verified),
            }
        )
    footer = (
        f"\n\nEvery entry exports with the KV strategies {strategies}, and the compression "
        f"presets {', '.join([*PRESETS, *OTHER_SPELLINGS])} (the presets column names what "
        "an entry lacks). Not verified for any entry: runs on a Mac's GPU or Neural Engine."
    )
    return markdown_table(rows) + footer


def _relative_link(page: str, target: str) -> str:
    depth = page.count("/")
    return "../" * depth + target
