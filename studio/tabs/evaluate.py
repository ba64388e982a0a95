"""Evaluate & predict tab: any model the workspace lists (base, trained, merged, quantized, static,
an adapter with its base) on any dataset's dev or train split, or on an uploaded JSON/JSONL file,
as an eval job (core.models.evaluate.submit_predict). It shows the metrics with what they do not
mean on these answers, every record's prediction a page at a time, and predictions.jsonl to
download. The job survives a reload or a studio restart: the tab shows the newest predictions job.
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from core import catalog, jobs
from core.models import evaluate
from studio.charts import html_table, num
from studio.jobview import JobPanel
from studio.locales import refusal, t

PAGE_SIZE = 10  # predictions a page
METRIC_ROWS = ("eval_loss", "perplexity", "token_accuracy", "exact_match", "bleu4", "rouge_l", "records", "seconds")


def model_choices() -> list[tuple[str, str]]:
    return [(m["label"], m["path"]) for m in catalog.models()]


def dataset_choices() -> list[tuple[str, str]]:
    return [(m.get("name") or Path(m["path"]).name, m["path"]) for m in catalog.datasets()]


def split_choices(lang: str) -> list[tuple[str, str]]:
    return [(t(f"evaluate.split_{s}", lang), s) for s in evaluate.SPLITS]


def predictions_path(job_id: str | None) -> Path | None:
    """The job's predictions.jsonl once it is complete (written by a rename), else None."""
    if not job_id:
        return None
    try:
        f = jobs.job_dir(job_id) / evaluate.PREDICTIONS_FILE
    except (FileNotFoundError, ValueError):
        return None
    return f if f.is_file() else None


