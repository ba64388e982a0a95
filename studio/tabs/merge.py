"""Merge tab: pick a run's adapter and merge it into its base (a merge job), see the logits check;
evaluate base, base + adapter and the merged model side by side (an eval job), as a table and a
bar chart with the values on the bars. Both jobs survive a page reload or a studio restart.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import gradio as gr

from core import catalog, jobs, workspace
from core.models import evaluate, loading, merge
from studio.charts import bar_figure, html_table, num
from studio.jobview import JobPanel
from studio.verdict import verify_warning
from studio.locales import TEXT, refusal, t


def adapter_choices() -> list[tuple[str, str]]:
    return [(m["label"], m["path"]) for m in catalog.models(["adapter"])]


def merge_result(info: dict, lang: str) -> list:
    res = info.get("result")
    if not res:
        return [t("merge.running", lang, out=info.get("params", {}).get("out", ""))
                if info["status"].get("state") in jobs.ACTIVE else ""]
    diff = res["check"]["max_abs_diff"]
    verdict = t("merge.check_ok", lang) if diff < 1e-4 else t("merge.check_bad", lang)
    text = t("merge.done", lang, path=res["out"], diff=f"{diff:.2e}", n=res["check"]["prompts"], verdict=verdict)
    tr = res["check"].get("training")
    if tr:
        text += "\n\n" + t("merge.against_training", lang, got=num(tr["merged_eval_loss"]),
                             want=num(tr["training_eval_loss"]), step=tr.get("step"))
    return [text]


def eval_result(info: dict, lang: str) -> list:
    res = info.get("result")
    if not res or "rows" not in res:  # a new (or failed) job, or the Evaluate tab's: not a comparison's results
        return ["", None]
    rows = res["rows"]
    table = html_table([t("merge.col_model", lang), *(t(f"evaluate.m_{k}", lang) for k in evaluate.METRICS),
                        t("merge.col_records", lang)],
                       [[label(r["label"], lang), *(r.get(k) for k in evaluate.METRICS), r.get("records")] for r in rows],
                       elem_id="eval-table")
    scores = ("token_accuracy", "exact_match", "bleu4", "rouge_l")
    fig = bar_figure([t(f"evaluate.m_{k}", lang) for k in scores],
                     {label(r["label"], lang): [r.get(k) for k in scores] for r in rows}, t("merge.chart", lang),
                     y_title=t("merge.score", lang), fmt=lambda v: num(v, 3))
    return [table + notes_html(rows, lang), fig]


def label(name: str, lang: str) -> str:
    """A comparison row's label (base, base+adapter, merged) in ``lang``."""
    key = f"merge.label_{name}"
    return t(key, lang) if key in TEXT else name


def note(n: dict, lang: str) -> str:
    key = f"evaluate.note_{n.get('code')}"
    return t(key, lang, **(n.get("params") or {})) if key in TEXT else str(n.get("message", ""))


def notes_html(rows: list[dict], lang: str) -> str:
    """What a score in the table does not say (BLEU-4 on answers under 4 tokens is 0 whatever the
    answer), as core.models.evaluate noted it for the rows, each note once: "BLEU-4 0 beside exact
    match 1.0" explained. (The per-record BLEU-4 note is about the Evaluate tab's table, not this one.)"""
    seen = []
    for r in rows:
        for n in r.get("notes") or []:
            text = note(n, lang)
            if n.get("code") != "bleu4_short_records" and text not in seen:
                seen.append(text)
    items = "".join(f"<p class='eval-note'>{escape(t('evaluate.note', lang, text=x))}</p>" for x in seen)
    return f"<div id='eval-notes'>{items}</div>" if items else ""


class ComparePanel(JobPanel):
    """The newest comparison after a reload (the Evaluate tab's predictions jobs are eval jobs too)."""

    def on_load(self, lang):
        job_id = evaluate.latest_job(predict=False)
        return [job_id, *self.render(job_id, lang)]


