"""Dataset tab: upload or pick a file, validate it line by line, preview, token lengths, import;
browse a workspace dataset page by page; mix datasets by ratio into a new one.

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
from core.data import mix as mixing
from studio.charts import histogram_figure, html_table
from studio.locales import TEXT, problem, t

FORMAT_CHOICES = ["auto", *datasets.FORMATS]
MAX_PREVIEW = 50
PAGE_SIZE = 10  # rows of a page of the dataset browser
MIX_SLOTS = 4  # datasets a mix can take in the studio (the CLI takes any number)


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


def field_text(fld: str, lang: str) -> str:
    """A problem's field as a person reads it: a JSON-array item's "[61]" is "record 62" (counted
    from 1, as lines are), "[61].tgt" is "tgt of record 62"; other fields are their key path."""
    index, inner = datasets.split_item_field(fld)
    if index is None:
        return inner
    if not inner:
        return t("dataset.field_record", lang, n=index + 1)
    return t("dataset.field_in_record", lang, field=inner, n=index + 1)


def no_records(rep: dict | None) -> tuple[str, dict] | None:
    """(code, params) when the checked file holds no record at all (empty, blank lines, ``[]``)."""
    if not rep or rep.get("records"):
        return None
    codes = [(p["code"], p["params"]) for p in rep.get("problems", [])]
    if codes and all(c in datasets.EMPTY_CODES for c, _ in codes):
        return codes[0]
    return None


def record_problem(code: str, params: dict, lang: str) -> str:
    """A record's problem in ``lang``, with the engine's words for a type (``expected``, ``got``) and
    Python's JSON parser message (``detail``) in it too."""
    params = dict(params or {})
    for k, group in (("expected", "expected"), ("got", "got"), ("detail", "json")):
        v = params.get(k)
        if isinstance(v, str) and f"dataset.{group}.{v}" in TEXT:
            params[k] = t(f"dataset.{group}.{v}", lang)
    return problem(code, params, lang)


def problems_frame(rep: dict | None, lang: str) -> str:
    cols = [t(f"dataset.col_{c}", lang) for c in ("file", "line", "field", "severity", "reason")]
    rows = []
    # a file without one record has only its "no records" problem: the summary says it, no table
    for p in [] if no_records(rep) else (rep or {}).get("problems", []):
        rows.append(
            [
                Path(p["file"]).name,
                "" if p["line"] is None else p["line"],
                field_text(p["field"], lang),
                t(f"dataset.severity_{p['severity']}", lang),
                record_problem(p["code"], p["params"], lang),
            ]
        )
    return html_table(cols, rows)


def problems_update(rep: dict | None, lang: str):
    """The problems table, shown only when there are problems to list (never an empty table)."""
    html = problems_frame(rep, lang)
    # "hidden", not False: the box stays in the page (Gradio 6.17 mounts a visible=False component
    # lazily and could then apply a stale visible=False after a later visible=True)
    return gr.update(value=html, visible=True if "<td>" in html else "hidden")


def summary_markdown(rep: dict, lang: str) -> str:
    empty = no_records(rep)
    if empty:
        code, params = empty
        return t("dataset.no_records", lang, why=t(f"dataset.no_records_{code}", lang, **params))
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
    axes = dict(x_title=t("dataset.hist_x", lang), y_title=t("dataset.hist_y", lang),
                hover=t("dataset.hist_hover", lang, range="%{customdata}", count="%{y}"))
    return (histogram_figure(stats["src"], t("dataset.hist_src", lang), stats["src_length"], "src_length", **axes),
            histogram_figure(stats["total"], t("dataset.hist_total", lang), stats["max_length"], "max_length", **axes))


# ---------------------------------------------------------------- handlers


def run_validation(source: str | None, fmt: str, name: str, lang: str, suggest: bool = False):
    """-> summary, problems, report state, records state, slider, conversation, name.

    ``suggest``: a new file was chosen, so propose a dataset name from its file name.
    """
    empty = problems_update(None, lang)
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
        problems_update(rep, lang),
        rep,
        records,
        slider,
        conversation(records, 0, lang),
        suggest_name(source) if suggest or not name else name,
    )


