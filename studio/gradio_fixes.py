"""Every workaround of the studio for Gradio 6.17 (the pinned release), in one place, each with what
it works around and what was measured. Import this module before gradio (studio.app does): the
analytics setting below is read when gradio loads.

- GRADIO_ANALYTICS_CACHE_FREQUENCY: no pandas summary of every event after each event;
- quiet_progress: hidden progress reported on one sink, not on every output;
- mount_tabs_js: every tab shown once, so Tabs stops measuring its overflow;
- tab_label_js: tab labels follow the language switch;
- RAF_GUARD_JS: the loading trackers' elapsed-time loops get a frame a second;
- PLOT_PURGE_JS: dropped Plotly charts are purged, drawn charts fit their boxes;
- LOCALE_JS, GRADIO_WORDS_JS: Gradio's own words (footer, upload box, button titles) follow the
  studio's language, not the browser's;
- EarlyScript: the scripts above run before Gradio's modules load;
- calm_queue: the queue polls every 20 / 100 ms, not every 1 / 10 ms;
- forget_finished_events: Gradio's record of finished events is emptied every minute.
(The timers gated per tab and the live views' single tick are in studio.live.)
"""

from __future__ import annotations

import os

# Gradio 6.17 keeps a record of every event it ever ran and, after each one, rebuilds a pandas
# summary of all of them (GRADIO_ANALYTICS_CACHE_FREQUENCY=1): with a live view ticking 4 times a
# second that was a third of the studio's CPU while a run was watched, and it grew with uptime.
# The summary only feeds Gradio's own monitoring page, which the studio does not use.
os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", str(10**9))

import gradio as gr  # noqa: E402

from studio.locales import LANGS, t  # noqa: E402

def quiet_progress(demo: gr.Blocks, sink) -> None:
    """Events that show no progress report it on ``sink`` (a timer that never ticks) instead of on
    their outputs. Gradio 6.17's page keeps a loading status for every component that was ever an
    event's output (or input: added when an event completes), and each status message of any event
    (3-4 per event) looks each of them up by a walk of the component tree and re-renders it: ~40 %
    of the renderer's script time while a run was watched. The sink, first in the tree, replaces
    the outputs; inputs still count (the Train form's 53 after page load)."""
    for fn in demo.fns.values():
        if fn.show_progress == "hidden" and fn.show_progress_on is None:
            fn.show_progress_on = [sink]


def mount_tabs_js(ctx) -> str:
    """Client code run once the page has loaded: show every tab once (the tab bar hidden meanwhile),
    then the first again. Gradio 6.17's Tabs keeps re-running its overflow measurement (two
    requestAnimationFrame loops, ~1500 callbacks a second, half a core of the renderer on an idle
    page) for as long as one of its tabs has never been shown; once each has been, it stops
    (measured: 1458 -> 52 rAF callbacks a second). A person's own click or key during it ends it
    where they are."""
    import json

    ids = [tab.elem_id for tab, _ in ctx.tab_list]
    return ("async () => { const ids = " + json.dumps(ids) + ";"
            " const tabs = document.getElementById('studio-tabs'); if (!tabs) return;"
            " let acted = false; const mark = (e) => { if (e.isTrusted) acted = true; };"
            " document.addEventListener('pointerdown', mark, true); document.addEventListener('keydown', mark, true);"
            " const first = document.querySelector('#studio-tabs [role=tab][aria-selected=true]');"
            " tabs.style.visibility = 'hidden';"
            " try { for (const id of ids) { if (acted) break; const b = document.getElementById(id + '-button');"
            " if (b && b.getAttribute('aria-selected') !== 'true') { b.click();"
            " await new Promise((r) => setTimeout(r, 200)); } }"
            " if (!acted && first) first.click(); } finally { tabs.style.visibility = '';"
            " document.removeEventListener('pointerdown', mark, true); document.removeEventListener('keydown', mark, true);"
            " window.__studioTabsMounted = true; } }")


def tab_label_js(ctx) -> str:
    """Client code run after each language switch: every tab button gets its label in the new
    language. Gradio 6.17 stops updating a tab's button after some tab selections (seen in
    chromium: tabs not yet visited kept the old language), so the page sets them itself, now and
    whenever the tab bar is re-rendered (a MutationObserver on the bar)."""
    import json

    labels = {lang: {tab.elem_id: t(key, lang) for tab, key in ctx.tab_list} for lang in LANGS}
    return ("(lang) => { if (window.__studioLocale) window.__studioLocale(lang);"
            " window.__studioTabs = " + json.dumps(labels, ensure_ascii=False) + "[lang] || {};"
            " const put = () => { for (const [id, text] of Object.entries(window.__studioTabs)) {"
            " const b = document.getElementById(id + '-button');"
            " if (b && b.textContent.trim() !== text) b.textContent = text; } };"
            " put();"
            # a re-render of the tab bar (Gradio putting back a stale label) is answered at once
            " const first = document.getElementById(Object.keys(window.__studioTabs)[0] + '-button');"
            " const bar = first ? first.parentElement : document.getElementById('studio-tabs');"
            " if (bar && !window.__studioTabsObserver) {"
            " window.__studioTabsObserver = new MutationObserver(put);"
            " window.__studioTabsObserver.observe(bar, {subtree: true, childList: true, characterData: true}); } }")


