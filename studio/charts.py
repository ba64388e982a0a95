"""Plotly figures (shown through gr.Plot: hover, zoom, legend that never covers the title), HTML
tables, and numbers written as people read them. Presentation only: every value comes from core.

Tables are plain HTML rather than gr.Dataframe: a Dataframe in a tab that is not the first one
freezes the browser in this Gradio release (gradio-app/gradio#13448, a recursion in its table
options), and these tables are read-only anyway.
"""

from __future__ import annotations

import math
from html import escape

PALETTE = ["#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#76b7b2", "#b07aa1", "#edc948", "#9c755f"]


def num(v, digits: int = 4) -> str:
    """A number with ``digits`` significant figures (integers as they are; None as empty)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 10000 else str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        if v == int(v) and abs(v) < 1e6:
            return str(int(v))
        return f"{v:.{digits}g}"
    return str(v)


def size(n_bytes) -> str:
    """Bytes as KiB / MiB / GiB with 3-4 significant figures."""
    if n_bytes is None:
        return ""
    v = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.3g} {unit}"
        v /= 1024
    return f"{v:.3g} TiB"


_UNITS = {"en": ("s", "min", "h"), "zh": ("秒", "分", "小时")}


def duration(seconds, lang: str = "en") -> str:
    """Seconds as a person reads them in ``lang``: 75 -> "1 min 15 s" / "1 分 15 秒"."""
    if seconds is None:
        return ""
    sec, mins, hours = _UNITS.get(lang, _UNITS["en"])
    s = float(seconds)
    if s < 60:
        return f"{s:.3g} {sec}"
    m, s = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m} {mins} {s:02d} {sec}"
    h, m = divmod(m, 60)
    return f"{h} {hours} {m:02d} {mins}"


def _layout(fig, title: str, x_title: str = "", y_title: str = "", log_y: bool = False, height: int = 320,
            automargin: bool = True):
    """The studio's chart look. ``automargin`` False keeps the fixed margins, which fit numeric tick
    labels of 3 significant figures: an axis sizing its own margin measures every label's box at
    each redraw, and in the page each measure forces a layout of the whole page (a third of a live
    chart's redraw time in chromium, 17 -> 9 ms in a bare page). Category labels (bars) keep it."""
    fig.update_layout(
        title={"text": title, "x": 0, "xanchor": "left", "font": {"size": 14}},
        # the legend below the plot (never over the title), under the x axis' title: at -0.22 of the
        # plot's height it covered "step" (Runs tab, compare mode)
        margin={"l": 56, "r": 16, "t": 44, "b": 92}, height=height, hovermode="x unified",
        legend={"orientation": "h", "yanchor": "top", "y": -0.32, "x": 0},
        # the look of plotly_white without the template itself: its 7 KB went with every redraw and
        # applying it was a quarter of each redraw's time (measured in chromium, 11 -> 8 ms)
        template=None, plot_bgcolor="white", paper_bgcolor="white", font={"color": "#2a3f5f"},
    )
    grid = {"gridcolor": "#ebf0f8", "zerolinecolor": "#ebf0f8", "linecolor": "#ebf0f8", "automargin": automargin}
    fig.update_xaxes(title_text=x_title, **grid)
    fig.update_yaxes(title_text=y_title, type="log" if log_y else "linear", tickformat=".3~g" if not log_y else None, **grid)
    return fig


LINE_POINTS = 400  # most points drawn per line (a chart of 10,000 logged steps drew them all every redraw)


def thin(pts: list[tuple[float, float]], limit: int = LINE_POINTS) -> list[tuple[float, float]]:
    """At most about ``limit`` of ``pts`` (in order): in each of limit/2 equal runs of points the lowest
    and the highest, so spikes and dips stay visible; the first and last point always."""
    if len(pts) <= limit:
        return list(pts)
    buckets = max(1, limit // 2)  # fewer than len(pts): every run has a point
    keep = {0, len(pts) - 1}
    for b in range(buckets):
        run = range(b * len(pts) // buckets, (b + 1) * len(pts) // buckets)
        keep.add(min(run, key=lambda i: pts[i][1]))
        keep.add(max(run, key=lambda i: pts[i][1]))
    return [pts[i] for i in sorted(keep)]


def line_figure(series: dict[str, list[tuple[float, float]]], title: str, x_title: str = "step", y_title: str = "",
                log_y: bool = False, height: int = 320, right: tuple = (), y_format: str = ".3~g",
                right_title: str | None = None):
    """Lines for named series of (x, y) points (long ones thinned to about LINE_POINTS); empty series
    are left out. Series named in ``right`` are read on an axis of their own on the right (a learning
    rate next to tokens/s). ``y_format``: the d3 format of the left axis' labels (".3~s" writes
    thousands as 1.4k)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for i, (name, pts) in enumerate(series.items()):
        if not pts:
            continue
        pts = thin(pts)
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        fig.add_trace(go.Scatter(x=xs, y=ys, name=name, mode="lines+markers" if len(pts) < 40 else "lines",
                                 line={"color": PALETTE[i % len(PALETTE)], "width": 2}, marker={"size": 5},
                                 hovertemplate="%{y:.4g}", yaxis="y2" if name in right else "y"))
    fig = _layout(fig, title, x_title, y_title, log_y and all(y > 0 for s in series.values() for _, y in s), height,
                  automargin=False)
    if fig.layout.yaxis.type != "log":
        fig.update_layout(yaxis_tickformat=y_format)
    if any(series.get(n) for n in right):
        fig.update_layout(margin={"r": 64}, yaxis2={
            "overlaying": "y", "side": "right", "showgrid": False, "tickformat": ".2~e", "automargin": False,
            # one short title (several runs' "run: lr" names ran off the chart in compare mode)
            "title": {"text": right_title or ", ".join(n for n in right if series.get(n))}, "rangemode": "tozero"})
    return fig


def bar_figure(groups: list[str], series: dict[str, list[float | None]], title: str, y_title: str = "",
               fmt=num, height: int = 300):
    """Grouped bars with each bar's value written on it."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for i, (name, vals) in enumerate(series.items()):
        fig.add_trace(go.Bar(x=groups, y=vals, name=name, marker_color=PALETTE[i % len(PALETTE)],
                             text=[fmt(v) for v in vals], textposition="outside", cliponaxis=False,
                             hovertemplate="%{x}: %{y:.4g}<extra>" + escape(name) + "</extra>"))
    fig.update_layout(barmode="group", uniformtext={"minsize": 9, "mode": "show"})
    return _layout(fig, title, "", y_title, False, height)


def histogram_figure(hist: dict, title: str, limit: int | None, limit_label: str, height: int = 260,
                     x_title: str = "tokens", y_title: str = "records",
                     hover: str = "%{customdata} tokens: %{y}"):
    """Counts per bin ({"counts", "edges"}) with a dashed line at ``limit`` (a length cap). The axis
    titles and the hover text (``%{customdata}``: the bin's range, ``%{y}``: its count) are the
    caller's, in the page's language."""
    import plotly.graph_objects as go

    counts, edges = hist["counts"], hist["edges"]
    mids = [(a + b) / 2 for a, b in zip(edges[:-1], edges[1:])]
    widths = [b - a for a, b in zip(edges[:-1], edges[1:])]
    fig = go.Figure(go.Bar(x=mids, y=counts, width=widths, marker_color=PALETTE[0], name=title,
                           customdata=[f"{a:.0f}–{b:.0f}" for a, b in zip(edges[:-1], edges[1:])],
                           hovertemplate=hover + "<extra></extra>"))
    if limit is not None:
        fig.add_vline(x=limit, line_dash="dash", line_color=PALETTE[1],
                      annotation_text=f"{limit_label}={limit}", annotation_position="top left")
        if limit > 2 * edges[-1]:  # far beyond the data: keep the bars readable, say where it is
            fig.update_xaxes(range=[edges[0], edges[-1] * 1.05])
            fig.add_annotation(x=edges[-1], y=max(counts or [1]), text=f"{limit_label}={limit} →", showarrow=False,
                               xanchor="right", font={"color": PALETTE[1]})
    fig.update_layout(showlegend=False, bargap=0.05)
    return _layout(fig, title, x_title, y_title, False, height)


def html_table(columns: list[str], rows: list[list], elem_id: str = "", empty: str = "") -> str:
    """A read-only table; every cell escaped; floats with 4 significant figures."""
    head = "".join(f"<th>{escape(str(c))}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{escape(num(v) if isinstance(v, float) else ('' if v is None else str(v)))}</td>"
                                    for v in r) + "</tr>" for r in rows)
    if not rows and empty:
        body = f'<tr><td colspan="{len(columns)}" class="studio-empty">{escape(empty)}</td></tr>'
    ident = f' id="{escape(elem_id)}"' if elem_id else ""
    return f'<div class="studio-table-wrap"><table{ident} class="studio-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def log_html(text: str, lines: int = 14) -> str:
    """A log's end in a box ``lines`` high that stays at its newest line unless a person scrolled up
    (a column-reverse box keeps its scroll position at the bottom; no script). An HTML box rather
    than a Textbox: replacing a 20 KB Textbox value every tick cost the page ~1 CPU-s a minute."""
    return f"<div class='studio-log' style='height:{lines * 1.4 + 1:.1f}em'><pre>{escape(text)}</pre></div>"


def progress_bar(fraction: float | None, text: str, elem_id: str = "", state: str = "") -> str:
    """A thin progress bar with a caption; an unknown fraction shows the caption only."""
    ident = f' id="{escape(elem_id)}"' if elem_id else ""
    pct = "" if fraction is None else f"{fraction * 100:.0f}%"
    bar = "" if fraction is None else (
        f"<div class='studio-bar'><div style='width:{fraction * 100:.1f}%'></div></div>")
    return (f"<div{ident} class='studio-progress' data-state='{escape(state)}' data-fraction='{'' if fraction is None else f'{fraction:.4f}'}'>"
            f"{bar}<span>{escape(' · '.join(x for x in (pct, text) if x))}</span></div>")
