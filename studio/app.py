"""The studio: builds the Blocks from the tab modules, the zh/en switch, launch (bind/auth rules: studio/bind.py).

Start-up stays light: paddle and paddlenlp are never imported here; tabs import engine
modules whose heavy parts load inside functions, in the handler that needs them.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

import studio.gradio_fixes  # noqa: F401 - before gradio (its analytics setting)
import gradio as gr  # noqa: E402

from core import catalog, system, workspace
from core import demo as demo_ws
from core.cli import os_error_message
from studio.bind import LoginGate, check_bind
from studio.gradio_fixes import (GRADIO_WORDS_JS, LOCALE_JS, PLOT_PURGE_JS, RAF_GUARD_JS, EarlyScript, calm_queue,
                                 forget_finished_events, mount_tabs_js, quiet_progress, tab_label_js)
from studio.live import Ctx, View, gate_timers
from studio.locales import LANGS, progress_text, reason_text, t

ASSETS = Path(__file__).resolve().parents[1] / "assets"
LANG_CHOICES = [("English", "en"), ("中文", "zh")]


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
        what = progress_text({"code": j.get("code"), "params": j.get("params"), "text": j["text"]}, lang) or t(
            "demo.queued", lang)
        return {"value": t("demo.building", lang, id=j["job_id"], pct=pct, what=what), "visible": True}
    if j["state"] == "failed":
        return {"value": t("demo.failed", lang, id=j["job_id"], why=reason_text(j["reason"], lang) or j["state"]),
                "visible": True}
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


def merge_events(events: list) -> tuple:
    """One event (fn, inputs, outputs) doing what ``events`` [(fn, inputs, outputs)] do: the page
    pays per event (each of its status messages walks the component tree), and the language switch
    had one follow-up event per tab. Each input is sent once; a handler that raises leaves its own
    outputs as they are (the others still update). A component may be the output of one of them only."""
    inputs, where = [], {}
    for _, ins, _ in events:
        for c in ins:
            if id(c) not in where:
                where[id(c)] = len(inputs)
                inputs.append(c)
    outputs = [o for _, _, outs in events for o in outs]
    assert len({id(o) for o in outputs}) == len(outputs), "a component is an output of two relocalize events"
    plan = [(fn, [where[id(c)] for c in ins], len(outs)) for fn, ins, outs in events]

    def run(*values):
        out = []
        for fn, at, n in plan:
            try:
                res = fn(*(values[i] for i in at))
                res = list(res) if n > 1 else [res]  # Gradio's rule: one output's value is returned as it is
            except Exception as e:  # noqa: BLE001 - one tab's message must not stop the others'
                sys.stderr.write(f"paddle-studio: relocalizing {getattr(fn, '__qualname__', fn)} failed: {e}\n")
                res = [gr.skip()] * n
            out += res if len(res) == n else [gr.skip()] * n
        return out

    return run, inputs, outputs


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
        fn, inputs, outputs = merge_events(ctx.relocalize)
        ev.then(fn, inputs=inputs, outputs=outputs, show_progress="hidden")
        for fn, inputs, outputs in ctx.on_load:
            demo.load(fn, inputs=inputs, outputs=outputs, show_progress="hidden")
        demo.load(None, inputs=None, outputs=None, js=mount_tabs_js(ctx))
        demo.load(None, inputs=lang_radio, outputs=None, js="(lang) => window.__studioLocale && window.__studioLocale(lang)")
        quiet_progress(demo, progress_sink)
    return demo


WATCH_TICK = 5.0  # the page refreshes its pickers on tab select and after actions too; this only catches the CLI, finishing jobs and the demo banner


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
                    + [Middleware(EarlyScript, script=RAF_GUARD_JS + PLOT_PURGE_JS + LOCALE_JS + GRADIO_WORDS_JS)]},
    )
    return 0
