"""The studio: builds the Blocks from the tab modules, the zh/en switch, launch (bind/auth rules: studio/bind.py).

Start-up stays light: paddle and paddlenlp are never imported here; tabs import engine
modules whose heavy parts load inside functions, in the handler that needs them.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

# Gradio 6.17 keeps a record of every event it ever ran and, after each one, rebuilds a pandas
# summary of all of them (GRADIO_ANALYTICS_CACHE_FREQUENCY=1): with a live view ticking 4 times a
# second that was a third of the studio's CPU while a run was watched, and it grew with uptime.
# The summary only feeds Gradio's own monitoring page, which the studio does not use.
os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", str(10**9))

import gradio as gr  # noqa: E402

from core import catalog, system, workspace
from core import demo as demo_ws
from core.cli import os_error_message
from studio.bind import LoginGate, check_bind
from studio.locales import LANGS, t

ASSETS = Path(__file__).resolve().parents[1] / "assets"
LANG_CHOICES = [("English", "en"), ("中文", "zh")]


@dataclass
class View:
    """A live view of ``Ctx.watch_views``: ``render(*inputs)`` gives the updates of ``outputs``; it
    is drawn when ``probe(*probe_inputs)`` changed, at most once per ``every`` seconds (0: at once)."""

    probe: object
    probe_inputs: list
    render: object
    inputs: list
    outputs: list
    every: float = 0.0


def unsent(out: dict, sent: dict | None) -> dict:
    """Replace by gr.skip() each value of ``out`` equal to what ``sent`` (name -> repr, what the page
    was last sent; None: nothing known) says the page shows; returns the new record. A re-sent value
    re-renders its component (and costs the page a walk of its component tree per property)."""
    sent = dict(sent or {})
    for k, v in out.items():
        if v == gr.skip():
            continue
        key = repr(v)
        if sent.get(k) == key:
            out[k] = gr.skip()
        else:
            sent[k] = key
    return sent


@dataclass
class Ctx:
    """What every tab builder gets: the language control and the translatable components."""

    lang: gr.Radio
    initial_lang: str = "en"
    # (component, update keyword: "label" | "value" | "info", text of a language: lang -> str)
    texts: list = field(default_factory=list)
    # events to re-run after a language switch so messages follow: (fn, inputs, outputs)
    relocalize: list = field(default_factory=list)
    # events to run on every page load, so a reload shows the workspace as it is now
    on_load: list = field(default_factory=list)
    # the gr.Tabs holding every tab (switch with go_to: an update of gr.Tabs from the server resets the
    # tab bar's labels to their build-time language, so later language switches mislabel tabs)
    tabs: gr.Tabs | None = None
    # workspace pickers: (fn, inputs, outputs) refreshed on page load, when their tab is selected
    # and whenever the workspace changes (a dataset, run, model or job appears or finishes)
    pickers: list = field(default_factory=list)
    # every gr.Tab (in order) and the live-view timers with the tab they belong to: a timer ticks
    # only while its tab is shown (13 ticks a second on every tab made the page crawl on 2 cores)
    tab_list: list = field(default_factory=list)
    timers: list = field(default_factory=list)
    # the Train form, for tabs that fill it in: (run name box, [(section, field)], widgets)
    train_form: tuple | None = None
    # live views by the tab they belong to (None: ungated): tab id -> [timer, seen State, views]; each
    # tab gets one timer and one tick event for all its views (see wire_watches)
    watches: dict = field(default_factory=dict)

    def picker(self, tab, fn, inputs, outputs):
        """Register ``fn(*inputs) -> updates of outputs`` as the refresh of some workspace choices."""
        self.pickers.append((fn, list(inputs), list(outputs)))
        tab.select(fn, inputs=list(inputs), outputs=list(outputs), show_progress="hidden")

    @staticmethod
    def go_to(event, tab_id: str, when) -> None:
        """After ``event``, select tab ``tab_id`` in the page when the component ``when`` holds a value
        (a click on the tab's own button, as a person would: its select events run too). The click
        waits 0.6 s: selecting a tab while the event's follow-up updates are still arriving left the
        later tabs' labels deaf to the next language switch (Gradio 6.17, seen in chromium)."""
        event.then(None, inputs=[when], outputs=None,
                   js=f"(v) => {{ if (v) setTimeout(() => document.getElementById('tab-{tab_id}-button')?.click(), 600); }}")

    def tr(self, component, key: str, attr: str = "label", fmt: str = "{}"):
        """Register ``component`` so its ``attr`` follows the language switch; returns it. A gr.Tab
        registered here becomes the tab that later timers (``live``) belong to."""
        self.texts.append((component, attr, lambda lang: fmt.format(t(key, lang))))
        if isinstance(component, gr.Tab):
            self.tab_list.append((component, key))
        return component

    def live(self, seconds: float, gated: bool = True) -> gr.Timer:
        """A timer of the tab being built, ticking only while that tab is shown (``gated``)."""
        timer = gr.Timer(seconds, active=not gated)
        if gated:
            self.timers.append((self.tab_list[-1][0] if self.tab_list else None, timer))
        return timer

    def watch_parts(self, seconds: float, gated: bool = True):
        """The timer and State of the tab being built (``gated``; else of the page), shared by all its
        ``watch``es; made at the first call, so call this inside the gr.Tab (a component directly
        under gr.Tabs breaks the tab bar). The timer ticks as often as its most eager watch asks."""
        owner = (self.tab_list[-1][0] if self.tab_list else None) if gated else None
        key = id(owner) if owner is not None else None
        if key not in self.watches:
            self.watches[key] = [self.live(seconds, gated), gr.State(None), []]
        timer = self.watches[key][0]
        timer.value = min(timer.value, seconds)
        return timer, self.watches[key][1]

    def watch(self, seconds: float, probe, probe_inputs, render, inputs, outputs, gated: bool = True, parts=None):
        """One live view: ``watch_views`` with a single ``View``."""
        return self.watch_views(seconds, [View(probe, probe_inputs, render, inputs, outputs)], gated, parts)

    def watch_views(self, seconds: float, views: list, gated: bool = True, parts=None):
        """Watch ``views`` every ``seconds`` (or more often, sharing their tab's timer: such a view is
        then drawn at most every ``seconds``). Each view's ``probe(*probe_inputs)`` gives a cheap
        signature; only when it (or the language) differs from that of what was last drawn of the
        view does its ``render(*inputs)`` compute the updates of its outputs (skipped otherwise).
        Registered by ``wire_watches`` once the page is built."""
        timer, seen = parts or self.watch_parts(seconds, gated)
        group = next(g for g in self.watches.values() if g[0] is timer)
        group[2] += [(v, seconds) for v in views]
        return seen

    def wire_watches(self, also: list = ()):
        """One tick event per timer for all the views of its tab, and ``also`` (the pickers') joined
        to each: every event costs the page a walk of its loading statuses per status message,
        whatever it updates (one event a tick on the Runs tab instead of two or three timers'
        events). Each view is drawn when its probe's signature or the language differs from that of
        what this event last drew of it (in the same event, which records the signatures drawn),
        and a view with ``every`` at most that often (a change in between waits for a later tick).
        So a view is never left stale: a render that failed, or that landed after a newer one from
        another event (a language switch, a follow-up of Start), leaves a signature that differs
        from the probe's, and the next tick draws again. (Watching with a second event on a State's
        change left a view stale for good when that happened: the State already held the probe's
        signature, so no later tick fired a change.)"""
        for key, (timer, seen, asked) in self.watches.items():
            views = [v if v.every or secs <= timer.value else dataclasses.replace(v, every=secs) for v, secs in asked]
            views += also if isinstance(key, int) else []
            outputs = [o for v in views for o in v.outputs]
            assert len({id(o) for o in outputs}) == len(outputs), "a component is an output of two views of one tab"
            # each input once: the page looks up every input of an event twice per event (a walk of
            # the component tree each), so the views' shared inputs (the pick, the language) cost once
            inputs, where = [seen, self.lang], {id(seen): 0, id(self.lang): 1}
            for c in (c for v in views for c in (*v.probe_inputs, *v.inputs)):
                if id(c) not in where:
                    where[id(c)] = len(inputs)
                    inputs.append(c)
            at = [([where[id(c)] for c in v.probe_inputs], [where[id(c)] for c in v.inputs]) for v in views]
            # outside the queue (a plain POST, answered at once): the page handles three status
            # messages per event instead of five (queued, estimated, started, done), and at each one
            # Gradio re-renders the loading status of every component any event of the page has
            # touched, finding each by a walk of the whole component tree. Chromium watching a run:
            # -10 to -15 % CPU, both pages watching one run side by side (bench/watch_ab.py). A
            # tick is short and never overlaps itself (the page skips a tick while one is pending).
            timer.tick(_tick_render(views, at), inputs=inputs, outputs=[seen, *outputs],
                       show_progress="hidden", concurrency_limit=None, queue=False)

    def watched_tabs(self) -> set:
        """The ids of the tabs that have a live view (and a timer of their own)."""
        return {k for k in self.watches if isinstance(k, int)}

    def tr_fn(self, component, attr: str, text_of):
        """Like tr, with the text computed by ``text_of(lang)``."""
        self.texts.append((component, attr, text_of))
        return component

    def heading(self, key: str):
        """A section heading that follows the language switch."""
        return self.tr(gr.Markdown("### " + self.text(key)), key, "value", "### {}")

    def text(self, key: str) -> str:
        return t(key, self.initial_lang)


def _tick_render(views: list, at: list):
    """The tick of ``Ctx.wire_watches``: (signatures drawn, *updates) from (signatures drawn, lang,
    *the views' inputs, each once); ``at``: per view, the positions of its probe inputs and inputs
    among those values (counted from the signatures')."""
    outputs = sum(len(v.outputs) for v in views)

    def tick_render(old, lang, *values):
        now = time.monotonic()
        values = (old, lang, *values)
        if not (isinstance(old, list) and len(old) == len(views)):
            old = [None] * len(views)
        drawn, updates = [], []
        for v, was, (probe_at, render_at) in zip(views, old, at):
            key = [v.probe(*(values[i] for i in probe_at)), lang]
            fresh = was is not None and key == was[:2]
            # (ticks come a little early or late: 0.9 keeps a 6 s view on a 2 s timer at 6 s, not 8)
            held = was is not None and v.every and len(was) > 2 and now - was[2] < 0.9 * v.every
            if fresh or held:
                drawn.append(was)
                updates += [gr.skip()] * len(v.outputs)
            else:
                drawn.append([*key, now] if v.every else key)
                updates += list(v.render(*(values[i] for i in render_at)))
        if drawn == old:
            return [gr.skip()] * (outputs + 1)
        return [drawn, *updates]

    return tick_render


def _demo_signature() -> tuple:
    p = demo_ws.progress()
    j = p["job"] or {}
    return p["ready"], j.get("job_id"), j.get("state"), j.get("fraction"), j.get("text"), (j.get("finished_ago_s") or 0) < 90


def demo_banner(lang: str) -> dict:
    """What the page says about the demo workspace while it is being built (or failed, or just
    finished); hidden otherwise."""
    p = demo_ws.progress()
    j = p["job"]
    if not j:
        return {"value": "", "visible": False}
    if p["ready"]:
        fresh = j["state"] == "succeeded" and (j.get("finished_ago_s") or 1e9) < 90
        return {"value": t("demo.ready_now", lang), "visible": fresh}
    if j["state"] in ("queued", "running"):
        pct = "…" if j["fraction"] is None else f"{100 * j['fraction']:.0f} %"
        what = j["text"] or t("demo.queued", lang)
        return {"value": t("demo.building", lang, id=j["job_id"], pct=pct, what=what), "visible": True}
    if j["state"] == "failed":
        return {"value": t("demo.failed", lang, id=j["job_id"], why=j["reason"] or j["state"]), "visible": True}
    return {"value": "", "visible": False}


LOAD_EVERY = 5.0  # the header's machine load: sampled at most this often, whoever asks
_load: list = [0.0, None]  # (when, core.train.monitor.machine_now()) shared by the probe and the render


def _machine() -> dict:
    now = time.monotonic()
    if _load[1] is None or now - _load[0] >= LOAD_EVERY - 0.5:
        from core.train import monitor

        _load[:] = [now, monitor.machine_now(workspace.home() if workspace.home().exists() else "/")]
    return _load[1]


def _load_signature() -> tuple:
    m = _machine()
    return (round(m["cpu"]), round(m["mem_used_mib"] / 100), round(m.get("disk_free_mib", 0) / 1024),
            tuple((g["gpu"], round(g["mem_used_mib"] / 100), round(g["util"])) for g in m.get("gpus", [])))


def machine_load(lang: str) -> str:
    """The machine at a glance for the page header: CPU, memory, free disk of the workspace, GPUs."""
    from studio.charts import num

    m = _machine()
    gpu = "".join(t("app.load_gpu", lang, i=g["gpu"], used=num(g["mem_used_mib"] / 1024, 3),
                    total=num(g["mem_total_mib"] / 1024, 3), util=num(g["util"], 3)) for g in m.get("gpus", []))
    text = t("app.load", lang, cpu=num(float(m["cpu"]), 3), cores=m["cores"], used=num(m["mem_used_mib"] / 1024, 3),
             total=num(m["mem_total_mib"] / 1024, 3), disk=num((m.get("disk_free_mib") or 0) / 1024, 3)) + gpu
    return (f"<span id='machine-load' data-cpu='{m['cpu']}' data-mem-used-mib='{m['mem_used_mib']}' "
            f"data-mem-total-mib='{m['mem_total_mib']}'>{text}</span>")


def _header(lang: str) -> str:
    info = system.info()
    missing = t("app.not_installed", lang)
    device = t("device.gpu", lang, names=", ".join(info["gpus"])) if info["gpus"] else t("device.cpu", lang)
    return (
        f"## {t('app.title', lang)}\n{t('app.subtitle', lang)}  \n"
        f"<span id='studio-versions'>{t('app.versions', lang, paddle=info['paddle'] or missing, paddlenlp=info['paddlenlp'] or missing, device=device)}"
        f" · {t('app.workspace', lang, path=workspace.home())}</span>"
    )


def build_app(lang: str = "en") -> gr.Blocks:
    from studio.tabs.chat import build_chat_tab
    from studio.tabs.cluster import build_cluster_tab
    from studio.tabs.dataset import build_dataset_tab
    from studio.tabs.evaluate import build_evaluate_tab
    from studio.tabs.export import build_export_tab
    from studio.tabs.jobs import build_jobs_tab
    from studio.tabs.merge import build_merge_tab
    from studio.tabs.models import build_models_tab
    from studio.tabs.quantize import build_quantize_tab
    from studio.tabs.runs import build_runs_tab
    from studio.tabs.train import build_train_tab

    with gr.Blocks(title=t("app.title", lang)) as demo:
        progress_sink = gr.Timer(3600, active=False)  # first in the page: found at once (see quiet_progress)
        with gr.Row():
            header = gr.Markdown(_header(lang), elem_id="studio-header")
            lang_radio = gr.Radio(
                LANG_CHOICES, value=lang, label=t("app.language", lang), scale=0, min_width=220, elem_id="lang-switch"
            )
        ctx = Ctx(lang=lang_radio, initial_lang=lang)
        ctx.tr(lang_radio, "app.language")
        load_line = gr.HTML(machine_load(lang), elem_id="machine-load-box")
        demo_line = gr.Markdown(**demo_banner(lang), elem_id="demo-banner")
        # refreshed with the pickers (one timer for both: every tick of any event costs the page a
        # walk of its loading statuses), on page load and after a language switch
        ctx.pickers.append((lambda lg: gr.update(**demo_banner(lg)), [lang_radio], [demo_line]))
        ctx.relocalize.append((lambda lg: gr.update(**demo_banner(lg)), [lang_radio], [demo_line]))
        with gr.Tabs(elem_id="studio-tabs") as ctx.tabs:
            build_dataset_tab(ctx)
            build_models_tab(ctx)
            started = build_train_tab(ctx)
            build_runs_tab(ctx, started)
            build_cluster_tab(ctx)
            build_merge_tab(ctx)
            build_evaluate_tab(ctx)
            chat_model = build_chat_tab(ctx)
            build_quantize_tab(ctx, chat_model)
            build_export_tab(ctx, chat_model)
            build_jobs_tab(ctx)
        ctx.relocalize.append((machine_load, [lang_radio], [load_line]))
        watch_pickers(ctx, [View(_load_signature, [], lambda lg: [machine_load(lg)], [lang_radio], [load_line],
                                 every=LOAD_EVERY)])
        gate_timers(ctx)

        comps = [c for c, _, _ in ctx.texts]

        def switch(new_lang):
            updates = [gr.update(value=_header(new_lang))]
            for _, attr, text_of in ctx.texts:
                updates.append(gr.update(**{attr: text_of(new_lang)}))
            return updates

        ev = lang_radio.change(switch, inputs=lang_radio, outputs=[header, *comps])
        ev.then(None, inputs=lang_radio, outputs=None, js=tab_label_js(ctx))
        for fn, inputs, outputs in ctx.relocalize:
            ev.then(fn, inputs=inputs, outputs=outputs, show_progress="hidden")
        for fn, inputs, outputs in ctx.on_load:
            demo.load(fn, inputs=inputs, outputs=outputs, show_progress="hidden")
        demo.load(None, inputs=None, outputs=None, js=mount_tabs_js(ctx))
        quiet_progress(demo, progress_sink)
    return demo


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


def mount_tabs_js(ctx: Ctx) -> str:
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


WATCH_TICK = 5.0  # the page refreshes its pickers on tab select and after actions too; this only catches the CLI, finishing jobs and the demo banner


def gate_timers(ctx: Ctx) -> None:
    """Selecting a tab starts its timers and stops every other tab's (the page starts on the first tab).
    Done in the page, not on the server (the server answered selections in the order it happened to
    queue them, and under load left the shown tab's timers off). Each selection sets the timers of
    the tab the page *shows* when its code runs, not of the tab it was fired for: quick selections
    (a person's click during the page's first pass over the tabs) were seen to leave the Jobs tab's
    timers on under the Quantize tab, whose job view then never moved. ``window.__studioLive``
    names the tab whose timers are on. The pickers' own timer belongs to every tab without a live
    view (the others watch the pickers in their own tick)."""
    import json

    if not ctx.timers:
        return
    outputs = [timer for _, timer in ctx.timers]
    owners = json.dumps([[o.elem_id for o in (owner if isinstance(owner, list) else [owner]) if o is not None]
                         for owner, _ in ctx.timers])
    for tab, _ in ctx.tab_list:
        tab.select(None, inputs=None, outputs=outputs, show_progress="hidden", js=(
            "async () => { await new Promise((r) => setTimeout(r, 0));"
            " const b = document.querySelector('#studio-tabs [role=tab][aria-selected=true]');"
            f" const shown = b && b.id.endsWith('-button') ? b.id.slice(0, -7) : {json.dumps(tab.elem_id)};"
            " window.__studioLive = shown;"
            f" return {owners}.map((o) => ({{__type__: 'update', active: o.includes(shown)}})); }}"))


def tab_label_js(ctx: Ctx) -> str:
    """Client code run after each language switch: every tab button gets its label in the new
    language. Gradio 6.17 stops updating a tab's button after some tab selections (seen in
    chromium: tabs not yet visited kept the old language), so the page sets them itself, now and
    whenever the tab bar is re-rendered (a MutationObserver on the bar)."""
    import json

    labels = {lang: {tab.elem_id: t(key, lang) for tab, key in ctx.tab_list} for lang in LANGS}
    return ("(lang) => { window.__studioTabs = " + json.dumps(labels, ensure_ascii=False) + "[lang] || {};"
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


def watch_pickers(ctx: Ctx, page_views: list = ()) -> None:
    """One probe per page compares the workspace's signature and, when it changed, refreshes every
    picker (so what one tab, the CLI or a finishing job creates is offered everywhere at once).
    ``page_views`` (the header's machine load) are watched in the same tick events, on every tab."""
    inputs, seen = [], set()
    for _, ins, _ in ctx.pickers:
        for c in ins:
            if id(c) not in seen:
                seen.add(id(c))
                inputs.append(c)
    outputs = [o for _, _, outs in ctx.pickers for o in outs]
    sent = gr.State(None)  # what each output was last sent

    def refresh(last, *values, force=False):
        # Only an output whose update differs goes to the page: re-sending the same choices every
        # time a job writes its progress reset a dropdown a person was typing into.
        by_id = {id(c): v for c, v in zip(inputs, values)}
        fresh = []
        for fn, ins, outs in ctx.pickers:
            res = fn(*(by_id[id(c)] for c in ins))
            fresh += list(res) if isinstance(res, (list, tuple)) else [res]
        keys = [repr(u) for u in fresh]
        if force or not isinstance(last, list) or len(last) != len(keys):
            return [keys, *fresh]
        return [keys, *(gr.skip() if k == s_ else u for u, k, s_ in zip(fresh, keys, last))]

    view = View(lambda: (catalog.signature(), _demo_signature()), [], refresh, [sent, *inputs], [sent, *outputs],
                every=WATCH_TICK)
    # a tab with live views of its own watches the pickers in the same tick event (one event a tick
    # is what the page pays for); the other tabs share a timer of the pickers alone
    bare = [tab for tab, _ in ctx.tab_list if id(tab) not in ctx.watched_tabs()]
    timer = gr.Timer(WATCH_TICK, active=bool(ctx.tab_list) and ctx.tab_list[0][0] in bare)
    ctx.timers.append((bare, timer))
    ctx.watches["pickers"] = [timer, gr.State(None), [(dataclasses.replace(view, every=0.0), WATCH_TICK),
                                                      *((v, v.every) for v in page_views)]]
    ctx.wire_watches(also=[view, *page_views])
    ctx.on_load.append((lambda last, *v: refresh(last, *v, force=True), [sent, *inputs], [sent, *outputs]))


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
PLOT_PURGE_JS = (
    "(() => { let plotly; const drawn = new Set();"
    " Object.defineProperty(window, 'Plotly', {configurable: true, get() { return plotly; }, set(v) { plotly = v;"
    " if (!v || typeof v.react !== 'function' || v.__studioPurges) return; const react = v.react; v.__studioPurges = true;"
    " const fit = typeof ResizeObserver === 'function' ? new ResizeObserver((entries) => { for (const e of entries) {"
    " const gd = e.target, w = e.contentRect.width;"
    " if (gd.isConnected && w > 0 && gd._fullLayout && Math.abs(gd._fullLayout.width - w) > 1)"
    " { try { v.Plots.resize(gd); } catch (err) {} } } }) : null;"
    " v.react = function (gd, ...rest) { for (const el of drawn) if (!el.isConnected) {"
    " drawn.delete(el); if (fit) fit.unobserve(el); try { v.purge(el); } catch (e) {} }"
    " if (gd && gd.nodeType === 1) { drawn.add(gd); if (fit) fit.observe(gd); }"
    " return react.call(this, gd, ...rest); }; } }); })();"
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


def port_in_use(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on (in use, no such address), or None when it can."""
    import socket

    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as e:
        return e.strerror or str(e)
    return None


RECONCILE_S = 10.0


def start_demo() -> None:
    """Build the demo workspace as a job when it is incomplete; the page opens meanwhile and says
    how far the job got."""
    try:
        job = demo_ws.ensure()
    except (OSError, ValueError) as e:
        sys.stderr.write(f"paddle-studio: could not start building the demo workspace: {e}\n")
        return
    if job:
        sys.stderr.write(f"paddle-studio: building the demo workspace as job {job} (the page shows its progress)\n")


WARM_S = 2.0
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


class Reconciler:
    """One look at the workspace per call of ``step`` (keep_reconciling's loop): every run's and
    job's status every ``every`` seconds, the warm spare each time. A failure is logged once until
    it changes or goes away: a read-only workspace fails the same way every few seconds."""

    def __init__(self, every: float):
        self.every, self.last, self.said = every, 0.0, None

    def step(self) -> None:
        try:
            if time.monotonic() - self.last >= self.every:
                self.last = time.monotonic()
                catalog.reconcile()
            catalog.keep_warm()
            if self.said is not None:
                sys.stderr.write("paddle-studio: reconciling the workspace works again\n")
                self.said = None
        except Exception as e:  # noqa: BLE001 - a bad file must not end the loop; said in the log, once
            text = os_error_message(e) if isinstance(e, OSError) else str(e)
            if text != self.said:
                sys.stderr.write(f"paddle-studio: reconciling the workspace failed: {text} "
                                 "(said once; retried every few seconds)\n")
                self.said = text


def keep_reconciling(every: float = RECONCILE_S) -> None:
    """While the studio runs, read every run's and job's status every ``every`` seconds, page open
    or not: a read settles a run or job whose supervisor vanished (its processes ended, the run
    queued behind it started), so nothing waits for somebody to look."""
    import threading

    def loop():
        # the first look comes soon (it also starts the warm spare for the first run), but not
        # during the studio's own start-up; the spare is looked after every WARM_S (a run that
        # just ended leaves none), the rest every ``every`` seconds
        time.sleep(min(3.0, every))
        r = Reconciler(every)
        while True:
            r.step()
            time.sleep(min(WARM_S, every))

    threading.Thread(target=loop, name="reconcile", daemon=True).start()


def main(host: str = "127.0.0.1", port: int = 7860, auth: str | None = None, lang: str = "en", demo: bool = False) -> int:
    os.environ.pop("PADDLE_STUDIO_AUTH", None)  # the login secret: no child process (spare, run, job) inherits it
    try:
        pair = check_bind(host, auth)
    except ValueError as e:
        sys.stderr.write(f"paddle-studio: {e}\n")
        return 2
    if lang not in LANGS:
        lang = "en"
    busy = port_in_use(host, port)
    if busy:
        sys.stderr.write(f"paddle-studio: cannot listen on {host}:{port}: {busy}; pick another port with --port\n")
        return 2
    workspace.home().mkdir(parents=True, exist_ok=True)
    if demo:
        start_demo()
    keep_reconciling()
    from starlette.middleware import Middleware

    app = build_app(lang)
    app.queue(default_concurrency_limit=4)
    calm_queue(app)
    forget_finished_events(app)
    app.launch(
        server_name=host,
        server_port=port,
        auth=pair,
        show_error=True,
        footer_links=["api"],
        css_paths=[ASSETS / "studio.css"],
        allowed_paths=[str(workspace.home())],
        quiet=False,
        ssr_mode=False,
        # with auth, the gate (studio/bind.py) comes first: before login only the login page answers
        app_kwargs={"middleware": [Middleware(LoginGate)] * (pair is not None)
                    + [Middleware(EarlyScript, script=RAF_GUARD_JS + PLOT_PURGE_JS)]},
    )
    return 0
