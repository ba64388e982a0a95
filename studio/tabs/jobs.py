"""Jobs tab: every run and job (train, merge, quantize, eval, serve, demo, data) in one list, newest
first, from core.catalog.activity(); one item's status, progress, command, log and result; Stop
for any of them (the same core.catalog.stop the CLI's `jobs stop` calls).
"""

from __future__ import annotations

import json
import shlex

import gradio as gr

from core import catalog, demo, jobs, workspace
from core.train import runs
from studio.live import unsent
from studio.charts import html_table, log_html, progress_bar
from studio.locales import progress_text, reason_text, refusal, t

TICK = 2.0


def table_html(rows: list[dict], lang: str) -> str:
    cols = ["id", "kind", "state", "progress", "created"]
    body = [[r["id"], t(f"jobs.kind_{r['kind']}", lang), t(f"state.{r['state'] or 'queued'}", lang),
             ("" if r["fraction"] is None else f"{r['fraction'] * 100:.0f}% ") + _progress(r, lang),
             (r["created"] or "").replace("T", " ").replace("+00:00", " UTC")] for r in rows]
    return html_table([t(f"jobs.col_{c}", lang) for c in cols], body, elem_id="jobs-table", empty=t("jobs.none", lang))


def _progress(row: dict, lang: str) -> str:
    """A row's progress line in ``lang``: a job's progress.json holds the code its child reported."""
    if row["kind"] == "train" or lang == "en":
        return progress_text({"text": row["text"]}, lang)
    return progress_text(jobs.read_json(jobs.job_dir(row["id"]) / "progress.json", {}) or {"text": row["text"]}, lang)


def detail(item_id: str | None, lang: str) -> tuple[str, str, str, str, str, dict]:
    """(status line, progress bar, command, log, result json, stop button update) of a run or job."""
    if not item_id:
        return "", "", "", log_html("", 12), "", gr.update(interactive=False)
    try:
        if (workspace.runs_dir() / item_id / "studio.json").is_file():
            info = runs.show(item_id)
            st, p = info["status"], info["progress"]
            frac = 1.0 if st.get("state") == "succeeded" else (p["step"] / p["max_steps"] if p["max_steps"] else None)
            text = t("progress.step", lang, step=p["step"], steps=p["max_steps"])
            command = shlex.join(info["command"])
            log = runs.tail_log(item_id)
            result = json.dumps({"output": info.get("output"), "checkpoint": info.get("checkpoint"),
                                 "loss": p.get("loss"), "eval_loss": p.get("eval_loss")}, indent=2)
            kind = "train"
        else:
            info = jobs.show(item_id)
            st, pr = info["status"], info.get("progress") or {}
            frac = 1.0 if st.get("state") == "succeeded" else pr.get("fraction")
            text = progress_text(pr, lang)
            command = shlex.join(info["argv"])
            log = jobs.read_log(item_id)
            res = info.get("result")
            result = json.dumps(res, indent=2, ensure_ascii=False)[:20000] if res is not None else ""
            kind = info["kind"]
    except (FileNotFoundError, ValueError):
        return t("jobs.gone", lang, id=item_id), "", "", log_html("", 12), "", gr.update(interactive=False)
    state = st.get("state", "queued")
    line = f"**{item_id}** ({t(f'jobs.kind_{kind}', lang)}) — <span id='jobs-state'>{t(f'state.{state}', lang)}</span>"
    if st.get("reason") and state != "succeeded":
        line += " · " + t("runs.reason", lang, reason=reason_text(st["reason"], lang))
    return (line, progress_bar(frac, text, "jobs-progress", state), command, log_html(log, 12), result,
            gr.update(interactive=state in jobs.ACTIVE))


def _signature(item: str | None) -> tuple:
    """The list's signature plus the picked item's own files (its log grows while it runs)."""
    own = ()
    if item:
        d = workspace.runs_dir() / item
        if (d / "studio.json").is_file():
            own = tuple((f, f.stat().st_size) for f in (d / "log" / "workerlog.0", d / "launcher.log") if f.is_file())
        else:
            own = jobs.signature(item)
    return catalog.signature(with_metrics=True), own


