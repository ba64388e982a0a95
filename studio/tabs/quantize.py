"""Quantize tab: pick a model, a preset and calibration data; Run starts a quantize job (it
survives a reload or a studio restart); the report (size, eval loss / perplexity / exact match
before and after, time) shows as a table and bar charts with values; "Open in Chat" picks the
result there.
"""

from __future__ import annotations

import time
from html import escape
from pathlib import Path

import gradio as gr

from core import catalog, jobs
from core.quant import pipeline, presets
from studio.charts import bar_figure, duration, html_table, num, size
from studio.jobview import JobPanel
from studio.verdict import verify_warning
from studio.locales import description, refusal, t


def model_choices() -> list[tuple[str, str]]:
    """Models that can be quantized: base, trained and merged (not adapters, not quantized ones)."""
    return [(m["label"], m["path"]) for m in catalog.models(["base", "trained", "merged"])]


def preset_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in presets.list_presets()]


def preset_text(name: str | None, lang: str = "en") -> str:
    if not name:
        return ""
    p = presets.load_preset(name)
    return f"{description(p, lang)}  \n`{p.get('command', '')}`"


def data_choices(lang: str) -> list[tuple[str, str]]:
    return [(t("quant.data_auto", lang), "")] + [(m["name"], m["path"]) for m in catalog.datasets()]


def _cell(metric: str, v, lang: str) -> str:
    if metric == "weight_bytes":
        return size(v)
    if metric == "seconds":
        return duration(v, lang)
    return num(v)


def _metric(metric: str, lang: str) -> str:
    """A report row's metric: its key in English (what the CLI's report says), its name in Chinese."""
    key = "quant.m_weight_bytes" if metric == "weight_bytes" else f"evaluate.m_{metric}"
    return metric if lang == "en" or t(key, lang) == key else t(key, lang)


def report_parts(rep: dict, lang: str) -> tuple[str, object, object]:
    """(summary + table html, size figure, quality figure or None)."""
    rows = [[_metric(r["metric"], lang), _cell(r["metric"], r["before"], lang), _cell(r["metric"], r["after"], lang)]
            for r in rep.get("table", [])]
    table = html_table([t("quant.col_metric", lang), t("quant.col_before", lang), t("quant.col_after", lang)], rows,
                       elem_id="quant-report-table")
    sz = rep["size"]
    times = sz["before_bytes"] / max(sz["after_bytes"], 1)  # from the bytes: the report's rounded ratio can round twice
    before, after = t("quant.col_before", lang), t("quant.col_after", lang)
    mib = 1 / (1 << 20)
    fig_size = bar_figure([t("quant.weights_mb", lang)], {before: [sz["before_bytes"] * mib], after: [sz["after_bytes"] * mib]},
                          t("quant.chart_size", lang), y_title="MiB", fmt=lambda v: f"{v:.3g} MiB", height=280)
    ev = rep.get("eval") or {}
    fig_q = None
    if ev.get("before") and ev.get("after"):
        keys = [k for k in ("perplexity", "token_accuracy", "exact_match") if ev["before"].get(k) is not None]
        fig_q = bar_figure([_metric(k, lang) for k in keys], {before: [ev["before"][k] for k in keys], after: [ev["after"][k] for k in keys]},
                           t("quant.chart_quality", lang), height=280)
    head = t("quant.done", lang, out=rep["out"], preset=rep["preset"], ratio=f"{times:.3g}",
             before=size(sz["before_bytes"]), after=size(sz["after_bytes"]), s=duration(rep["seconds"]["total"], lang))
    # what the engine says about itself against upstream (GPTQ's storage, A8W8's activation-scale method)
    notes = "".join(f"<p class='quant-note'>{escape(str(n.get('message_zh' if lang == 'zh' else 'message') or ''))}</p>"
                    for n in rep.get("notes", []) if isinstance(n, dict))
    return f"<p id='quant-summary'>{head}</p>{notes}{table}", fig_size, fig_q


