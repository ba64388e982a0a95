"""Runs tab: every run with its status; one run's live log, loss/eval-loss curves, progress, ETA,
Stop / Resume / Continue, config and command; a second run overlaid with a config diff.

Everything shown is read from the run directories, so a reload, a second browser or a studio
restart shows the same thing. A probe every 2 s (TICK) looks at the run's file sizes and pushes an
update only when something changed (new metrics lines, a new status, log growth); otherwise
it sends nothing.
"""

from __future__ import annotations

import json
import time
from html import escape

import gradio as gr

from core.train import cluster, control, monitor, runs
from studio.live import View, unsent
from studio.charts import html_table, line_figure, log_html, num
from studio.locales import reason_text, refusal, t

TICK = 2.0
FIGURE_EVERY = 6.0  # seconds between two redraws of a training run's loss chart, twice that for its second chart
LIST_TICK = 6.0


def runs_table(lang: str) -> str:
    cols = ["run", "state", "method", "step", "loss", "eval_loss", "created"]
    rows = []
    for r in runs.list_runs():
        p = r["progress"]
        rows.append([
            r["run_id"], t(f"state.{r['status'].get('state', 'queued')}", lang), r.get("method") or "",
            f"{p['step']}/{p['max_steps']}", num(p["loss"]), num(p["eval_loss"]),
            (r.get("created") or "").replace("T", " ").replace("+00:00", " UTC"),
        ])
    return html_table([t(f"runs.col_{c}", lang) for c in cols], rows, empty=t("runs.none", lang), elem_id="runs-table")


def list_signature() -> tuple:
    """Changes whenever a run appears or any run's status or metrics change."""
    sig = []
    for d in runs.run_dirs():
        for f in ("status.json", "metrics.jsonl"):
            try:
                st = (d / f).stat()
                sig.append((d.name, f, st.st_mtime_ns, st.st_size))
            except OSError:
                sig.append((d.name, f, None))
    return tuple(sig)


def table_and_signature(lang: str) -> tuple[str, tuple]:
    """The table with the signature taken *before* it is read: a change in between shows up on the next tick
    (read after, a status written in between would leave the table stale for good)."""
    sig = list_signature()
    return runs_table(lang), sig


def run_ids() -> list[str]:
    return [d.name for d in runs.run_dirs()]


def current(records: list[dict]) -> list[dict]:
    """The records of the run's present history: a launch that resumed from step s (its train_begin
    record) replaces what earlier launches logged after s, so a resumed run draws one line (not one
    that jumps back) and counts each step once."""
    out: list[dict] = []
    for r in records:
        if r.get("event") == "train_begin" and isinstance(r.get("step"), (int, float)):
            out = [x for x in out if not isinstance(x.get("step"), (int, float)) or x["step"] <= r["step"]]
        out.append(r)
    return out


def curve_figures(series: dict[str, list[dict]], lang: str, log_y: bool):
    """(loss and eval-loss figure, tokens/s and learning-rate figure) — one line per run and metric."""
    series = {k: current(v) for k, v in series.items()}
    loss, speed = {}, {}
    dpo = any(r.get("rewards/margins") is not None for records in series.values() for r in records)
    for prefix, records in series.items():
        for key in ("loss", "eval_loss"):
            loss[f"{prefix}{key}"] = [(r["step"], r[key]) for r in records if r.get(key) is not None]
        if dpo:  # a DPO or KTO run: its rewards instead of speed (the speed is in the progress line)
            for key in DPO_CURVES:
                speed[f"{prefix}{key}"] = [(r["step"], r[key]) for r in records if r.get(key) is not None]
            continue
        speed[f"{prefix}tokens/s"] = [(r["step"], r["tokens_per_sec"]) for r in records if r.get("tokens_per_sec")]
        speed[f"{prefix}lr"] = [(r["step"], r["lr"]) for r in records if r.get("lr") is not None]
    right = tuple(k for k in speed if k.endswith("lr"))
    if lang != "en":  # the series' names in the page's language (English keeps the metric keys)
        def named(d):
            return {_series_name(k, lang): v for k, v in d.items()}
        loss, speed, right = named(loss), named(speed), tuple(_series_name(k, lang) for k in right)
    step = t("runs.col_step", lang) if lang != "en" else "step"
    return (line_figure(loss, t("runs.curve", lang), step, t("runs.col_loss", lang) if lang != "en" else "loss",
                        log_y=log_y),
            line_figure(speed, t("runs.rewards" if dpo else "runs.speed", lang), step, "" if dpo else "tokens/s",
                        right=right, y_format=".3~g" if dpo else ".3~s",
                        right_title=t("runs.s_lr", lang) if lang != "en" else "lr"))


