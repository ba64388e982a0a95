"""A tab's view of one job (core.jobs): its state, progress bar, log and result, read from the job's
files. After a page load the view shows the newest job of its kind, so a reload or a studio
restart mid-job finds it running, with its log, and its result once it ends. A 2 s timer sends
an update only when one of the job's files (or the language) changed since the view was drawn.
"""

from __future__ import annotations

from datetime import datetime

import gradio as gr

from core import jobs
from studio.charts import duration, log_html, progress_bar
from studio.locales import progress_text, reason_text, t

TICK = 2.0  # as a watched run's (a 1 s tick cost an idle page on this tab ~3 CPU-s a minute of chromium)


def _seconds(st: dict) -> float | None:
    try:
        a = datetime.fromisoformat(st["started"])
        b = datetime.fromisoformat(st["finished"]) if st.get("finished") else datetime.now(a.tzinfo)
        return (b - a).total_seconds()
    except (KeyError, TypeError, ValueError):
        return None


def status_line(info: dict, lang: str) -> str:
    st = info["status"]
    state = st.get("state", "queued")
    parts = [f"**{info['job_id']}** — <span class='job-state' data-state='{state}'>{t(f'state.{state}', lang)}</span>"]
    secs = _seconds(st)
    if secs is not None:
        parts.append(duration(secs, lang))
    if st.get("reason") and state != "succeeded":
        parts.append(t("runs.reason", lang, reason=reason_text(st["reason"], lang)))
    return " · ".join(parts)


class JobPanel:
    """Status, progress and log of the job held in ``self.job``; ``render_result(info, lang)``
    returns the updates of ``result_outputs`` (called with info["result"] None while it runs)."""

    def __init__(self, ctx, kind: str, prefix: str, result_outputs=(), render_result=None):
        self.kind, self.prefix = kind, prefix
        self.result_outputs = list(result_outputs)
        self.render_result = render_result
        self.job = gr.State(None)
        self.status = gr.Markdown(elem_id=f"{prefix}-job-status")
        self.progress = gr.HTML(elem_id=f"{prefix}-job-progress")
        self.log = ctx.tr(gr.HTML(log_html("", 8), label=ctx.text("jobs.log"), show_label=True, container=True,
                                  elem_id=f"{prefix}-log"), "jobs.log")
        self.outputs = [self.status, self.progress, self.log, *self.result_outputs]
        ctx.watch(TICK, lambda job: jobs.signature(job) if job else None, [self.job], self.render,
                  [self.job, ctx.lang], self.outputs)
        ctx.on_load.append((self.on_load, [ctx.lang], [self.job, *self.outputs]))
        ctx.relocalize.append((lambda job, lg: self.render(job, lg), [self.job, ctx.lang], self.outputs))

    def render(self, job_id: str | None, lang: str) -> list:
        if not job_id:
            return ["", "", log_html("", 8), *([gr.skip()] * len(self.result_outputs))]
        try:
            info = jobs.show(job_id)
        except (FileNotFoundError, ValueError):
            return ["", "", log_html("", 8), *([gr.skip()] * len(self.result_outputs))]
        st, pr = info["status"], info.get("progress") or {}
        state = st.get("state", "queued")
        frac = 1.0 if state == "succeeded" else pr.get("fraction")
        text = t(f"state.{state}", lang) if state in jobs.FINAL else (progress_text(pr, lang) or t(f"state.{state}", lang))
        res = self.render_result(info, lang) if self.render_result else []
        return [status_line(info, lang), progress_bar(frac, text, f"{self.prefix}-progress", state),
                log_html(jobs.read_log(job_id), 8), *res]

    def on_load(self, lang):
        job_id = jobs.latest(self.kind)
        return [job_id, *self.render(job_id, lang)]

    def follow(self, job_id, lang):
        """Outputs after an action started ``job_id`` (None: nothing started, leave the view)."""
        if not job_id:
            return [gr.skip()] * (1 + len(self.outputs))
        return [job_id, *self.render(job_id, lang)]