def job_result(info: dict, lang: str) -> list:
    rep = info.get("result")
    if not rep:  # a new (or failed) job: the last job's report and charts are not its results
        return ["", None, None, None, gr.update(interactive=False)]
    html, fs, fq = report_parts(rep, lang)
    return [html, fs, fq, rep["out"], gr.update(interactive=True)]


def build_quantize_tab(ctx, chat_model):
    tr = ctx.tr
    lang0 = ctx.initial_lang
    with tr(gr.Tab(ctx.text("quant.tab"), id="quantize", elem_id="tab-quantize"), "quant.tab") as tab:
        with gr.Row():
            model = tr(gr.Dropdown(model_choices(), label=ctx.text("quant.model"), elem_id="quant-model"), "quant.model")
            pres = preset_choices()
            preset = tr(gr.Dropdown(pres, value=pres[0][1] if pres else None, label=ctx.text("quant.preset"),
                                    elem_id="quant-preset"), "quant.preset")
        desc = gr.Markdown(preset_text(pres[0][1], lang0) if pres else "", elem_id="quant-preset-desc")
        with gr.Row():
            data = tr(gr.Dropdown(data_choices(lang0), value="", label=ctx.text("quant.data"), elem_id="quant-data"),
                      "quant.data")
            steps = tr(gr.Number(0, precision=0, minimum=0, label=ctx.text("quant.calib_steps")), "quant.calib_steps")
            limit = tr(gr.Number(32, precision=0, minimum=0, label=ctx.text("quant.eval_limit")), "quant.eval_limit")
            name = tr(gr.Textbox(label=ctx.text("quant.name"), elem_id="quant-name"), "quant.name")
        with gr.Row():
            run = tr(gr.Button(ctx.text("quant.run"), variant="primary", elem_id="quant-run"), "quant.run", "value")
            open_chat = tr(gr.Button(ctx.text("quant.open_chat"), interactive=False, elem_id="quant-open-chat"),
                           "quant.open_chat", "value")
        with tr(gr.Accordion(ctx.text("quant.from_config"), open=False, elem_id="quant-from-config"),
                "quant.from_config", "label"):
            with gr.Row():
                cfg_file = tr(gr.File(label=ctx.text("quant.config_file"), file_types=[".json"], type="filepath",
                                      elem_id="quant-config-file"), "quant.config_file")
                cfg_start = tr(gr.Button(ctx.text("quant.config_start"), interactive=False, elem_id="quant-config-start"),
                               "quant.config_start", "value")
            cfg_plan_md = gr.Markdown(elem_id="quant-config-plan")
            cfg_plan = gr.State(None)
        note = gr.Markdown(elem_id="quant-note")
        report = gr.HTML(elem_id="quant-report")
        with gr.Row():
            plot_size = gr.Plot(elem_id="quant-plot-size", show_label=False)
            plot_quality = gr.Plot(elem_id="quant-plot-quality", show_label=False)
        result = gr.State(None)
        to_chat_tab = gr.Textbox(visible=False)  # set by "open in Chat": the page then shows the Chat tab
        started = gr.State(None)
        suggested = gr.State([])  # the names this tab suggested, newest last: a name typed over them is kept
        panel = JobPanel(ctx, "quantize", "quant", [report, plot_size, plot_quality, result, open_chat], job_result)
    lang = ctx.lang

    def proposal(m, p) -> str:
        return f"{Path(m).parent.name if Path(m).name == 'output' else Path(m).name}-{p}"[:60] if m and p else ""

    def typed(nm, seen) -> bool:
        """The box holds a name the user typed: neither empty nor one this tab suggested."""
        return bool((nm or "").strip()) and (nm or "").strip() not in (seen or [])

    def suggest(m, p, nm, seen):
        """A name from model + preset, unless one was typed; the suggestion is remembered."""
        new = proposal(m, p)
        if not new or typed(nm, seen):
            return gr.skip(), seen
        return new, [*(seen or [])[-19:], new]

    def start(m, p, dt, st, lim, nm, seen, lg):
        """The job writes the name the box shows once this returns: a typed name as typed; a suggested
        (or empty) one as suggested for the model and preset picked at the click, even when the click
        came before the suggestion for that pick did."""
        if not m or not p:
            return t("quant.pick_first", lg), None, gr.skip(), seen
        own = typed(nm, seen)
        nm = (nm or "").strip() if own else proposal(m, p)
        seen = seen if own or nm in (seen or []) else [*(seen or [])[-19:], nm]
        try:
            job = pipeline.submit(m, p, nm, data=dt or None, calib_steps=int(st or 0) or None,
                                  eval_limit=int(lim if lim is not None else 32))
        except jobs.Refused as e:
            return t("error.prefix", lg) + refusal(e, lg), None, nm, seen
        return "", job, nm, seen

    def to_chat(out):
        from studio.tabs.chat import model_choices as chat_choices

        return gr.update(choices=chat_choices(), value=f"model:{out}"), f"{out} {time.time()}"

    def read_config(f, m, seen, lg):
        """The uploaded file's plan; the model picked above stands in when the file's is not here. The
        file's own output_dir names the result: it fills the name box (a name typed after this wins)."""
        if not f:
            return "", None, gr.update(interactive=False), gr.skip(), seen
        plan = pipeline.plan_from_paddlenlp(f)
        if m and any(p["field"] == "model_name_or_path" for p in plan["problems"]):
            plan = pipeline.plan_from_paddlenlp(f, model=m)
        lines = []
        if plan.get("preset"):
            pr = plan["preset"]
            lines.append(t("quant.config_plan", lg, what=description(pr, lg), steps=pr.get("calib_steps", "-"),
                           batch=pr.get("batch_size", "-"), name=plan["name"]))
        lines += [f"- {t('quant.config_note', lg)}: {n}" for n in plan.get("notes", [])]
        lines += [f"- **{t('quant.config_problem', lg)}:** {p['message']}" for p in plan.get("problems", [])]
        out = plan.get("name") or ""
        return ("\n".join(lines), (plan if plan["ok"] else None), gr.update(interactive=plan["ok"]),
                out or gr.skip(), [*(seen or [])[-19:], out] if out else seen)

    def start_config(plan, lim, nm, seen, lg):
        """The plan's run under the file's output_dir name, or under a name typed after the upload;
        the box then shows the name written."""
        if not plan:
            return t("quant.pick_first", lg), None, gr.skip()
        out = (nm or "").strip() if typed(nm, seen) else plan["name"]
        try:
            return "", pipeline.submit(plan["model"], plan["preset"], out, data=plan["data"],
                                       eval_limit=int(lim if lim is not None else 32)), out
        except jobs.Refused as e:
            return t("error.prefix", lg) + refusal(e, lg), None, out

    cfg_file.change(read_config, inputs=[cfg_file, model, suggested, lang],
                    outputs=[cfg_plan_md, cfg_plan, cfg_start, name, suggested], show_progress="hidden")
    cfg_start.click(start_config, inputs=[cfg_plan, limit, name, suggested, lang], outputs=[note, started, name]).then(
        panel.follow, inputs=[started, lang], outputs=[panel.job, *panel.outputs])
    preset.change(preset_text, inputs=[preset, lang], outputs=desc, show_progress="hidden")
    ctx.relocalize.append((preset_text, [preset, lang], [desc]))
    model.change(suggest, inputs=[model, preset, name, suggested], outputs=[name, suggested], show_progress="hidden")
    model.change(verify_warning, inputs=[model, lang], outputs=note, show_progress="hidden")
    preset.change(suggest, inputs=[model, preset, name, suggested], outputs=[name, suggested], show_progress="hidden")
    run.click(start, inputs=[model, preset, data, steps, limit, name, suggested, lang],
              outputs=[note, started, name, suggested]).then(
        panel.follow, inputs=[started, lang], outputs=[panel.job, *panel.outputs])
    ctx.go_to(open_chat.click(to_chat, inputs=result, outputs=[chat_model, to_chat_tab]), "chat", to_chat_tab)

    def lists(lg):
        return gr.update(choices=model_choices()), gr.update(choices=data_choices(lg))

    ctx.picker(tab, lists, [lang], [model, data])
