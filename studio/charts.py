"""Small SVG charts drawn from numbers the engine computed (presentation only)."""

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

