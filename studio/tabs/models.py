"""Models tab: every model in the workspace (family, parameters, size, chat template, where it came
from), and a folder the user already has checked and imported (a job with a progress bar; PyTorch
weights converted). The table follows the workspace: an import, a merge or a quantized model shows
up without a reload, and every other tab offers it at once.
"""

from __future__ import annotations

import gradio as gr

from core import catalog, jobs
from core.models import imports
from studio.charts import html_table
from studio.jobview import JobPanel
from studio.locales import TEXT, refusal, t


def _count(n) -> str:
    if not n:
        return ""
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            return f"{n / div:.3g} {unit}"
    return str(n)


def _size(n) -> str:
    if n is None:
        return ""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{n} B"
        n /= 1024


def origin_text(origin: dict | None, lang: str) -> str:
    """Where a model came from (core.models.imports.origin), in the user's language."""
    if not origin:
        return ""
    params = {k: v for k, v in origin.items() if k != "code"}
    if "how" in params:
        params["how"] = t(f"models.how.{params['how']}", lang)
    if "method" in params and f"models.method.{params['method']}" in TEXT:
        params["method"] = t(f"models.method.{params['method']}", lang)
    return t(f"models.origin.{origin['code']}", lang, **params)


def folder_error(e: Exception, lang: str) -> str:
    """Why a folder cannot be imported (core.models.imports.ModelFolderError), in the user's language."""
    code = getattr(e, "code", None)
    if code:
        key = code if code.startswith("problem.") else f"models.err.{code}"
        if key in TEXT:
            return t(key, lang, **e.params)
    return str(e)


def models_table(lang: str) -> str:
    rows = [[m["name"], t(f"models.kind_{m['kind']}", lang), m["family"] or "?", _count(m["parameters"]),
             _size(m["size_bytes"]), t("models.yes", lang) if m["chat_template"] else t("models.no", lang),
             origin_text(m["origin"], lang)]
            for m in catalog.model_rows()]
    cols = [t(f"models.col_{c}", lang) for c in ("name", "kind", "family", "params", "size", "template", "origin")]
    return html_table(cols, rows, elem_id="models-table", empty=t("models.empty", lang))


def inspect_report(info: dict, lang: str) -> str:
    return t("models.report", lang, path=info["path"], family=info["family"], arch=info["architecture"],
             fmt=t(f"models.format_{info['format']}", lang), files=", ".join(info["weights"]),
             params=_count(info["parameters"]) or "?", dtype=info["dtype"], size=_size(info["size_bytes"]),
             tok=info["tokenizer"], template=t("models.yes", lang) if info["chat_template"] else t("models.no", lang))


def import_result(info: dict, lang: str) -> list:
    res = info.get("result")
    if not res:
        return [gr.skip()]
    return [t("models.imported", lang, name=res["name"], params=_count(res["parameters"]), secs=res["seconds"],
              how=t("models.converted", lang) if res["converted"] else "")]


def build_models_tab(ctx):
    tr = ctx.tr
    with tr(gr.Tab(ctx.text("models.tab"), id="models", elem_id="tab-models"), "models.tab") as tab:
        ctx.heading("models.list")
        table = gr.HTML(models_table(ctx.initial_lang), elem_id="models-box")
        ctx.heading("models.import")
        with gr.Row():
            folder = tr(gr.Textbox(label=ctx.text("models.folder"), placeholder="/data/Qwen2-0.5B", elem_id="models-folder",
                                   scale=3), "models.folder")
            name = tr(gr.Textbox(label=ctx.text("models.name"), elem_id="models-name", scale=2), "models.name")
            link = tr(gr.Checkbox(False, label=ctx.text("models.link"), elem_id="models-link"), "models.link")
        with gr.Row():
            inspect_btn = tr(gr.Button(ctx.text("models.inspect"), elem_id="models-inspect"), "models.inspect", "value")
            import_btn = tr(gr.Button(ctx.text("models.import_btn"), variant="primary", elem_id="models-import"),
                            "models.import_btn", "value")
        report = gr.Markdown(elem_id="models-report")
        done = gr.Markdown(elem_id="models-imported")
        panel = JobPanel(ctx, "import", "import", [done], import_result)
        started = gr.State(None)
        suggested = gr.State("")  # the last name the tab suggested: a name typed over it is kept
    lang = ctx.lang

    def check(path, lg):
        if not (path or "").strip():
            return t("models.folder_first", lg)
        try:
            return inspect_report(imports.inspect(path.strip()), lg)
        except (OSError, ValueError) as e:
            return t("error.prefix", lg) + folder_error(e, lg)

    def suggest(path, typed, last):
        """The folder's name for the name box, unless one was typed (neither empty nor the last suggestion)."""
        from pathlib import Path

        if not (path or "").strip() or ((typed or "").strip() and (typed or "").strip() != (last or "")):
            return gr.skip(), last
        proposal = Path(path.strip().rstrip("/")).name[:60]
        return proposal, proposal

    def start(path, nm, last, lk, lg):
        """Import under the name the box shows once this returns: a typed one as typed; an empty or
        suggested one as the folder's name (the click can come before the folder's blur did)."""
        path, nm = (path or "").strip(), (nm or "").strip()
        if not path:
            return t("models.folder_first", lg), None, gr.skip(), last
        if not nm or nm == (last or ""):
            nm = last = suggest(path, "", "")[0]
        try:
            info = imports.inspect(path)  # the folder's problems at once, not in a failed job
            return inspect_report(info, lg), imports.submit(path, nm, link=bool(lk)), nm, last
        except jobs.Refused as e:
            return t("error.prefix", lg) + refusal(e, lg), None, nm, last
        except (OSError, ValueError) as e:
            return t("error.prefix", lg) + folder_error(e, lg), None, nm, last

    folder.submit(check, inputs=[folder, lang], outputs=report)
    folder.blur(suggest, inputs=[folder, name, suggested], outputs=[name, suggested], show_progress="hidden")
    inspect_btn.click(check, inputs=[folder, lang], outputs=report)
    import_btn.click(start, inputs=[folder, name, suggested, link, lang], outputs=[report, started, name, suggested]).then(
        panel.follow, inputs=[started, lang], outputs=[panel.job, *panel.outputs])
    ctx.picker(tab, lambda lg: models_table(lg), [lang], [table])
    ctx.relocalize.append((lambda lg: models_table(lg), [lang], [table]))

    def recheck(path, shown, lg):
        """After a language switch: the folder's report (or why it cannot be imported) in the new language."""
        return check(path, lg) if (shown or "").strip() and (path or "").strip() else gr.skip()

    ctx.relocalize.append((recheck, [folder, report, lang], [report]))
