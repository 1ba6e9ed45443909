"""Charts drawn from records as inline SVG: no JavaScript, no network, the page's own colours."""

from __future__ import annotations

import math

PALETTE = [
    "#3f51b5",
    "#e91e63",
    "#009688",
    "#ff9800",
    "#9c27b0",
    "#795548",
    "#607d8b",
    "#4caf50",
    "#f44336",
    "#00bcd4",
]


def line_chart(
    rows: list[dict], x_key: str, y_key: str, series_key: str, log_y: bool = True
) -> str:
    """A small SVG line chart, log x and log y (or linear y); text and axes take the page's
    colour (dark mode). Rows without a value for x or y (null: e.g. an overflow has no
    perplexity) are left out."""
    rows = [row for row in rows if row.get(x_key) is not None and row.get(y_key) is not None]
    if not rows:
        raise ValueError(f"the record has no rows with both {x_key!r} and {y_key!r} to plot")
    series: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        series.setdefault(str(row[series_key]), []).append((float(row[x_key]), float(row[y_key])))
    xs = [x for points in series.values() for x, _ in points]
    ys = [y for points in series.values() for _, y in points]
    right = max(210, 40 + 7 * max(len(name) for name in series))  # the legend's room
    width, height, left, top, bottom = 510 + right, 360, 60, 16, 44
    x0, x1 = math.log10(min(xs)), math.log10(max(xs))
    if log_y:
        y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
        ticks = [f * 10**d for d in range(y0, y1 + 1) for f in (1, 2, 5)]
        ticks = [t for t in ticks if 10**y0 <= t <= 10**y1]
    else:  # a tick every 1, 2 or 5 x 10^n, about five of them
        step = 10 ** math.floor(math.log10((max(ys) - min(ys)) / 5 or 1))
        step *= next(f for f in (1, 2, 5, 10) if (max(ys) - min(ys)) / (f * step) <= 6)
        y0, y1 = math.floor(min(ys) / step) * step, math.ceil(max(ys) / step) * step
        ticks = [y0 + i * step for i in range(round((y1 - y0) / step) + 1)]

    def scale_y(y: float) -> float:
        return math.log10(y) if log_y else y

    def px(x: float) -> float:
        return left + (math.log10(x) - x0) / ((x1 - x0) or 1) * (width - left - right)

    def py(y: float) -> float:
        low, high = (scale_y(10**y0), scale_y(10**y1)) if log_y else (y0, y1)
        return height - bottom - (scale_y(y) - low) / ((high - low) or 1) * (height - top - bottom)

    parts = [
        f'<svg class="zoo-plot" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{y_key} against {x_key}" style="max-width:100%;font-size:12px" '
        'xmlns="http://www.w3.org/2000/svg">',
        f'<g stroke="currentColor" stroke-opacity="0.3">'
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}"/>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}"/></g>',
    ]
    for value in ticks:
        y = py(value)
        parts.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" '
            'stroke="currentColor" stroke-opacity="0.1"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" '
            f'fill="currentColor">{value:.4g}</text>'
        )
    drawn = -1e9
    for x in sorted(set(xs)):
        if px(x) - drawn < 28:  # labels of close values would overlap: the first stands
            continue
        drawn = px(x)
        parts.append(
            f'<text x="{px(x):.1f}" y="{height - bottom + 16}" text-anchor="middle" '
            f'fill="currentColor">{x:g}</text>'
        )
    parts.append(
        f'<text x="{(left + width - right) / 2}" y="{height - 6}" text-anchor="middle" '
        f'fill="currentColor">{x_key} (log)</text>'
        f'<text x="14" y="{(top + height - bottom) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {(top + height - bottom) / 2})" '
        f'fill="currentColor">{y_key}{" (log)" if log_y else ""}</text>'
    )
    for i, (name, points) in enumerate(series.items()):
        colour = PALETTE[i % len(PALETTE)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in sorted(points))
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in points:
            parts.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>')
        ly = top + 14 + 18 * i
        parts.append(
            f'<line x1="{width - right + 12}" y1="{ly - 4}" x2="{width - right + 32}" '
            f'y2="{ly - 4}" stroke="{colour}" stroke-width="2"/>'
            f'<text x="{width - right + 38}" y="{ly}" fill="currentColor">{name}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