def _series_name(key: str, lang: str) -> str:
    """``[prefix]metric`` with the metric said in ``lang`` (loss, eval_loss, lr; tokens/s stays)."""
    for metric, k in (("eval_loss", "runs.col_eval_loss"), ("loss", "runs.col_loss"), ("lr", "runs.s_lr")):
        if key.endswith(metric) and (key == metric or not key[: -len(metric)].endswith("_")):
            return key[: -len(metric)] + t(k, lang)
    return key


# DPO's and KTO's (KTO logs no accuracy; its kl is the reference point of its loss)
DPO_CURVES = ("rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies", "eval_rewards/margins",
              "eval_rewards/accuracies", "kl", "eval_kl")


def curve_caption(run_id: str, records: list[dict], lang: str) -> str:
    """What the curve shows, in words, carrying the counts as data attributes (tests and benches read them)."""
    records = current(records)
    n = sum(1 for r in records if r.get("loss") is not None)
    ne = sum(1 for r in records if r.get("eval_loss") is not None)
    return (f"<div id='run-curve' data-run='{escape(run_id)}' data-points='{n}' data-eval-points='{ne}'>"
            f"{escape(t('runs.curve_caption', lang, n=n, e=ne))}</div>")


def progress_html(st: dict, p: dict, lang: str) -> str:
    frac = min(p["step"] / p["max_steps"], 1.0) if p.get("max_steps") else 0.0
    if st.get("state") == "succeeded":
        frac = 1.0
    eta = ""
    if st.get("state") == "running" and p.get("eta") is not None:
        eta = t("runs.eta", lang, s=int(round(p["eta"])))
    return (
        f"<div id='run-progress' data-step='{p['step']}' data-max='{p['max_steps']}'>"
        f"<div style='background:#ddd;border-radius:4px;height:14px'><div style='width:{frac * 100:.1f}%;"
        f"background:#4e79a7;height:14px;border-radius:4px'></div></div>"
        f"<span>{t('runs.progress', lang, step=p['step'], max=p['max_steps'], pct=f'{frac * 100:.0f}')} {eta}</span></div>"
    )


def status_markdown(run_id: str, st: dict, p: dict, lang: str) -> str:
    state = st.get("state", "queued")
    parts = [f"**{run_id}** — <span id='run-state'>{t(f'state.{state}', lang)}</span>"]
    if p.get("loss") is not None:
        parts.append(t("runs.last_loss", lang, loss=num(p['loss'])))
    elif state == "running":
        parts.append(t(f"runs.startup.{runs.startup(run_id)}", lang))
    if p.get("eval_loss") is not None:
        parts.append(t("runs.last_eval", lang, loss=num(p['eval_loss'])))
    if st.get("reason") and state != "succeeded":
        parts.append(t("runs.reason", lang, reason=reason_text(st["reason"], lang)))
    if st.get("exit_code") is not None:
        parts.append(t("runs.exit_code", lang, code=st["exit_code"]))
    line = verify_markdown(run_id, lang)
    return " · ".join(parts) + (f"\n\n{line}" if line else "")