# Gradio 6.17's StatusTracker counts a pending event's elapsed time in a requestAnimationFrame loop
# (60 callbacks a second, hidden progress or not) that only stops when the tracker sees its status
# leave "pending"; the page's own loading tracker is removed while still pending, so its loop runs
# for as long as the page is open: ~60 frames a second of main-thread, compositor and display work
# on an idle page. Such loops (a short callback that reads performance.now() and calls itself
# again) get a frame a second instead (at 4 a second they still cost an idle page ~0.5 CPU-s a
# minute); the elapsed time a shown tracker prints moves once a second. Installed before Gradio's
# modules load: they keep their own reference to requestAnimationFrame, so a later wrapper
# (Blocks' head=) is never called.
RAF_GUARD_JS = (
    "(() => { const raf = window.requestAnimationFrame.bind(window); const src = Function.prototype.toString;"
    " const elapsed = /^\\(\\)\\s*=>\\s*\\{.*performance\\.now\\(\\).*&&\\s*[\\w$]+\\(\\)\\s*;?\\s*\\}$/s;"
    " window.requestAnimationFrame = function (cb) { let s = ''; try { s = src.call(cb); } catch (e) {}"
    " if (s.length < 160 && elapsed.test(s)) { setTimeout(() => raf(cb), 1000); return 0; } return raf(cb); }; })();"
)


# Gradio 6.17's Plot wraps its Plotly chart in a {#key} block: every new value mounts a fresh chart
# and drops the old one without Plotly.purge, and the old chart's window "resize" listener (its
# config is responsive) keeps its whole tree alive: a watched run leaked ~200 DOM nodes and ~70
# listeners per redraw (found detached in a heap snapshot: 17 whole charts after a minute; the
# page's heap grew ~2.5 MB a minute of watching). Plotly.react (what each new
# chart is drawn with) is wrapped, as Plotly's module sets window.Plotly, to purge the charts it
# drew before that have left the page (a watch of the whole document for removed charts cost more
# than it saved: every node a chart draws is a mutation). The same wrapper fits each chart to its
# box: a chart drawn while its box has no width (a run's view drawn as the page reloads: 3 of 3
# times in chromium) gets Plotly's default 700 px and, with Gradio's responsive config, kept it
# until the window was resized: in a 598 px box the last steps of the curve and the learning-rate
# axis were cut off. A ResizeObserver on every chart it draws resizes the chart when its box's
# width differs from the chart's (when the tab is shown); it fires only when a box changes size.
# A chart is purged only once its own draw has settled: Gradio mounts each new value twice (the
# first chart is dropped within the same task, its Plotly.react still pending), and purging it
# then made the draw's last step read the deleted layout (an uncaught "Cannot read properties of
# undefined (reading '_redrawFromAutoMarginCount')" per dropped chart, 52 over the journey test).
# A chart dropped before its draw settled is purged when it settles.
PLOT_PURGE_JS = (
    "(() => { let plotly; const drawn = new Map();"
    " Object.defineProperty(window, 'Plotly', {configurable: true, get() { return plotly; }, set(v) { plotly = v;"
    " if (!v || typeof v.react !== 'function' || v.__studioPurges) return; const react = v.react; v.__studioPurges = true;"
    " const fit = typeof ResizeObserver === 'function' ? new ResizeObserver((entries) => { for (const e of entries) {"
    " const gd = e.target, w = e.contentRect.width;"
    " if (gd.isConnected && w > 0 && gd._fullLayout && Math.abs(gd._fullLayout.width - w) > 1)"
    " { try { v.Plots.resize(gd); } catch (err) {} } } }) : null;"
    " const drop = (el) => { drawn.delete(el); if (fit) fit.unobserve(el); try { v.purge(el); } catch (e) {} };"
    " v.react = function (gd, ...rest) { for (const [el, busy] of drawn) if (!busy && !el.isConnected) drop(el);"
    " const done = react.call(this, gd, ...rest);"
    " if (gd && gd.nodeType === 1) { drawn.set(gd, true); if (fit) fit.observe(gd);"
    " Promise.resolve(done).finally(() => { if (!drawn.has(gd)) return; if (gd.isConnected) drawn.set(gd, false);"
    " else drop(gd); }); }"
    " return done; }; } }); })();"
)


class EarlyScript:
    """ASGI middleware: puts ``script`` first in the <head> of every HTML page the app serves."""

    def __init__(self, app, script: str):
        self.app, self.tag = app, f"<script>{script}</script>".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD"):
            return await self.app(scope, receive, send)
        start, chunks = None, []

        async def wrapped(message):
            nonlocal start
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers") or [])
                if not headers.get(b"content-type", b"").startswith(b"text/html") or headers.get(b"content-encoding"):
                    start = False
                    return await send(message)
                start = message
                return None
            if message["type"] != "http.response.body" or start is False:
                return await send(message)
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return None
            body = b"".join(chunks).replace(b"<head>", b"<head>" + self.tag, 1)
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, wrapped)


