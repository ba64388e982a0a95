"""Dataset tab: upload or pick a file, validate it line by line, preview, token lengths, import.

Handlers are thin: widget values -> core.data.datasets call -> display. Every message goes through
studio.locales so the zh/en switch covers it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from core import workspace
from core.data import datasets
from studio.charts import histogram_figure, html_table
from studio.locales import problem, t

FORMAT_CHOICES = ["auto", *datasets.FORMATS]
MAX_PREVIEW = 50


@dataclass
class DatasetTab:
    upload: gr.File
    picker: gr.Dropdown
    fmt: gr.Dropdown
    validate_btn: gr.Button
    summary: gr.Markdown
    problems: gr.HTML
    record: gr.Slider
    conversation: gr.Chatbot
    tokenizer: gr.Dropdown
    token_html: gr.HTML
    name: gr.Textbox
    dev_ratio: gr.Slider
    skip_bad: gr.Checkbox
    import_btn: gr.Button
    import_msg: gr.Markdown
    table: gr.HTML


# ---------------------------------------------------------------- choices


def workspace_files() -> list[tuple[str, str]]:
    """Data files under the workspace: uploads/* and every dataset's splits."""
    home = workspace.home()
    out = []
    up = workspace.uploads_dir()
    if up.is_dir():
        for f in sorted(up.glob("*")):
            if f.is_file() and f.suffix in (".json", ".jsonl"):
                out.append((str(f.relative_to(home)), str(f)))
    for meta in datasets.list_datasets():
        d = Path(meta["path"])
        for split in ("train.json", "dev.json"):
            if (d / split).is_file():
                out.append((str((d / split).relative_to(home)), str(d / split)))
    return out


def tokenizer_choices() -> list[tuple[str, str]]:
    root = workspace.models_dir()
    if not root.is_dir():
        return []
    return [
        (d.name, str(d))
        for d in sorted(root.iterdir())
        if d.is_dir() and not d.name.startswith(".") and (d / "tokenizer_config.json").is_file()
    ]


def datasets_frame(lang: str) -> str:
    cols = ["name", "train", "dev", "format", "source", "created"]
    rows = [[m.get(c, "") for c in cols] for m in datasets.list_datasets()]
    return html_table([t(f"dataset.col_{c}", lang) for c in cols], rows)


def suggest_name(path: str) -> str:
    stem = Path(path).name.split(".")[0]
    stem = re.sub(r"[^A-Za-z0-9_\-\u4e00-\u9fff]+", "-", stem).strip("-_") or "dataset"
    return stem[:48]


# ---------------------------------------------------------------- rendering


def _error_text(e: Exception, lang: str) -> str:
    if isinstance(e, datasets.DatasetError):
        return t("error.prefix", lang) + problem(e.code, e.params, lang)
    return t("error.prefix", lang) + t("error.unexpected", lang, detail=f"{type(e).__name__}: {e}")


def problems_frame(rep: dict | None, lang: str) -> str:
    cols = [t(f"dataset.col_{c}", lang) for c in ("file", "line", "field", "severity", "reason")]
    rows = []
    for p in (rep or {}).get("problems", []):
        rows.append(
            [
                Path(p["file"]).name,
                "" if p["line"] is None else p["line"],
                p["field"],
                t(f"dataset.severity_{p['severity']}", lang),
                problem(p["code"], p["params"], lang),
            ]
        )
    return html_table(cols, rows)


def summary_markdown(rep: dict, lang: str) -> str:
    lines = [
        t("dataset.detected", lang, fmt=rep["format"]),
        t(
            "dataset.summary",
            lang,
            records=rep["records"],
            good=rep["good"],
            bad=rep["bad"],
            duplicates=rep["duplicates"],
            multi=rep["multi_turn"],
            system=rep["with_system"],
            warnings=rep["warnings"],
            mb=f"{rep['bytes'] / 1e6:.2f}",
            sec=f"{rep['seconds']:.2f}",
        ),
    ]
    if rep["format"] != "paddlenlp":
        lines.append(t("dataset.needs_convert", lang, fmt=rep["format"]))
    if rep["duplicate_examples"]:
        lines.append(
            "; ".join(t("dataset.dup_example", lang, line=d[1], first=d[3]) for d in rep["duplicate_examples"][:3])
        )
    if rep["problems_omitted"]:
        lines.append(t("dataset.omitted", lang, n=rep["problems_omitted"]))
    lines.append(t("dataset.ok", lang) if rep["ok"] else t("dataset.not_ok", lang))
    return "\n\n".join(lines)


def conversation(records: list[dict], index: int, lang: str) -> list[dict]:
    if not records:
        return []
    rec = records[max(0, min(int(index or 0), len(records) - 1))]
    msgs = []
    if rec.get("system"):
        msgs.append({"role": "assistant", "content": t("dataset.system_prompt", lang, text=rec["system"])})
    for q, a in datasets.as_turns(rec):
        msgs.append({"role": "user", "content": q})
        msgs.append({"role": "assistant", "content": a})
    return msgs


def token_html(stats: dict | None, lang: str) -> str:
    if not stats:
        return ""
    s, tot = stats["src"], stats["total"]
    summary = t(
        "dataset.token_summary",
        lang,
        n=stats["records"],
        src_mean=f"{s['mean']:.1f}",
        src_p95=f"{s['p95']:.0f}",
        src_max=s["max"],
        tot_mean=f"{tot['mean']:.1f}",
        tot_p95=f"{tot['p95']:.0f}",
        tot_max=tot["max"],
        src_length=stats["src_length"],
        max_length=stats["max_length"],
        trunc_src=stats["truncated_src"],
        trunc_total=stats["truncated_total"],
        dropped=stats.get("dropped", 0),
    )
    # markdown-style bold is not rendered inside HTML: use <b>
    summary = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", summary)
    return f"<p id='token-summary'>{summary}</p>"


def token_figures(stats: dict | None, lang: str) -> tuple:
    """Histograms of src and src+tgt token counts with the length limits marked (None, None: no stats)."""
    if not stats:
        return None, None
    return (histogram_figure(stats["src"], t("dataset.hist_src", lang), stats["src_length"], "src_length"),
            histogram_figure(stats["total"], t("dataset.hist_total", lang), stats["max_length"], "max_length"))


# ---------------------------------------------------------------- handlers


def run_validation(source: str | None, fmt: str, name: str, lang: str, suggest: bool = False):
    """-> summary, problems, report state, records state, slider, conversation, name.

    ``suggest``: a new file was chosen, so propose a dataset name from its file name.
    """
    empty = problems_frame(None, lang)
    if not source:
        return t("dataset.none_selected", lang), empty, None, [], gr.update(maximum=1, value=0), [], name
    try:
        rep = datasets.validate(source, fmt=fmt or "auto").to_dict()
        records = datasets.preview(source, MAX_PREVIEW, rep["format"])
    except Exception as e:  # noqa: BLE001 - the UI must show, not crash
        return _error_text(e, lang), empty, None, [], gr.update(maximum=1, value=0), [], name
    slider = gr.update(maximum=max(len(records) - 1, 1), value=0)
    return (
        summary_markdown(rep, lang),
        problems_frame(rep, lang),
        rep,
        records,
        slider,
        conversation(records, 0, lang),
        suggest_name(source) if suggest or not name else name,
    )


def relocalize_validation(rep: dict | None, records: list, index: int, stats: dict | None, lang: str):
    """Re-render the last results in the new language without recomputing them."""
    if rep is None:
        return (t("dataset.none_selected", lang), problems_frame(None, lang), [], token_html(stats, lang),
                *token_figures(stats, lang), datasets_frame(lang))
    return (
        summary_markdown(rep, lang),
        problems_frame(rep, lang),
        conversation(records, index, lang),
        token_html(stats, lang),
        *token_figures(stats, lang),
        datasets_frame(lang),
    )


def run_token_stats(source, fmt, tokenizer, src_length, max_length, lang):
    if not source:
        return None, t("dataset.none_selected", lang), None, None
    if not tokenizer:
        return None, t("dataset.no_tokenizer", lang), None, None
    try:
        stats = datasets.token_stats(source, tokenizer, int(src_length), int(max_length), fmt=fmt or "auto")
    except Exception as e:  # noqa: BLE001
        return None, _error_text(e, lang), None, None
    return stats, token_html(stats, lang), *token_figures(stats, lang)


def run_import(source, fmt, name, dev_ratio, skip_bad, lang):
    if not source:
        return t("dataset.none_selected", lang), gr.update(), gr.update()
    try:
        meta = datasets.import_dataset(
            source,
            (name or "").strip(),
            dev_ratio=float(dev_ratio),
            fmt=fmt or "auto",
            skip_bad=bool(skip_bad),
            original_name=Path(source).name,
        )
    except Exception as e:  # noqa: BLE001
        return _error_text(e, lang), gr.update(), gr.update()
    msg = t("dataset.imported", lang, name=meta["name"], train=meta["train"], dev=meta["dev"], fmt=meta["format"])
    return msg, datasets_frame(lang), gr.update(choices=workspace_files())


# ---------------------------------------------------------------- layout


def build_dataset_tab(ctx) -> DatasetTab:
    lang0 = ctx.initial_lang
    tr = ctx.tr
    with ctx.tr(gr.Tab(ctx.text("dataset.tab"), id="dataset", elem_id="tab-dataset"), "dataset.tab") as tab:
        source = gr.State(None)
        report = gr.State(None)
        records = gr.State([])
        stats = gr.State(None)
        ctx.heading("dataset.source")
        with gr.Row():
            upload = tr(
                gr.File(label=ctx.text("dataset.upload"), file_types=[".json", ".jsonl"], elem_id="dataset-upload"),
                "dataset.upload",
            )
            with gr.Column():
                picker = tr(
                    gr.Dropdown(choices=workspace_files(), value=None, label=ctx.text("dataset.pick"), elem_id="dataset-pick"),
                    "dataset.pick",
                )
                with gr.Row():
                    fmt = tr(gr.Dropdown(FORMAT_CHOICES, value="auto", label=ctx.text("dataset.format")), "dataset.format")
                    validate_btn = tr(gr.Button(ctx.text("dataset.validate"), variant="primary"), "dataset.validate", "value")
        ctx.heading("dataset.result")
        summary = gr.Markdown(ctx.text("dataset.none_selected"), elem_id="dataset-summary")
        problems_df = tr(
            gr.HTML(problems_frame(None, lang0), label=ctx.text("dataset.problems"), show_label=True, container=True, elem_id="dataset-problems"),
            "dataset.problems",
        )
        with tr(gr.Accordion(ctx.text("dataset.preview"), open=True), "dataset.preview"):
            record = tr(gr.Slider(0, 1, value=0, step=1, label=ctx.text("dataset.record")), "dataset.record")
            chat = gr.Chatbot(height=260, elem_id="dataset-preview", show_label=False)
        ctx.heading("dataset.tokens")
        with gr.Row():
            tok_choices = tokenizer_choices()
            tokenizer = tr(
                gr.Dropdown(tok_choices, value=tok_choices[0][1] if tok_choices else None, label=ctx.text("dataset.tokenizer")),
                "dataset.tokenizer",
            )
            src_length = tr(gr.Number(1024, precision=0, minimum=1, label=ctx.text("dataset.src_length")), "dataset.src_length")
            max_length = tr(gr.Number(2048, precision=0, minimum=2, label=ctx.text("dataset.max_length")), "dataset.max_length")
            tokens_btn = tr(gr.Button(ctx.text("dataset.compute_tokens")), "dataset.compute_tokens", "value")
        tokens_out = gr.HTML(elem_id="dataset-tokens")
        with gr.Row(elem_id="token-hists"):
            hist_src = gr.Plot(elem_id="token-hist-src", show_label=False)
            hist_total = gr.Plot(elem_id="token-hist-total", show_label=False)
        ctx.heading("dataset.import")
        with gr.Row():
            name = tr(gr.Textbox(label=ctx.text("dataset.name"), elem_id="dataset-name"), "dataset.name")
            dev_ratio = tr(gr.Slider(0.0, 0.5, value=0.1, step=0.01, label=ctx.text("dataset.dev_ratio")), "dataset.dev_ratio")
            skip_bad = tr(gr.Checkbox(False, label=ctx.text("dataset.skip_bad")), "dataset.skip_bad")
            import_btn = tr(gr.Button(ctx.text("dataset.import_btn"), variant="primary"), "dataset.import_btn", "value")
        import_msg = gr.Markdown(elem_id="dataset-import-msg")
        table = tr(
            gr.HTML(datasets_frame(lang0), label=ctx.text("dataset.list"), show_label=True, container=True, elem_id="dataset-list"),
            "dataset.list",
        )

    lang = ctx.lang
    val_outputs = [summary, problems_df, report, records, record, chat, name]
    def on_new_file(src, f, n, lg):
        return run_validation(src, f, n, lg, suggest=True)

    upload.upload(lambda p: p, inputs=upload, outputs=source).then(
        on_new_file, inputs=[source, fmt, name, lang], outputs=val_outputs
    )
    picker.input(lambda p: p, inputs=picker, outputs=source).then(
        on_new_file, inputs=[source, fmt, name, lang], outputs=val_outputs
    )
    validate_btn.click(run_validation, inputs=[source, fmt, name, lang], outputs=val_outputs)
    def refresh_lists(lg):
        return gr.update(choices=workspace_files()), gr.update(choices=tokenizer_choices()), datasets_frame(lg)

    ctx.picker(tab, refresh_lists, [lang], [picker, tokenizer, table])
    record.change(conversation, inputs=[records, record, lang], outputs=chat)
    tokens_btn.click(
        run_token_stats, inputs=[source, fmt, tokenizer, src_length, max_length, lang],
        outputs=[stats, tokens_out, hist_src, hist_total]
    )
    import_btn.click(run_import, inputs=[source, fmt, name, dev_ratio, skip_bad, lang], outputs=[import_msg, table, picker])
    ctx.relocalize.append(
        (relocalize_validation, [report, records, record, stats, lang],
         [summary, problems_df, chat, tokens_out, hist_src, hist_total, table])
    )
    return DatasetTab(
        upload, picker, fmt, validate_btn, summary, problems_df, record, chat, tokenizer, tokens_out,
        name, dev_ratio, skip_bad, import_btn, import_msg, table,
    )
