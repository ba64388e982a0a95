"""Small SVG charts and HTML tables drawn from numbers the engine computed (presentation only).

Tables are plain HTML rather than gr.Dataframe: a Dataframe in a tab that is not the first one
freezes the browser in this Gradio release (gradio-app/gradio#13448, a recursion in its table
options), and these tables are read-only anyway.
"""

from __future__ import annotations

from html import escape


def histogram_svg(title: str, hist: dict, limit: int | None, limit_label: str, width: int = 420, height: int = 200) -> str:
    """Bars for ``hist`` ({"counts", "edges"}) with a dashed red line at ``limit``."""
    counts, edges = hist["counts"], hist["edges"]
    left, right, top, bottom = 40, 10, 24, 28
    pw, ph = width - left - right, height - top - bottom
    lo, hi = edges[0], edges[-1]
    beyond = limit is not None and limit > 2 * hi  # far right of the data: say so, keep bars readable
    if limit is not None and not beyond:
        hi = max(hi, limit * 1.05)
    span = (hi - lo) or 1.0
    peak = max(counts) or 1
    x = lambda v: left + (v - lo) / span * pw  # noqa: E731
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" class="studio-hist" role="img" aria-label="{escape(title)}">',
        f'<text x="{left}" y="14" font-size="12" font-weight="600">{escape(title)}</text>',
        f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#888"/>',
    ]
    for c, a, b in zip(counts, edges[:-1], edges[1:]):
        h = c / peak * ph
        parts.append(
            f'<rect x="{x(a):.1f}" y="{top + ph - h:.1f}" width="{max(x(b) - x(a) - 1, 1):.1f}" height="{h:.1f}" fill="#4e79a7"><title>{a:.0f}–{b:.0f}: {c}</title></rect>'
        )
    parts.append(f'<text x="{left - 4}" y="{top + 8}" font-size="10" text-anchor="end">{peak}</text>')
    parts.append(f'<text x="{left}" y="{height - 8}" font-size="10">{lo:.0f}</text>')
    parts.append(f'<text x="{left + pw}" y="{height - 8}" font-size="10" text-anchor="end">{hi:.0f}</text>')
    if beyond:
        parts.append(f'<text x="{left + pw}" y="{top + 6}" font-size="10" fill="#e15759" text-anchor="end">{escape(limit_label)}={limit} →</text>')
    elif limit is not None:
        lx = x(limit)
        parts.append(f'<line x1="{lx:.1f}" y1="{top - 4}" x2="{lx:.1f}" y2="{top + ph}" stroke="#e15759" stroke-dasharray="4 3" stroke-width="2"/>')
        parts.append(f'<text x="{lx - 3:.1f}" y="{top + 6}" font-size="10" fill="#e15759" text-anchor="end">{escape(limit_label)}={limit}</text>')
    parts.append("</svg>")
    return "".join(parts)


PALETTE = ["#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#76b7b2", "#b07aa1"]