EVENT_LOG_S = 60.0


QUEUE_POLL_S = 0.02  # Gradio 6.17: 0.001


PROGRESS_POLL_S = 0.1  # Gradio 6.17: 0.01


def calm_queue(app: gr.Blocks) -> None:
    """Gradio's queue looks for new events every millisecond and for progress to send every 10 ms
    while nothing happens: ~1,100 wake-ups a second, 2.9 CPU-seconds a minute of the studio's
    event-loop thread with a page open and nothing running (measured per thread). Every 20 ms and
    100 ms instead: an event waits at most 20 ms more to start."""
    q = app._queue
    q.sleep_when_free = QUEUE_POLL_S
    q.progress_update_sleep_when_free = PROGRESS_POLL_S


def forget_finished_events(app: gr.Blocks, every: float = EVENT_LOG_S) -> None:
    """Drop Gradio's records of finished events every ``every`` seconds: it keeps one per event for
    as long as the server lives (a watched run adds ~14,000 an hour), read by nothing of ours."""
    import threading
    import time

    def loop():
        while True:
            time.sleep(every)
            log = getattr(getattr(app, "_queue", None), "event_analytics", None)
            if not isinstance(log, dict):
                return  # another Gradio: nothing to do
            for key, rec in list(log.items()):
                if isinstance(rec, dict) and rec.get("status") in ("success", "failed", "cancelled"):
                    log.pop(key, None)

    threading.Thread(target=loop, name="event-log", daemon=True).start()


# Gradio 6.17's own words (the upload box's "Drop File Here", "Click to Upload", "Use via API", ...)
# come from its svelte-i18n dictionaries in the browser's language (navigator.language), not the
# studio's: a page switched to 中文 in an English browser kept them English. Its client exports
# changeLocale (assets/index-*.js, the app module the page already loaded); this finds it among the
# page's loaded modules and sets Gradio's locale with the studio's language: window.__studioLocale
# ("zh" | "en"), called on page load and after each language switch. Another Gradio (no such export)
# leaves its words as they were.
LOCALE_JS = (
    "window.__studioLocale = async (lang) => { try { if (!window.__studioChangeLocale) {"
    " for (const e of performance.getEntriesByType('resource')) {"
    " if (!/\\/assets\\/index-[\\w-]+\\.js$/.test(e.name)) continue;"
    " try { const m = await import(e.name); if (typeof m.changeLocale === 'function') {"
    " window.__studioChangeLocale = m.changeLocale; break; } } catch (err) {} } }"
    " if (window.__studioChangeLocale) window.__studioChangeLocale(lang === 'zh' ? 'zh-CN' : 'en'); } catch (err) {} };"
)


# Gradio 6.17's upload box draws its words ("Drop File Here", "- or -", "Click to Upload") once, when
# it mounts, and its buttons keep their English titles: changeLocale (LOCALE_JS) reached the footer
# but not them (seen in chromium: the box stayed English after the switch). Those few words are
# swapped in the page while the studio's language is 中文 (Gradio's own zh-CN wording), and back.
GRADIO_WORDS_JS = (
    "(() => { const ZH = {'Drop File Here': '将文件拖放到此处', '- or -': '- 或 -', 'Click to Upload': '点击上传',"
    " 'Clear': '清除', 'Copy message': '复制消息', 'Copy conversation': '复制对话', 'Reset to default value': '恢复默认值',"
    " 'Download': '下载', 'Copy': '复制', 'Click to upload or drop files': '点击上传或拖放文件'};"
    " const EN = Object.fromEntries(Object.entries(ZH).map(([k, v]) => [v, k]));"
    " const zh = () => document.querySelector('#lang-switch input[value=zh]')?.checked === true;"
    " let queued = false;"
    " const fix = () => { queued = false; const map = zh() ? ZH : EN;"
    " for (const or of document.querySelectorAll('.wrap > span.or')) {"
    " const walk = document.createTreeWalker(or.parentElement, NodeFilter.SHOW_TEXT);"
    " for (let n = walk.nextNode(); n; n = walk.nextNode()) { const s = n.nodeValue.trim();"
    " if (map[s]) n.nodeValue = n.nodeValue.replace(s, map[s]); } }"
    " for (const el of document.querySelectorAll('button[title], button[aria-label], [role=button][aria-label]')) {"
    " for (const a of ['title', 'aria-label']) { const v = el.getAttribute(a); if (v && map[v]) el.setAttribute(a, map[v]); } } };"
    " const later = () => { if (!queued) { queued = true; setTimeout(fix, 100); } };"
    " const start = () => { new MutationObserver(later).observe(document.body, {childList: true, subtree: true});"
    " document.addEventListener('change', (e) => { if (e.target.closest && e.target.closest('#lang-switch')) later(); }, true);"
    " later(); };"
    " if (document.body) start(); else document.addEventListener('DOMContentLoaded', start); })();"
)