def verify_markdown(run_id: str, lang: str) -> str:
    """The round-trip verdict of what the run saved (core.train.verify), green or red."""
    from core.train import verify

    try:
        s = verify.summary(verify.read(runs.run_dir(run_id)))
    except (FileNotFoundError, ValueError):
        return ""
    if not s or s.get("state") in (None, "none"):
        return ""
    state = s["state"]
    if state in ("verified", "failed") and s.get("reloaded_eval_loss") is not None:
        text = t(f"runs.verify.{state}", lang, got=num(s["reloaded_eval_loss"]), want=num(s["training_eval_loss"]),
                 step=s.get("step"), target=s.get("target"))
        if state == "failed" and s.get("reason") and "tokenize" in s["reason"]:
            text += f" — {escape(reason_text(s['reason'], lang))}"
    else:
        key = {"failed": "failed_reason"}.get(state, state if state in ("running", "error", "no_reference") else "error")
        text = t(f"runs.verify.{key}", lang, reason=escape(reason_text(s.get("reason"), lang)))
    colour = {"verified": "#2e7d32", "running": "#666"}.get(state, "#c62828")
    return f"<span id='run-verify' data-state='{state}' style='color:{colour}'>{text}</span>"


def config_diff(a: str, b: str, lang: str) -> str:
    """Keys whose values differ between two runs' PaddleNLP argument JSON."""
    ca = runs.read_json(runs.run_dir(a) / "config.json", {}) or {}
    cb = runs.read_json(runs.run_dir(b) / "config.json", {}) or {}
    rows = []
    for k in sorted(set(ca) | set(cb)):
        if k in ("output_dir", "logging_dir"):
            continue
        if ca.get(k) != cb.get(k):
            rows.append([k, json.dumps(ca.get(k), ensure_ascii=False), json.dumps(cb.get(k), ensure_ascii=False)])
    return html_table([t("runs.col_key", lang), a, b], rows, elem_id="run-diff-table", empty=t("runs.no_diff", lang))


def nodes_html(rows: list[dict], lang: str) -> str:
    """A run's machines, one row each: state, step, memory, last log line (a manual node's command
    to paste under its row); "" for a one-machine run."""
    if not rows:
        return ""
    cols = [t(f"runs.node_col_{c}", lang) for c in ("node", "ranks", "state", "step", "memory", "line")]
    body = []
    for r in rows:
        state = r.get("state") or "-"
        body.append([r["label"], ",".join(map(str, r["ranks"])), t(f"state.{state}", lang) if state in STATES else
                     t(f"runs.node_state_{state}", lang), r["step"] if r["step"] is not None else "-",
                     f"{r['rss'] / 2**20:.0f} MiB" if r.get("rss") else "-", r.get("last_line") or ""])
    out = html_table(cols, body, elem_id="run-nodes-table")
    for r in rows:
        if r.get("command"):
            out += (f"<p>{escape(t('runs.node_paste', lang, node=r['node']))}</p>"
                    f"<pre class='run-node-command'>{escape(r['command'])}</pre>")
    return out


STATES = ("queued", "running", "succeeded", "failed", "stopped")


def doctor_markdown(res: dict, lang: str) -> str:
    lines = [t("runs.doctor_head", lang, n=len(res["ranks"]))]
    for r, v in res["ranks"].items():
        lines.append(f"- **rank {r}** ({v['node']}): {escape(v['where'])}")
    return "\n".join(lines)


def _size(f) -> int | None:
    try:
        return f.stat().st_size
    except OSError:
        return None


def _signature(d) -> list:
    sig = []
    for f in ("status.json", "log/workerlog.0", "launcher.log", "studio.json", "startup.jsonl", "verify.json",
              monitor.FILE, "tracking_board.json"):
        try:
            stt = (d / f).stat()
            sig.append((stt.st_mtime_ns, stt.st_size))
        except OSError:
            sig.append(None)
    if (d / "nodes").is_dir():  # a multi-node run: what its nodes last reported
        for f in sorted((d / "nodes").glob("*.json")):
            try:
                sig.append((f.name, f.stat().st_mtime_ns))
            except OSError:  # removed meanwhile (a resume starts the nodes afresh)
                sig.append((f.name, None))
    return sig


