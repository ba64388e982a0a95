"""Quantities as a person reads them, in the page's language: ``duration(75, "zh")`` is "1 分 15 秒",
``duration(75, "en")`` "1 min 15 s". (studio.charts.duration, English only, is to fold into this.)"""

from __future__ import annotations

_UNITS = {"en": ("s", "min", "h"), "zh": ("秒", "分", "小时")}


def duration(seconds, lang: str = "en") -> str:
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