def line_chart_svg(series: dict[str, list[tuple[float, float]]], title: str = "", width: int = 720, height: int = 280) -> str:
    """Lines for named series of (x, y) points, with axes ranges and a legend.

    Each series is a <path> carrying data-series and data-points, so a test can read it.
    """
    pts = [p for s in series.values() for p in s]
    left, right, top, bottom = 48, 12, 24, 30
    pw, ph = width - left - right, height - top - bottom
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="100%" viewBox="0 0 {width} {height}" class="studio-line" role="img" aria-label="{escape(title)}">']
    if title:
        parts.append(f'<text x="{left}" y="14" font-size="12" font-weight="600">{escape(title)}</text>')
    parts.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#888"/>')
    parts.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="#888"/>')
    if pts:
        x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
        y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
        xs, ys = (x1 - x0) or 1.0, (y1 - y0) or 1.0
        X = lambda v: left + (v - x0) / xs * pw  # noqa: E731
        Y = lambda v: top + ph - (v - y0) / ys * ph  # noqa: E731
        parts.append(f'<text x="{left - 4}" y="{top + 8}" font-size="10" text-anchor="end">{y1:.3g}</text>')
        parts.append(f'<text x="{left - 4}" y="{top + ph}" font-size="10" text-anchor="end">{y0:.3g}</text>')
        parts.append(f'<text x="{left}" y="{height - 10}" font-size="10">{x0:g}</text>')
        parts.append(f'<text x="{left + pw}" y="{height - 10}" font-size="10" text-anchor="end">{x1:g}</text>')
        for i, (name, s) in enumerate(series.items()):
            if not s:
                continue
            color = PALETTE[i % len(PALETTE)]
            d = " ".join(f"{'M' if k == 0 else 'L'}{X(x):.1f},{Y(y):.1f}" for k, (x, y) in enumerate(s))
            dots = "".join(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="2.5" fill="{color}"/>' for x, y in s) if len(s) < 40 else ""
            parts.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="1.5" data-series="{escape(name)}" data-points="{len(s)}"/>{dots}')
            parts.append(f'<rect x="{left + 10 + 150 * i}" y="{top - 14}" width="10" height="10" fill="{color}"/>'
                         f'<text x="{left + 24 + 150 * i}" y="{top - 5}" font-size="11">{escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def html_table(columns: list[str], rows: list[list], elem_id: str = "", empty: str = "") -> str:
    """A read-only table; every cell escaped. ``empty`` is shown when there are no rows."""
    head = "".join(f"<th>{escape(str(c))}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{escape('' if v is None else str(v))}</td>" for v in r) + "</tr>" for r in rows)
    if not rows and empty:
        body = f'<tr><td colspan="{len(columns)}" class="studio-empty">{escape(empty)}</td></tr>'
    ident = f' id="{escape(elem_id)}"' if elem_id else ""
    return f'<div class="studio-table-wrap"><table{ident} class="studio-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def bar_chart_svg(groups: list[str], series: dict[str, list[float]], title: str = "", width: int = 640, height: int = 240) -> str:
    """Grouped bars: one group per label in ``groups``, one bar per named series in each group."""
    left, right, top, bottom = 48, 12, 30, 36
    pw, ph = width - left - right, height - top - bottom
    vals = [v for s in series.values() for v in s if v is not None]
    peak = max(vals) if vals else 1.0
    peak = peak or 1.0
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="100%" viewBox="0 0 {width} {height}" class="studio-bars" role="img" aria-label="{escape(title)}">']
    if title:
        parts.append(f'<text x="{left}" y="14" font-size="12" font-weight="600">{escape(title)}</text>')
    parts.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#888"/>')
    n_series = max(len(series), 1)
    gw = pw / max(len(groups), 1)
    bw = gw * 0.8 / n_series
    for gi, g in enumerate(groups):
        gx = left + gi * gw + gw * 0.1
        parts.append(f'<text x="{gx + gw * 0.4:.1f}" y="{height - 20}" font-size="10" text-anchor="middle">{escape(g)}</text>')
        for si, (name, s) in enumerate(series.items()):
            v = s[gi] if gi < len(s) else None
            if v is None:
                continue
            h = v / peak * ph
            x = gx + si * bw
            parts.append(f'<rect x="{x:.1f}" y="{top + ph - h:.1f}" width="{max(bw - 2, 1):.1f}" height="{h:.1f}" fill="{PALETTE[si % len(PALETTE)]}" data-series="{escape(name)}" data-group="{escape(g)}" data-value="{v:.6g}"><title>{escape(name)} · {escape(g)}: {v:.4g}</title></rect>')
    for si, name in enumerate(series):
        parts.append(f'<rect x="{left + 10 + 140 * si}" y="{top - 14}" width="10" height="10" fill="{PALETTE[si % len(PALETTE)]}"/>'
                     f'<text x="{left + 24 + 140 * si}" y="{top - 5}" font-size="11">{escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)