def relocalize_validation(rep: dict | None, records: list, index: int, stats: dict | None, lang: str):
    """Re-render the last results in the new language without recomputing them."""
    if rep is None:
        return (t("dataset.none_selected", lang), problems_update(None, lang), [], token_html(stats, lang),
                *token_figures(stats, lang), datasets_frame(lang))
    return (
        summary_markdown(rep, lang),
        problems_update(rep, lang),
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


# ---------------------------------------------------------------- browsing and mixing


def dataset_choices() -> list[tuple[str, str]]:
    """Workspace datasets as (name, folder) for the browser and the mix pickers."""
    return [(m.get("name") or Path(m["path"]).name, m["path"]) for m in datasets.list_datasets()]


def browse_table(res: dict | None, lang: str) -> str:
    if not res:
        return ""
    cols = res["columns"]
    rows = []
    for r in res["rows"]:
        cells = [r["line"] if len(res.get("files", [1])) <= 1 else f"{r['file']}:{r['line']}"]
        if r["problem"]:
            p = r["problem"]
            reason = record_problem(p["code"], p["params"], lang)
            where = field_text(p["field"], lang) or "—"
            cells += [t("dataset.row_problem", lang, field=where, reason=reason)] + [""] * (len(cols) - 2)
        else:
            for c in cols[1:]:
                v = r[c]
                if c == "label":
                    v = t(f"dataset.kto_{v}", lang)
                cells.append(v)
        rows.append(cells)
    return html_table([t(f"dataset.col_{c}", lang) for c in cols], rows, elem_id="browse-rows")


def browse_info(res: dict | None, lang: str) -> str:
    if not res:
        return t("dataset.browse_none", lang)
    return t("dataset.browse_info", lang, page=res["page"], pages=res["pages"], total=res["total"], split=res["split"],
             fmt=res["format"], kind=res["kind"])


def run_browse(ds, split, page, lang, step: int = 0):
    """-> browse state, table, info line, page number (clamped to the pages there are)."""
    if not ds:
        return None, "", t("dataset.browse_none", lang), 1
    try:
        res = datasets.preview_page(ds, split or "train", int(page or 1) + step, PAGE_SIZE)
    except Exception as e:  # noqa: BLE001 - the UI must show, not crash
        return None, "", _error_text(e, lang), 1
    return res, browse_table(res, lang), browse_info(res, lang), res["page"]


def mix_message(result: dict | None, lang: str) -> str:
    """The last mix's outcome ({"meta": ...} or {"error": code, "params": ...}) in ``lang``."""
    if not result:
        return ""
    if "error" in result:
        if result["error"] == "unexpected":
            return t("error.prefix", lang) + t("error.unexpected", lang, detail=result["params"]["detail"])
        return t("error.prefix", lang) + problem(result["error"], result["params"], lang)
    meta = result["meta"]
    parts = ", ".join(t("dataset.mixed_part", lang, dataset=p["dataset"], taken=p["train_taken"],
                        available=p["train_available"]) for p in meta["mix"]["parts"])
    return t("dataset.mixed", lang, name=meta["name"], train=meta["train"], dev=meta["dev"], parts=parts)


def run_mix(name, seed, lang, *slots):
    """slots: dataset, ratio, dataset, ratio, … -> result state, message, list table, then the pickers."""
    parts = [(d, float(r) if r is not None else 0.0) for d, r in zip(slots[::2], slots[1::2]) if d]
    try:
        meta = mixing.mix((name or "").strip(), parts, seed=int(seed if seed is not None else 42))
        result = {"meta": meta}
    except datasets.DatasetError as e:
        result = {"error": e.code, "params": e.params}
    except Exception as e:  # noqa: BLE001
        result = {"error": "unexpected", "params": {"detail": f"{type(e).__name__}: {e}"}}
    skip = [gr.update()] * (3 + MIX_SLOTS)
    if "error" in result:
        return (result, mix_message(result, lang), *skip)
    files = gr.update(choices=workspace_files())
    ds = gr.update(choices=dataset_choices())
    return (result, mix_message(result, lang), datasets_frame(lang), files, *[ds] * (1 + MIX_SLOTS))


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
            gr.HTML(problems_frame(None, lang0), label=ctx.text("dataset.problems"), show_label=True, container=True,
                    elem_id="dataset-problems", visible="hidden"),
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
        ctx.heading("dataset.browse")
        browse = gr.State(None)
        ds0 = dataset_choices()
        with gr.Row():
            b_pick = tr(gr.Dropdown(ds0, value=None, label=ctx.text("dataset.browse_pick"), elem_id="browse-pick"),
                        "dataset.browse_pick")
            b_split = tr(gr.Radio(["train", "dev"], value="train", label=ctx.text("dataset.browse_split"),
                                  elem_id="browse-split"), "dataset.browse_split")
            b_prev = tr(gr.Button(ctx.text("dataset.browse_prev"), elem_id="browse-prev"), "dataset.browse_prev", "value")
            b_page = tr(gr.Number(1, precision=0, minimum=1, label=ctx.text("dataset.browse_page"), elem_id="browse-page"),
                        "dataset.browse_page")
            b_next = tr(gr.Button(ctx.text("dataset.browse_next"), elem_id="browse-next"), "dataset.browse_next", "value")
        b_info = gr.Markdown(ctx.text("dataset.browse_none"), elem_id="browse-info")
        b_table = gr.HTML(elem_id="browse-table")
        ctx.heading("dataset.mix")
        tr(gr.Markdown(ctx.text("dataset.mix_help")), "dataset.mix_help", "value")
        mix_dds, slots = [], []
        with gr.Row():
            for i in range(MIX_SLOTS):
                with gr.Column(min_width=160):
                    dd = tr(gr.Dropdown(ds0, value=None, label=f"{ctx.text('dataset.mix_part')} {i + 1}",
                                        elem_id=f"mix-ds-{i}"), "dataset.mix_part", "label", f"{{}} {i + 1}")
                    ratio = tr(gr.Number(1.0, minimum=0, label=ctx.text("dataset.mix_ratio"), elem_id=f"mix-ratio-{i}"),
                               "dataset.mix_ratio")
                mix_dds.append(dd)
                slots += [dd, ratio]
        with gr.Row():
            mix_name = tr(gr.Textbox(label=ctx.text("dataset.mix_name"), elem_id="mix-name"), "dataset.mix_name")
            mix_seed = tr(gr.Number(42, precision=0, label=ctx.text("dataset.mix_seed"), elem_id="mix-seed"),
                          "dataset.mix_seed")
            mix_btn = tr(gr.Button(ctx.text("dataset.mix_btn"), variant="primary", elem_id="mix-btn"),
                         "dataset.mix_btn", "value")
        mix_state = gr.State(None)
        mix_msg = gr.Markdown(elem_id="dataset-mix-msg")

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
        ds = gr.update(choices=dataset_choices())
        return (gr.update(choices=workspace_files()), gr.update(choices=tokenizer_choices()), datasets_frame(lg),
                *[ds] * (1 + MIX_SLOTS))

    ctx.picker(tab, refresh_lists, [lang], [picker, tokenizer, table, b_pick, *mix_dds])
    b_outputs = [browse, b_table, b_info, b_page]
    b_pick.change(lambda d, s_, lg: run_browse(d, s_, 1, lg), inputs=[b_pick, b_split, lang], outputs=b_outputs)
    b_split.change(lambda d, s_, lg: run_browse(d, s_, 1, lg), inputs=[b_pick, b_split, lang], outputs=b_outputs)
    b_prev.click(lambda d, s_, p, lg: run_browse(d, s_, p, lg, -1), inputs=[b_pick, b_split, b_page, lang],
                 outputs=b_outputs)
    b_next.click(lambda d, s_, p, lg: run_browse(d, s_, p, lg, +1), inputs=[b_pick, b_split, b_page, lang],
                 outputs=b_outputs)
    b_page.submit(run_browse, inputs=[b_pick, b_split, b_page, lang], outputs=b_outputs)
    mix_btn.click(run_mix, inputs=[mix_name, mix_seed, lang, *slots],
                  outputs=[mix_state, mix_msg, table, picker, b_pick, *mix_dds])

    record.change(conversation, inputs=[records, record, lang], outputs=chat)
    tokens_btn.click(
        run_token_stats, inputs=[source, fmt, tokenizer, src_length, max_length, lang],
        outputs=[stats, tokens_out, hist_src, hist_total]
    )
    import_btn.click(run_import, inputs=[source, fmt, name, dev_ratio, skip_bad, lang], outputs=[import_msg, table, picker])
    def relocalize_all(rep, recs, index, st, browsed, mixed, lg):
        # one event for the tab (each event of the language switch costs the page seconds on a loaded machine)
        return (*relocalize_validation(rep, recs, index, st, lg), browse_table(browsed, lg), browse_info(browsed, lg),
                mix_message(mixed, lg))

    ctx.relocalize.append(
        (relocalize_all, [report, records, record, stats, browse, mix_state, lang],
         [summary, problems_df, chat, tokens_out, hist_src, hist_total, table, b_table, b_info, mix_msg])
    )
    return DatasetTab(
        upload, picker, fmt, validate_btn, summary, problems_df, record, chat, tokenizer, tokens_out,
        name, dev_ratio, skip_bad, import_btn, import_msg, table,
    )