def build_merge_tab(ctx):
    tr = ctx.tr
    with tr(gr.Tab(ctx.text("merge.tab"), id="merge", elem_id="tab-merge"), "merge.tab") as tab:
        with gr.Row():
            adapter = tr(gr.Dropdown(adapter_choices(), value=None, label=ctx.text("merge.adapter"), elem_id="merge-adapter"),
                         "merge.adapter")
            name = tr(gr.Textbox(label=ctx.text("merge.name"), elem_id="merge-name"), "merge.name")
        with gr.Row():
            merge_btn = tr(gr.Button(ctx.text("merge.merge"), variant="primary", elem_id="merge-btn"), "merge.merge", "value")
            limit = tr(gr.Number(200, precision=0, minimum=1, label=ctx.text("merge.limit")), "merge.limit")
            eval_btn = tr(gr.Button(ctx.text("merge.evaluate"), elem_id="eval-btn"), "merge.evaluate", "value")
        msg = gr.Markdown(elem_id="merge-msg")
        ctx.heading("merge.merge_job")
        merge_panel = JobPanel(ctx, "merge", "merge", [msg], merge_result)
        ctx.heading("merge.eval_job")
        table = gr.HTML(elem_id="eval-box")
        plot = gr.Plot(elem_id="eval-plot", show_label=False)
        eval_panel = ComparePanel(ctx, "eval", "eval", [table, plot], eval_result)
        note = gr.Markdown(elem_id="merge-note")
        started_merge = gr.State(None)  # inside the Tab: a State directly under gr.Tabs shifts later tabs
        started_eval = gr.State(None)
        suggested = gr.State("")  # the last name the tab suggested: a name typed over it is kept
    lang = ctx.lang

    def suggest(path, typed, last, lg):
        """A name for the merged model, unless one was typed (the box is neither empty nor the last
        suggestion); for an adapter that cannot be merged, why (at once, before Merge)."""
        keep = (typed or "").strip() and (typed or "").strip() != (last or "")
        if not path:
            return gr.skip(), "", last
        kind = loading.adapter_kind(path)
        if kind in loading.NOT_MERGEABLE:
            return gr.skip(), t(f"refused.not_mergeable_{kind}", lg), last
        proposal = f"{Path(path).parent.name}-merged"[:60]
        return (gr.skip() if keep else proposal), verify_warning(path, lg), (last if keep else proposal)

    def start_merge(path, nm, lg):
        """A merge job writing exactly the name shown; the last job's "Merged into" goes when it starts."""
        if not path:
            return t("merge.pick_first", lg), None, gr.skip()
        try:
            return "", merge.submit(path, (nm or "").strip()), ""
        except jobs.Refused as e:
            return t("error.prefix", lg) + refusal(e, lg), None, gr.skip()

    def start_eval(path, nm, lim, lg):
        if not path:
            return t("merge.pick_first", lg), None
        merged = workspace.models_dir() / (nm or "").strip() if (nm or "").strip() else None
        busy = jobs.claimed(merged) if merged else None
        try:
            if busy:  # evaluating now would silently leave "merged" out of the comparison
                raise jobs.Refused("merge_running", f"the merge into {merged} is still running (job {busy}); "
                                   "evaluate when it has finished", path=str(merged), job=busy)
            return "", evaluate.submit_compare(path, merged if merged and (merged / "config.json").is_file() else None,
                                               int(lim or 200))
        except jobs.Refused as e:
            return t("error.prefix", lg) + refusal(e, lg), None

    adapter.change(suggest, inputs=[adapter, name, suggested, lang], outputs=[name, note, suggested])

    def why_not(path, lg):  # after a language switch: the "cannot be merged" note in the new language
        kind = loading.adapter_kind(path) if path else None
        return t(f"refused.not_mergeable_{kind}", lg) if kind in loading.NOT_MERGEABLE else gr.skip()

    ctx.relocalize.append((why_not, [adapter, lang], [note]))
    merge_btn.click(start_merge, inputs=[adapter, name, lang], outputs=[note, started_merge, msg]).then(
        merge_panel.follow, inputs=[started_merge, lang], outputs=[merge_panel.job, *merge_panel.outputs])
    eval_btn.click(start_eval, inputs=[adapter, name, limit, lang], outputs=[note, started_eval]).then(
        eval_panel.follow, inputs=[started_eval, lang], outputs=[eval_panel.job, *eval_panel.outputs])
    ctx.picker(tab, lambda: gr.update(choices=adapter_choices()), [], [adapter])