def resources_md(d, lang: str) -> str:
    """The run's cost from its supervisor's samples (core.train.monitor): now, and its peak."""
    s = monitor.summary(d)
    if not s:
        return ""
    last, m = s["last"], s["last"]["machine"]
    gpu = "".join(t("runs.res_gpu", lang, i=g["gpu"], used=num(g["mem_used_mib"] / 1024), total=num(g["mem_total_mib"] / 1024),
                    util=num(g["util"])) for g in m.get("gpus", []))
    return "\n\n" + t("runs.res_line", lang, procs=len(last["procs"]), pss=num(last["run_pss_mib"]),
                       peak=num(s["peak_pss_mib"]), rss=num(last["run_rss_sum_mib"]), cpu=num(last["run_cpu"]),
                       mcpu=num(m["cpu"]), used=num(m["mem_used_mib"] / 1024), total=num(m["mem_total_mib"] / 1024),
                       disk=num((m.get("disk_free_mib") or 0) / 1024)) + gpu


def resources_figure(d, lang: str):
    """The run's memory (its processes' PSS summed: shared pages once) and CPU over time, from its
    supervisor's samples; GPU memory where nvidia-smi reported it. None without samples."""
    recs = [r for r in monitor.read(d) if r.get("procs")]
    if not recs:
        return None
    t0 = recs[0]["time"]
    mem, cpu = t("runs.res_mem", lang), t("runs.res_cpu", lang)
    series = {mem: [((r["time"] - t0) / 60, r["run_pss_mib"]) for r in recs],
              cpu: [((r["time"] - t0) / 60, r["run_cpu"]) for r in recs]}
    for r in recs:
        for g in (r.get("machine") or {}).get("gpus", []):
            series.setdefault(t("runs.res_gpu_mem", lang, i=g["gpu"]), []).append(((r["time"] - t0) / 60, g["mem_used_mib"]))
    return line_figure(series, t("runs.res_chart", lang), t("runs.res_time", lang), "MiB", right=(cpu,))


def tracking_md(run_id: str, lang: str) -> str:
    """The run's experiment tracker (report_to): VisualDL's board link when it runs, else how to see
    the logs; "" for a run that reports to none."""
    from core.train import tracking

    link = tracking.tracking_link(run_id)
    if not link:
        return ""
    params = dict(link["params"])
    if params.get("url"):
        params["url"] = f"<a href='{escape(params['url'])}' target='_blank' id='run-board-link'>{escape(params['url'])}</a>"
    return "\n\n" + t(link["text"], lang, **params)


