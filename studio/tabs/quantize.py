"""Quantize tab: pick a model, a preset and calibration data; `paddle-studio quantize` runs as a
subprocess with its log in a file; the report (size, eval loss / perplexity / exact match
before and after, time) shows as a table and bar charts; "Open in Chat" picks the result there.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import gradio as gr

from core import workspace
from core.data import datasets
from core.quant import pipeline as quantize
from studio.charts import bar_chart_svg, html_table
from studio.locales import t

ROOT = Path(__file__).resolve().parents[2]


def model_choices() -> list[tuple[str, str]]:
    """Merged or base models (not adapters, not already quantized): workspace models and run outputs."""
    out = []
    root = workspace.models_dir()
    if root.is_dir():
        for d in sorted(root.iterdir()):
            if d.is_dir() and not d.name.startswith(".") and (d / "config.json").is_file() and not quantize.is_quantized(d):
                out.append((f"models/{d.name}", str(d)))
    rroot = workspace.runs_dir()
    if rroot.is_dir():
        for d in sorted(rroot.glob("*/output"), reverse=True):
            if (d / "studio_model.json").is_file() and (d / "config.json").is_file() and not (d / "lora_config.json").is_file():
                out.append((str(d.relative_to(workspace.home())), str(d)))
    return out


def preset_choices() -> list[tuple[str, str]]:
    return [(name, name) for name in quantize.list_presets()]


def preset_text(name: str | None) -> str:
    if not name:
        return ""
    p = quantize.load_preset(name)
    return f"{p.get('description', '')}  \n`{p.get('command', '')}`"


def data_choices(lang: str) -> list[tuple[str, str]]:
    return [(t("quant.data_auto", lang), "")] + [(m["name"], m["path"]) for m in datasets.list_datasets()]


def report_html(rep: dict, lang: str) -> str:
    rows = [[r["metric"], r["before"], r["after"]] for r in rep.get("table", [])]
    table = html_table([t("quant.col_metric", lang), t("quant.col_before", lang), t("quant.col_after", lang)], rows,
                       elem_id="quant-report-table")
    size = rep["size"]
    mb = 1 / (1 << 20)
    bars_size = bar_chart_svg([t("quant.weights_mb", lang)],
                              {t("quant.col_before", lang): [size["before_bytes"] * mb],
                               t("quant.col_after", lang): [size["after_bytes"] * mb]},
                              title=t("quant.chart_size", lang), width=320)
    ev = rep.get("eval") or {}
    bars_q = ""
    if ev.get("before") and ev.get("after"):
        keys = [k for k in ("perplexity", "token_accuracy", "exact_match") if ev["before"].get(k) is not None]
        bars_q = bar_chart_svg(keys, {t("quant.col_before", lang): [ev["before"][k] for k in keys],
                                      t("quant.col_after", lang): [ev["after"][k] for k in keys]},
                               title=t("quant.chart_quality", lang), width=420)
    head = t("quant.done", lang, out=rep["out"], preset=rep["preset"], ratio=f"{size['ratio']:.2f}",
             s=f"{rep['seconds']['total']:.1f}")
    return f"<p id='quant-summary'>{head}</p>{table}<div class='studio-hists'>{bars_size}{bars_q}</div>"


def run_quantize(model, preset, data, calib_steps, eval_limit, name, lang):
    """Generator: (log, report html, output path) while the quantize subprocess runs."""
    if not model or not preset:
        yield t("quant.pick_first", lang), "", None
        return
    name = (name or "").strip()
    code = workspace.check_name(name)
    if code:
        yield t("error.prefix", lang) + t(f"problem.{code}", lang, name=name), "", None
        return
    out_dir = workspace.models_dir() / name
    if out_dir.exists():
        yield t("error.prefix", lang) + t("merge.exists", lang, path=str(out_dir)), "", None
        return
    logs = workspace.home() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"quantize-{name}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    json_path = log_path.with_suffix(".json")
    argv = [sys.executable, "-m", "core.cli", "quantize", "--model", model, "--preset", preset, "--out", str(out_dir),
            "--json", "--eval-limit", str(int(eval_limit or 32))]
    if data:
        argv += ["--data", data]
    if calib_steps:
        argv += ["--calib-steps", str(int(calib_steps))]
    with open(log_path, "wb") as err, open(json_path, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=str(ROOT))
    try:
        size = -1
        while proc.poll() is None:
            time.sleep(0.3)
            if log_path.stat().st_size != size:
                size = log_path.stat().st_size
                yield _tail(log_path), gr.skip(), gr.skip()
        log = _tail(log_path)
        if proc.returncode != 0:
            last = [ln for ln in log.splitlines() if ln.strip()][-1:] or [""]
            yield log, t("error.prefix", lang) + last[0].removeprefix("paddle-studio quantize: "), None
            return
        rep = json.loads(json_path.read_text(encoding="utf-8"))
        yield log, report_html(rep, lang), rep["out"]
    finally:
        if proc.poll() is None:  # the page went away or Stop: end the child, it leaves no output behind
            proc.terminate()


def _tail(path: Path, n: int = 8000) -> str:
    data = path.read_bytes()[-n:]
    return data.decode("utf-8", errors="replace")


def build_quantize_tab(ctx, chat_model):
    tr = ctx.tr
    lang0 = ctx.initial_lang
    with tr(gr.Tab(ctx.text("quant.tab"), id="quantize", elem_id="tab-quantize"), "quant.tab"):
        with gr.Row():
            model = tr(gr.Dropdown(model_choices(), label=ctx.text("quant.model"), elem_id="quant-model"), "quant.model")
            presets = preset_choices()
            preset = tr(gr.Dropdown(presets, value=presets[0][1] if presets else None, label=ctx.text("quant.preset"),
                                    elem_id="quant-preset"), "quant.preset")
            refresh = tr(gr.Button(ctx.text("dataset.refresh"), size="sm"), "dataset.refresh", "value")
        desc = gr.Markdown(preset_text(presets[0][1]) if presets else "", elem_id="quant-preset-desc")
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
        report = gr.HTML(elem_id="quant-report")
        log = tr(gr.Textbox(lines=10, max_lines=10, label=ctx.text("quant.log"), autoscroll=True, interactive=False,
                            elem_id="quant-log"), "quant.log")
        result = gr.State(None)
    lang = ctx.lang

    def suggest(m, p):
        return f"{Path(m).parent.name if Path(m).name == 'output' else Path(m).name}-{p}"[:60] if m and p else gr.skip()

    def go(m, p, dt, st, lim, nm, lg):
        for lg_text, rep, out in run_quantize(m, p, dt, st, lim, nm, lg):
            yield lg_text, rep, out, gr.update(interactive=bool(out)) if out else gr.skip()

    def to_chat(out):
        from studio.tabs.chat import model_choices as chat_choices

        key = f"model:{out}"
        return gr.update(choices=chat_choices(), value=key), gr.Tabs(selected="chat")

    preset.change(preset_text, inputs=preset, outputs=desc, show_progress="hidden")
    model.change(suggest, inputs=[model, preset], outputs=name, show_progress="hidden")
    preset.change(suggest, inputs=[model, preset], outputs=name, show_progress="hidden")
    run.click(go, inputs=[model, preset, data, steps, limit, name, lang], outputs=[log, report, result, open_chat])
    open_chat.click(to_chat, inputs=result, outputs=[chat_model, ctx.tabs])

    def lists(lg):
        return gr.update(choices=model_choices()), gr.update(choices=data_choices(lg))

    refresh.click(lists, inputs=lang, outputs=[model, data])
    ctx.on_load.append((lists, [lang], [model, data]))