def _label(row: dict, lang: str) -> str:
    return f"{row['id']} · {t('jobs.kind_' + row['kind'], lang)}"


OUT_NAMES = ["table", "pick", "status", "progress", "command", "log", "result", "stop"]


def view_updates(item: str | None, lang: str, last: dict | None = None) -> list:
    """The updates of the tab's outputs and the record of what they send: every output (``last``
    None) or, at a tick, only those that differ from what the page was last sent (``last``): while
    a run trains the list changes at every step, and the picker's choices, the command and the
    status line were sent and re-rendered again each time."""
    rows = catalog.activity()
    ids = [r["id"] for r in rows]
    value = item if item in ids else (ids[0] if ids else None)
    out = dict(zip(OUT_NAMES, [table_html(rows, lang), gr.update(choices=[(_label(r, lang), r["id"]) for r in rows],
                                                                  value=value), *detail(value, lang)]))
    record = unsent(out, last)
    return [*out.values(), record]


def build_jobs_tab(ctx):
    tr = ctx.tr
    with tr(gr.Tab(ctx.text("jobs.tab"), id="jobs", elem_id="tab-jobs"), "jobs.tab") as tab:
        table = tr(gr.HTML(label=ctx.text("jobs.list"), show_label=True, container=True, elem_id="jobs-list"), "jobs.list")
        with gr.Row():
            pick = tr(gr.Dropdown([], label=ctx.text("jobs.pick"), elem_id="jobs-pick"), "jobs.pick")
            stop_btn = tr(gr.Button(ctx.text("jobs.stop"), variant="stop", interactive=False, elem_id="jobs-stop"),
                          "jobs.stop", "value")
            demo_btn = tr(gr.Button(ctx.text("jobs.build_demo"), elem_id="jobs-build-demo"), "jobs.build_demo", "value")
        status = gr.Markdown(elem_id="jobs-status")
        progress = gr.HTML(elem_id="jobs-progress-box")
        msg = gr.Markdown(elem_id="jobs-msg")
        command = tr(gr.Code(language="shell", interactive=False, label=ctx.text("jobs.command"), elem_id="jobs-command"),
                     "jobs.command")
        log = tr(gr.HTML(log_html("", 12), label=ctx.text("jobs.log"), show_label=True, container=True,
                         elem_id="jobs-log"), "jobs.log")
        with tr(gr.Accordion(ctx.text("jobs.result"), open=False), "jobs.result"):
            result = gr.Code(language="json", interactive=False, elem_id="jobs-result")
        sent = gr.State(None)  # what the page was last sent of each output
        watch = ctx.watch_parts(TICK)
    lang = ctx.lang
    outs = [table, pick, status, progress, command, log, result, stop_btn, sent]

    def stop(item, lg):
        if not item:
            return t("runs.pick_first", lg)
        st = catalog.stop(item)
        return t("runs.action_done", lg, run=item, state=t(f"state.{st.get('state')}", lg))

    def build_demo(lg, last):
        """Start the demo build and show it: the picker gets the new job with choices that hold it (a
        bare job id sent to the picker is refused by Gradio as "not in the list of choices", and
        every later event of the tab, its refresh too, then failed on that value until a reload)."""
        try:
            job_id = demo.submit()
        except jobs.Refused as e:
            return [t("error.prefix", lg) + refusal(e, lg), *[gr.skip()] * len(outs)]
        except ValueError as e:  # already being built
            return [t("error.prefix", lg) + str(e), *[gr.skip()] * len(outs)]
        return [t("jobs.demo_started", lg, id=job_id), *view_updates(job_id, lg, last)]

    demo_btn.click(build_demo, inputs=[lang, sent], outputs=[msg, *outs])
    ctx.watch(TICK, _signature, [pick], view_updates, [pick, lang, sent], outs, parts=watch)
    tab.select(view_updates, inputs=[pick, lang], outputs=outs, show_progress="hidden")
    pick.input(view_updates, inputs=[pick, lang], outputs=outs, show_progress="hidden")
    stop_btn.click(stop, inputs=[pick, lang], outputs=msg)
    ctx.on_load.append((view_updates, [pick, lang], outs))
    ctx.relocalize.append((view_updates, [pick, lang], outs))