def snapshot(run_id: str | None, compare: str | None, view: dict | None, lang: str, force: bool = False,
             log_y: bool = False):
    """Outputs for the selected run(s), or None when nothing changed since ``view``."""
    if not run_id:
        return None
    try:
        d = runs.run_dir(run_id)
    except (FileNotFoundError, ValueError):
        return None
    view = dict(view or {})
    if (view.get("run"), view.get("compare"), view.get("lang"), view.get("log_y")) != (run_id, compare, lang, log_y):
        view = {"run": run_id, "compare": compare, "lang": lang, "log_y": log_y, "offset": 0, "records": [],
                "coffset": 0, "crecords": []}
        force = True
    new, view["offset"] = runs.read_metrics(d, view["offset"])
    view["records"] = view["records"] + new
    cnew = []
    if compare:
        try:
            cnew, view["coffset"] = runs.read_metrics(runs.run_dir(compare), view["coffset"])
            view["crecords"] = view["crecords"] + cnew
        except (FileNotFoundError, ValueError):
            compare = None
    sig = _signature(d)
    changed = force or new or cnew or sig != view.get("sig")
    view["sig"] = sig
    if not changed:
        return None
    st = runs.status(d)
    p = runs.progress(view["records"])
    series = {f"{run_id}: " if compare else "": view["records"]}
    if compare:
        series[f"{compare}: "] = view["crecords"]
    active = st.get("state") in runs.ACTIVE
    # Figures are the costly part of a page update (Plotly redraws every trace): sent when there
    # are new points, at most every FIGURE_EVERY seconds while the run trains, and at once when
    # it ends or the view changed.
    now = time.monotonic()
    # points read while the charts waited for their next redraw are drawn too (a run that ended
    # right after a skipped redraw kept a curve two points short)
    counts = [len(view["records"]), len(view["crecords"])]
    undrawn = counts != view.get("drawn_counts")
    # the first loss point is drawn at once (the page's first sign that training works)
    has_loss = any(r.get("loss") is not None for r in view["records"])
    first = has_loss and not view.get("drawn_loss")
    redraw = force or first or (undrawn and (not active or now - view.get("drawn", 0.0) >= FIGURE_EVERY))
    # the second chart (speed and learning rate, or DPO rewards) is watched less: every other redraw
    # of the loss while the run trains (each Plotly redraw costs the page ~10 ms of main thread)
    second = redraw and (force or first or not active or (counts != view.get("second_counts")
                                                           and now - view.get("second_drawn", 0.0) >= 2 * FIGURE_EVERY))
    if redraw:
        view["drawn"], view["drawn_counts"], view["drawn_loss"] = now, counts, has_loss
    if second:
        view["second_drawn"], view["second_counts"] = now, counts
    loss_fig, speed_fig = curve_figures(series, lang, log_y) if redraw else (gr.skip(), gr.skip())
    if not second:
        speed_fig = gr.skip()
    # the resources chart: when the supervisor wrote a sample (every 5 s), at the second chart's pace
    res_sig = sig[6]  # resources.jsonl (see _signature)
    res_fig = gr.skip()
    if force or (res_sig != view.get("res_sig") and (not active or now - view.get("res_drawn", 0.0) >= 2 * FIGURE_EVERY)):
        fig = resources_figure(d, lang)
        view["res_sig"], view["res_drawn"] = res_sig, now
        res_fig = fig if fig is not None else (None if force else gr.skip())
    strip = cluster.strip(d)  # [] unless the run spans several machines
    out = {
        "status": status_markdown(run_id, st, p, lang) + resources_md(d, lang) + tracking_md(run_id, lang),
        "progress": progress_html(st, p, lang),
        "caption": curve_caption(run_id, view["records"], lang) if redraw else gr.skip(),
        "log": log_html(runs.tail_log(d)),
        "config": json.dumps(runs.read_json(d / "config.json", {}), indent=2, ensure_ascii=False),
        "command": (d / "command.txt").read_text(encoding="utf-8") if (d / "command.txt").is_file() else "",
        "diff": config_diff(run_id, compare, lang) if compare else "",
        "nodes": nodes_html(strip, lang),
        # always shown: a visibility change sent by the view's tick did not reach the page (Gradio 6.17)
        "node_pick": gr.update(choices=[r["node"] for r in strip]),
        "doctor": gr.update(interactive=active),
        "stop": gr.update(interactive=active),
        "resume": gr.update(interactive=st.get("state") in ("failed", "stopped")),
        "cont": gr.update(interactive=st.get("state") == "succeeded"),
    }
    # what the page already shows is not sent again (a re-sent value re-renders its component)
    view["sent"] = unsent(out, None if force else view.get("sent"))
    return {"view": view, "plot": loss_fig, "speed": speed_fig, "resources": res_fig, **out}


OUT_KEYS = ["view", "status", "progress", "caption", "plot", "speed", "resources", "log", "config", "command", "diff", "stop", "resume",
            "cont", "nodes", "node_pick", "doctor"]


def control_history_md(run_id: str, lang: str) -> str:
    """The run's control requests, newest last: what was asked, at which step it took effect."""
    rows = []
    for r in control.history(runs.run_dir(run_id)):
        what = r["action"] + (f"={r['value']:g}" if "value" in r else "")
        if "applied_step" in r:
            rows.append(t("runs.ctl_applied", lang, what=what, step=r["applied_step"], effect=r.get("effect", "")))
        elif "at_step" in r:
            rows.append(t("runs.ctl_accepted", lang, what=what, step=r["at_step"]))
        else:
            rows.append(t("runs.ctl_waiting", lang, what=what))
    return "\n".join(f"- {x}" for x in rows)


