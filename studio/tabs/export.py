"""Export tab: a base, trained or merged model becomes a static Paddle Inference folder (an export
job in its own process: tracing slows dygraph down in the process that traced). Picking a model
that cannot be exported (an adapter, a quantized folder, a ChatGLM v1 / GLM model) says why at
once; the job checks the exported graph against dygraph before it publishes the folder; "Open in
Chat" picks the result there. The job survives a reload or a studio restart.
"""

from __future__ import annotations

import time
from pathlib import Path

import gradio as gr

from core import catalog, jobs
from core.models import export
from studio.charts import duration
from studio.jobview import JobPanel
from studio.locales import refusal, t


def model_choices() -> list[tuple[str, str]]:
    """Every model but static ones: adapters and quantized folders are listed so that picking one
    says why it is not exported (and what to export instead)."""
    return [(m["label"], m["path"]) for m in catalog.models() if m["kind"] != "static"]


def why_not(path: str | None, lang: str) -> str:
    """The reason ``path`` cannot be exported, in the user's language ("" when it can)."""
    if not path:
        return ""
    try:
        export.check(path)
    except export.ExportRefused as e:
        return t("error.prefix", lang) + refusal(jobs.Refused(f"export_{e.code}", str(e), **e.params), lang)
    except (FileNotFoundError, FileExistsError) as e:
        return t("error.prefix", lang) + str(e)
    return ""


def job_result(info: dict, lang: str) -> list:
    res = info.get("result")
    if not res:
        return [t("export.running", lang, out=info.get("params", {}).get("out", ""))
                if info["status"].get("state") in jobs.ACTIVE else gr.skip(), None, gr.update(interactive=False)]
    ck = res.get("check") or {}
    text = t("export.done", lang, out=res["out"], matched=ck.get("matched", "?"), prompts=ck.get("prompts", "?"),
             tokens=ck.get("new_tokens", "?"), s=duration(res.get("seconds") or 0, lang),
             trace=duration(res.get("trace_seconds") or 0, lang))
    return [text, res["out"], gr.update(interactive=True)]


def build_export_tab(ctx, chat_model):
    tr = ctx.tr
    with tr(gr.Tab(ctx.text("export.tab"), id="export", elem_id="tab-export"), "export.tab") as tab:
        tr(gr.Markdown(ctx.text("export.about")), "export.about", "value")
        with gr.Row():
            model = tr(gr.Dropdown(model_choices(), value=None, label=ctx.text("export.model"), elem_id="export-model"),
                       "export.model")
            name = tr(gr.Textbox(label=ctx.text("export.name"), elem_id="export-name"), "export.name")
        with gr.Row():
            run = tr(gr.Button(ctx.text("export.run"), variant="primary", elem_id="export-run"), "export.run", "value")
            open_chat = tr(gr.Button(ctx.text("export.open_chat"), interactive=False, elem_id="export-open-chat"),
                           "export.open_chat", "value")
        note = gr.Markdown(elem_id="export-note")
        summary = gr.Markdown(elem_id="export-summary")
        result = gr.State(None)
        suggested = gr.State("")  # the last name the tab suggested: a name typed over it is kept
        to_chat_tab = gr.Textbox(visible=False)
        started = gr.State(None)
        panel = JobPanel(ctx, "export", "export", [summary, result, open_chat], job_result)
    lang = ctx.lang

    def picked(path, typed, last, lg):
        """The reason it cannot be exported (at once), and a name, unless one was typed."""
        if not path:
            return "", gr.skip(), last
        stem = Path(path).parent.name if Path(path).name == "output" else Path(path).name
        proposal = f"{stem}-static"[:60]
        keep = (typed or "").strip() and (typed or "").strip() != (last or "")
        return why_not(path, lg), (gr.skip() if keep else proposal), (last if keep else proposal)

    def start(path, nm, lg):
        if not path:
            return t("export.pick_first", lg), None
        try:
            return "", export.submit(path, (nm or "").strip())
        except jobs.Refused as e:
            return t("error.prefix", lg) + refusal(e, lg), None

    def to_chat(out):
        from studio.tabs.chat import model_choices as chat_choices

        return gr.update(choices=chat_choices(), value=f"model:{out}"), f"{out} {time.time()}"

    model.change(picked, inputs=[model, name, suggested, lang], outputs=[note, name, suggested], show_progress="hidden")
    ctx.relocalize.append((lambda p, lg: why_not(p, lg) if p else gr.skip(), [model, lang], [note]))
    run.click(start, inputs=[model, name, lang], outputs=[note, started]).then(
        panel.follow, inputs=[started, lang], outputs=[panel.job, *panel.outputs])
    ctx.go_to(open_chat.click(to_chat, inputs=result, outputs=[chat_model, to_chat_tab]), "chat", to_chat_tab)
    ctx.picker(tab, lambda: gr.update(choices=model_choices()), [], [model])