def page_view(job_id: str | None, page: int, lang: str) -> list:
    """-> predictions table, "page x of y" line, the page shown (clamped to the pages there are)."""
    f = predictions_path(job_id)
    if f is None:
        return ["", t("evaluate.no_predictions", lang), 1]
    _, total = evaluate.read_predictions(f, 1, 0)
    pages = max(1, -(-total // PAGE_SIZE))
    page = min(max(1, int(page or 1)), pages)
    rows, _ = evaluate.read_predictions(f, page, PAGE_SIZE)
    cols = [t(f"evaluate.col_{c}", lang) for c in ("index", "prompt", "reference", "output", "exact", "rouge_l", "bleu4")]
    cells = []
    for r in rows:
        prompt = r["prompt"]
        if r.get("history"):
            prompt = f"{prompt} {t('evaluate.history', lang, n=len(r['history']) + 1)}"
        cells.append([r["index"] + 1, prompt, r["reference"], r["output"],
                      t("evaluate.yes" if r.get("exact_match") else "evaluate.no", lang),
                      num(r.get("rouge_l"), 3), "—" if r.get("bleu4") is None else num(r["bleu4"], 3)])
    table = html_table(cols, cells, elem_id="evaluate-preds-table")
    return [table, t("evaluate.page", lang, page=page, pages=pages, total=total), page]


def note_text(n: dict, lang: str) -> str:
    key = f"evaluate.note_{n.get('code')}"
    return t("evaluate.note", lang, text=t(key, lang, **(n.get("params") or {})) if t(key, lang) != key
             else n.get("message", ""))


def job_result(info: dict, lang: str) -> list:
    """-> metrics table, summary (with the notes), predictions table, page line, download, page."""
    res, p = info.get("result"), info.get("params") or {}
    model = Path(p.get("adapter") or p.get("model") or "")
    model = model.parent.name if model.name == "output" else model.name
    data = p.get("upload_name") or (f"{Path(p.get('data') or '').name} ({p['split']})" if p.get("split")
                                    else Path(p.get("data") or "").name)
    if not res:
        running = info["status"].get("state") in jobs.ACTIVE
        return ["", t("evaluate.running", lang, model=model, data=data) if running else "", "",
                t("evaluate.no_predictions", lang), None, 1]
    rows = [[t(f"evaluate.m_{k}", lang), res.get(k)] for k in METRIC_ROWS if res.get(k) is not None]
    metrics = html_table([t("evaluate.col_metric", lang), t("evaluate.col_value", lang)], rows,
                         elem_id="evaluate-metrics-table")
    summary = "\n\n".join([t("evaluate.done", lang, model=model, n=res.get("records"), data=data),
                           *(note_text(n, lang) for n in res.get("notes", []))])
    f = predictions_path(info["job_id"])
    return [metrics, summary, *page_view(info["job_id"], 1, lang)[:2], str(f) if f else None, 1]


class PredictPanel(JobPanel):
    """The newest predictions job after a reload (the Merge tab's comparisons are eval jobs too)."""

    def on_load(self, lang):
        job_id = evaluate.latest_job(predict=True)
        return [job_id, *self.render(job_id, lang)]


def build_evaluate_tab(ctx):
    tr = ctx.tr
    with tr(gr.Tab(ctx.text("evaluate.tab"), id="evaluate", elem_id="tab-evaluate"), "evaluate.tab") as tab:
        tr(gr.Markdown(ctx.text("evaluate.about")), "evaluate.about", "value")
        with gr.Row():
            model = tr(gr.Dropdown(model_choices(), value=None, label=ctx.text("evaluate.model"), elem_id="evaluate-model"),
                       "evaluate.model")
            dataset = tr(gr.Dropdown(dataset_choices(), value=None, label=ctx.text("evaluate.dataset"),
                                     elem_id="evaluate-dataset"), "evaluate.dataset")
            split = tr(gr.Radio(split_choices(ctx.initial_lang), value="dev", label=ctx.text("evaluate.split"),
                                elem_id="evaluate-split"), "evaluate.split")
            ctx.tr_fn(split, "choices", split_choices)
        with gr.Row():
            upload = tr(gr.File(label=ctx.text("evaluate.upload"), file_types=[".json", ".jsonl"], type="filepath",
                                elem_id="evaluate-upload"), "evaluate.upload")
            with gr.Column():
                limit = tr(gr.Number(100, precision=0, minimum=0, label=ctx.text("evaluate.limit"),
                                     elem_id="evaluate-limit"), "evaluate.limit")
                max_tokens = tr(gr.Number(64, precision=0, minimum=1, maximum=4096, label=ctx.text("evaluate.max_tokens"),
                                          elem_id="evaluate-max-tokens"), "evaluate.max_tokens")
                run = tr(gr.Button(ctx.text("evaluate.run"), variant="primary", elem_id="evaluate-run"), "evaluate.run",
                         "value")
        note = gr.Markdown(elem_id="evaluate-note")
        ctx.heading("evaluate.job")
        summary = gr.Markdown(elem_id="evaluate-summary")
        metrics = gr.HTML(elem_id="evaluate-metrics")
        ctx.heading("evaluate.predictions")
        preds = gr.HTML(elem_id="evaluate-preds")
        with gr.Row():
            prev = tr(gr.Button(ctx.text("evaluate.prev"), size="sm", elem_id="evaluate-prev"), "evaluate.prev", "value")
            page_line = gr.Markdown(t("evaluate.no_predictions", ctx.initial_lang), elem_id="evaluate-page")
            nxt = tr(gr.Button(ctx.text("evaluate.next"), size="sm", elem_id="evaluate-next"), "evaluate.next", "value")
        download = tr(gr.File(label=ctx.text("evaluate.download"), interactive=False, elem_id="evaluate-download"),
                      "evaluate.download")
        page = gr.State(1)  # inside the Tab: a State directly under gr.Tabs shifts later tabs
        started = gr.State(None)
        panel = PredictPanel(ctx, "eval", "evaluate", [metrics, summary, preds, page_line, download, page], job_result)
    lang = ctx.lang

    def start(path, ds, sp, up, lim, mnt, lg):
        if not path:
            return t("evaluate.pick_model", lg), None
        if not up and not ds:
            return t("evaluate.pick_data", lg), None
        try:
            job = evaluate.submit_predict(path, up or ds, split=None if up else (sp or "dev"), limit=int(lim or 0) or None,
                                          max_new_tokens=int(mnt or 64), upload_name=Path(up).name if up else None)
        except jobs.Refused as e:
            key = f"evaluate.refused_{e.code}"
            text = t(key, lg, **e.params) if t(key, lg) != key else refusal(e, lg)
            return t("error.prefix", lg) + text, None
        except (ValueError, OSError) as e:
            return t("error.prefix", lg) + str(e), None
        return t("evaluate.started", lg, job=job), job

    def turn(step):
        def go(job, pg, lg):
            return page_view(job, int(pg or 1) + step, lg)
        return go

    run.click(start, inputs=[model, dataset, split, upload, limit, max_tokens, lang], outputs=[note, started]).then(
        panel.follow, inputs=[started, lang], outputs=[panel.job, *panel.outputs])
    prev.click(turn(-1), inputs=[panel.job, page, lang], outputs=[preds, page_line, page], show_progress="hidden")
    nxt.click(turn(+1), inputs=[panel.job, page, lang], outputs=[preds, page_line, page], show_progress="hidden")
    ctx.picker(tab, lambda: [gr.update(choices=model_choices()), gr.update(choices=dataset_choices())], [],
               [model, dataset])