def build_runs_tab(ctx, started):
    """``started`` is the Train tab's gr.State holding the run id it started last."""
    tr = ctx.tr
    with tr(gr.Tab(ctx.text("runs.tab"), id="runs", elem_id="tab-runs"), "runs.tab") as runs_tab:
        table = tr(gr.HTML(runs_table(ctx.initial_lang), label=ctx.text("runs.list"), show_label=True, container=True,
                           elem_id="runs-list"), "runs.list")
        with gr.Row():
            ids = run_ids()
            pick = tr(gr.Dropdown(ids, value=None, label=ctx.text("runs.pick"), elem_id="runs-pick"),
                      "runs.pick")
            compare = tr(gr.Dropdown(["", *ids], value="", label=ctx.text("runs.compare"), elem_id="runs-compare"),
                         "runs.compare")
            refresh = tr(gr.Button(ctx.text("runs.refresh"), size="sm"), "runs.refresh", "value")
        status_md = gr.Markdown(elem_id="run-status")
        progress = gr.HTML(elem_id="run-progress-box")
        with gr.Row():
            stop_btn = tr(gr.Button(ctx.text("runs.stop"), variant="stop", interactive=False, elem_id="run-stop"),
                          "runs.stop", "value")
            resume_btn = tr(gr.Button(ctx.text("runs.resume"), interactive=False, elem_id="run-resume"),
                            "runs.resume", "value")
            # no minimum: Gradio 6.17's page sends 0 for an empty box, and a minimum of 1 then failed
            # every button event that took it as an input (Stop included)
            resume_nproc = tr(gr.Number(0, label=ctx.text("runs.resume_nproc"), precision=0,
                                        elem_id="run-resume-nproc"), "runs.resume_nproc")
            more = tr(gr.Number(1, label=ctx.text("runs.more"), minimum=0.1, elem_id="run-more"), "runs.more")
            cont_btn = tr(gr.Button(ctx.text("runs.continue"), interactive=False, elem_id="run-continue"),
                          "runs.continue", "value")
        with gr.Row():  # steer the running run at its next step (core.train.control)
            ctl_btns = {a: tr(gr.Button(ctx.text(f"runs.ctl_{a.replace('-', '_')}"), size="sm", elem_id=f"run-ctl-{a}"),
                              f"runs.ctl_{a.replace('-', '_')}", "value")
                        for a in ("save", "eval", "stop-after-eval", "stop-and-save")}
            ctl_lr = tr(gr.Number(None, label=ctx.text("runs.ctl_lr"), elem_id="run-ctl-lr-value"), "runs.ctl_lr")
            ctl_lr_btn = tr(gr.Button(ctx.text("runs.ctl_lr_set"), size="sm", elem_id="run-ctl-lr"), "runs.ctl_lr_set", "value")
            board_btn = tr(gr.Button(ctx.text("tracking.start"), size="sm", elem_id="run-board-start"), "tracking.start",
                           "value")
            board_stop = tr(gr.Button(ctx.text("tracking.stop"), size="sm", elem_id="run-board-stop"), "tracking.stop",
                            "value")
        action_msg = gr.Markdown(elem_id="run-action-msg")
        nodes_box = gr.HTML(elem_id="run-nodes")
        with gr.Row():
            doctor_btn = tr(gr.Button(ctx.text("runs.doctor"), interactive=False, elem_id="run-doctor"),
                            "runs.doctor", "value")
            node_pick = tr(gr.Dropdown([], value=None, label=ctx.text("runs.node_pick"), elem_id="run-node-pick"),
                           "runs.node_pick")
            node_log_btn = tr(gr.Button(ctx.text("runs.node_log"), elem_id="run-node-log"), "runs.node_log", "value")
        doctor_out = gr.Markdown(elem_id="run-doctor-out")
        node_log = gr.Code(language=None, interactive=False, visible=False, elem_id="run-node-log-text")
        with gr.Row():
            caption = gr.HTML(elem_id="run-curve-box")
            log_y = tr(gr.Checkbox(False, label=ctx.text("runs.log_scale"), elem_id="run-log-scale", scale=0, min_width=160),
                       "runs.log_scale")
        with gr.Row():
            plot = gr.Plot(elem_id="run-plot", show_label=False)
            speed = gr.Plot(elem_id="run-speed", show_label=False)
            resources = gr.Plot(elem_id="run-resources", show_label=False)
        log = tr(gr.HTML(log_html(""), label=ctx.text("runs.log"), show_label=True, container=True,
                         elem_id="run-log"), "runs.log")
        with tr(gr.Accordion(ctx.text("runs.config"), open=False), "runs.config"):
            command = gr.Code(language="shell", interactive=False, elem_id="run-command")
            cfg_json = gr.Code(language="json", interactive=False, elem_id="run-config")
        diff = tr(gr.HTML(label=ctx.text("runs.diff"), show_label=True, container=True, elem_id="run-diff"), "runs.diff")
        view = gr.State(None)
        list_sig = gr.State(None)
        watch = ctx.watch_parts(TICK)

    lang = ctx.lang
    outs = [view, status_md, progress, caption, plot, speed, resources, log, cfg_json, command, diff, stop_btn, resume_btn, cont_btn,
            nodes_box, node_pick, doctor_btn]

    def render(run_id, cmp, v, lg, ly, force=False):
        snap = snapshot(run_id, cmp or None, v, lg, force, bool(ly))
        if snap is None:
            return [gr.skip()] * len(outs)
        return [snap[k] for k in OUT_KEYS]

    def select(run_id, cmp, lg, ly):
        return render(run_id, cmp, None, lg, ly, force=True)

    def lists(lg, current, cmp):
        ids = run_ids()
        value = current if current in ids else (ids[0] if ids else None)
        return (*table_and_signature(lg), gr.update(choices=ids, value=value),
                gr.update(choices=["", *ids], value=cmp if cmp in ids else ""))

    def list_tick(lg, sig, current, cmp):
        # called when the list or the language changed since the table was last drawn by the watch
        # (at most every LIST_TICK)
        new = list_signature()
        ids = run_ids()
        known = [r for r, *_ in (sig or ())]
        if sig is None or set(ids) != set(known):
            value = current if current in ids else (ids[0] if ids else None)
            return (runs_table(lg), new, gr.update(choices=ids, value=value),
                    gr.update(choices=["", *ids], value=cmp if cmp in ids else ""))
        return runs_table(lg), new, gr.skip(), gr.skip()

    def tick(run_id, cmp, v, lg, ly):
        return render(run_id, cmp, v, lg, ly)

    def follow_started(run_id, lg):
        ids = run_ids()
        if run_id not in ids:
            return gr.skip(), gr.skip(), gr.skip()
        table_html, sig = table_and_signature(lg)
        return gr.update(choices=ids, value=run_id), table_html, sig

    def act(action, run_id, amount, lg, nproc=None):
        if not run_id:
            return t("runs.pick_first", lg)
        try:
            if action == "stop":
                st = runs.stop(run_id)
            elif action == "resume":  # an empty box: the run's own process count
                st = runs.resume(run_id, nproc=int(nproc) if nproc and nproc > 0 else None)
            else:
                st = runs.continue_run(run_id, epochs=float(amount or 1), steps=None)
        except (ValueError, FileNotFoundError) as e:
            return t("error.prefix", lg) + str(e)
        return t("runs.action_done", lg, run=run_id, state=t(f"state.{st.get('state')}", lg))

    def steer(spec, run_id, lg):
        """A control request for the running run; the message lists what was asked and what took effect."""
        if not run_id:
            return t("runs.pick_first", lg)
        try:
            runs.control_run(run_id, spec)
        except control.ControlError as e:
            return t("error.prefix", lg) + t(f"runs.ctl_{e.code}", lg, **e.params)
        except (ValueError, FileNotFoundError) as e:
            return t("error.prefix", lg) + str(e)
        return t("runs.ctl_sent", lg, what=spec) + "\n\n" + control_history_md(run_id, lg)

    def probe(run_id, cmp):
        out = []
        for r in (run_id, cmp):
            try:
                d = runs.run_dir(r) if r else None
            except (FileNotFoundError, ValueError):
                d = None
            out.append((r, _signature(d) if d else None, _size(d / "metrics.jsonl") if d else None))
        return out

    def doctor(run_id, lg):
        if not run_id:
            return t("runs.pick_first", lg)
        try:
            return doctor_markdown(cluster.doctor(run_id), lg)
        except (ValueError, FileNotFoundError) as e:
            return t("error.prefix", lg) + str(e)

    def show_node_log(run_id, node, lg):
        if not run_id:
            return gr.update(visible=True, value=t("runs.pick_first", lg))
        if not node:
            return gr.update(visible=True, value=t("runs.node_first", lg))
        try:
            return gr.update(visible=True, value=cluster.node_log(run_id, node or "head"))
        except (ValueError, FileNotFoundError, OSError) as e:
            return gr.update(visible=True, value=str(e))

    doctor_btn.click(doctor, inputs=[pick, lang], outputs=[doctor_out])
    node_log_btn.click(show_node_log, inputs=[pick, node_pick, lang], outputs=[node_log])
    # one timer for the run's view and the list (drawn at most every LIST_TICK): one event a tick
    ctx.watch_views(TICK, [View(probe, [pick, compare], tick, [pick, compare, view, lang, log_y], outs),
                           View(list_signature, [], list_tick, [lang, list_sig, pick, compare],
                                [table, list_sig, pick, compare], every=LIST_TICK)], parts=watch)
    for c in (pick, compare, log_y):
        c.change(select, inputs=[pick, compare, lang, log_y], outputs=outs, show_progress="hidden")
    refresh.click(lists, inputs=[lang, pick, compare], outputs=[table, list_sig, pick, compare])
    # showing the tab lists the runs and picks the newest at once (the pick starts empty, so its
    # change event draws the view), whatever the timers are doing: after a studio restart under
    # load the view once stayed empty for over 60 s while it waited for them
    runs_tab.select(lists, inputs=[lang, pick, compare], outputs=[table, list_sig, pick, compare],
                    show_progress="hidden")
    started.change(follow_started, inputs=[started, lang], outputs=[pick, table, list_sig], show_progress="hidden")
    for a, btn in ctl_btns.items():
        btn.click(lambda r, lg, a=a: steer(a, r, lg), inputs=[pick, lang], outputs=action_msg)

    def board(run_id, lg, start=True):
        """Start (or stop) the run's VisualDL board, served by the studio on 127.0.0.1 while it runs."""
        from core import jobs
        from core.train import tracking

        if not run_id:
            return t("runs.pick_first", lg)
        try:
            if not start:
                tracking.stop_board(run_id)
                return tracking_md(run_id, lg).strip() or t("refused.board_not_visualdl", lg, run=run_id, report_to="none")
            tracking.start_board(run_id)
        except jobs.Refused as e:
            return t("error.prefix", lg) + refusal(e, lg)
        except (ValueError, FileNotFoundError) as e:
            return t("error.prefix", lg) + str(e)
        return tracking_md(run_id, lg).strip()

    board_btn.click(board, inputs=[pick, lang], outputs=action_msg)
    board_stop.click(lambda r, lg: board(r, lg, start=False), inputs=[pick, lang], outputs=action_msg)
    ctl_lr_btn.click(lambda v, r, lg: steer(f"lr={v:g}" if isinstance(v, (int, float)) else "lr=", r, lg),
                     inputs=[ctl_lr, pick, lang], outputs=action_msg)
    for btn, action in ((stop_btn, "stop"), (resume_btn, "resume"), (cont_btn, "continue")):
        if action == "resume":  # only Resume reads the process count
            btn.click(lambda r, m, lg, n, a=action: act(a, r, m, lg, n), inputs=[pick, more, lang, resume_nproc],
                      outputs=action_msg)
        else:
            btn.click(lambda r, m, lg, a=action: act(a, r, m, lg), inputs=[pick, more, lang], outputs=action_msg)
    # after a page load list_sig is None, so the list timer's first tick fills the list and pickers
    ctx.relocalize.append((select, [pick, compare, lang, log_y], outs))
    ctx.relocalize.append((lambda lg: runs_table(lg), [lang], [table]))
    return pick
