"""The page's live machinery: ``Ctx`` (what every tab builder gets: the language switch, texts that
follow it, pickers, per-tab timers), ``View`` (a live view drawn when its probe changes), ``unsent``
(send only what the page does not show) and the one tick event per tab that draws its views; timers
tick only while their tab is shown (``gate_timers``). Tabs import from here, never from studio.app.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import studio.gradio_fixes  # noqa: F401 - before gradio
import gradio as gr  # noqa: E402

from studio.locales import t  # noqa: E402


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
