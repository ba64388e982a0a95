"""Merge tab: pick a run's adapter, merge it into its base (a subprocess), show the logits check;
evaluate base, base+adapter and merged model side by side (subprocesses too), as a table and
a bar chart.

The studio process never loads weights: merge and eval run as `paddle-studio ... --json`
children with their output in files under the workspace.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import gradio as gr

from core import workspace
from core.models import loading
from core.train import runs
from studio.charts import bar_chart_svg, html_table
from studio.locales import t


def adapter_choices() -> list[tuple[str, str]]:
    """Finished runs whose output holds an adapter."""
    out = []
    for d in sorted(workspace.runs_dir().glob("*/output"), reverse=True) if workspace.runs_dir().is_dir() else []:
        if (d / "studio_model.json").is_file() and loading.adapter_kind(d):
            out.append((f"{d.parent.name} ({loading.adapter_kind(d)})", str(d)))
    return out


def _cli(args: list[str], log_name: str) -> tuple[dict | None, str]:
    """Run `paddle-studio ARGS --json` as a child; stdout and stderr go to files, never a pipe."""
    logs = workspace.home() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    err_path = logs / f"{log_name}.log"
    with tempfile.TemporaryFile() as out, open(err_path, "wb") as err:
        code = subprocess.call([sys.executable, "-m", "core.cli", *args, "--json"], stdout=out, stderr=err,
                               cwd=str(Path(__file__).resolve().parents[2]))
        out.seek(0)
        text = out.read().decode("utf-8", errors="replace")
    tail = err_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or [""]
    if code != 0:
        return None, tail[0].removeprefix("paddle-studio: ")
    return json.loads(text), ""


def run_merge(adapter: str, name: str, lang: str):
    if not adapter:
        return t("merge.pick_first", lang)
    code = workspace.check_name((name or "").strip())
    if code:
        return t("error.prefix", lang) + t(f"problem.{code}", lang, name=name)
    out_dir = workspace.models_dir() / name.strip()
    if out_dir.exists():
        return t("error.prefix", lang) + t("merge.exists", lang, path=str(out_dir))
    res, err = _cli(["merge", "--adapter", adapter, "--out", str(out_dir)], f"merge-{name.strip()}")
    if res is None:
        return t("error.prefix", lang) + err
    diff = res["check"]["max_abs_diff"]
    verdict = t("merge.check_ok", lang) if diff < 1e-4 else t("merge.check_bad", lang)
    return t("merge.done", lang, path=res["out"], diff=f"{diff:.2e}", n=res["check"]["prompts"], verdict=verdict)


def run_eval(adapter: str, name: str, limit: int, lang: str):
    if not adapter:
        return t("merge.pick_first", lang), gr.skip()
    base = loading.base_of(adapter)
    run_id = Path(adapter).parent.name
    flat = runs.read_json(Path(adapter).parent / "config.json", {})
    data = flat.get("dataset_name_or_path")
    common = ["--data", str(data), "--limit", str(int(limit or 200)), "--src-length", str(flat.get("src_length", 1024)),
              "--max-length", str(flat.get("max_length", 2048))]
    rows = []
    targets = [("base", ["--model", base]), ("base+adapter", ["--model", base, "--adapter", adapter])]
    merged = workspace.models_dir() / (name or "").strip()
    if name and (merged / "studio_model.json").is_file():
        targets.append(("merged", ["--model", str(merged)]))
    for label, args in targets:
        res, err = _cli(["eval", *args, *common], f"eval-{run_id}-{label.replace('+', '-')}")
        if res is None:
            return t("error.prefix", lang) + err, gr.skip()
        rows.append([label, *(res[k] for k in METRICS)])
    return t("merge.eval_done", lang, n=int(limit or 200)), eval_html(rows, lang)


METRICS = ("eval_loss", "perplexity", "token_accuracy", "exact_match", "bleu4", "rouge_l")


def eval_html(rows: list[list], lang: str) -> str:
    """The evaluation table plus bars of the 0..1 scores for each model."""
    table = html_table([t("merge.col_model", lang), *METRICS], [[r[0], *(f"{v:.4f}" for v in r[1:])] for r in rows],
                       elem_id="eval-table")
    scores = ("token_accuracy", "exact_match", "bleu4", "rouge_l")
    bars = bar_chart_svg(list(scores), {r[0]: [r[1 + METRICS.index(k)] for k in scores] for r in rows})
    return table + bars


def build_merge_tab(ctx):
    tr = ctx.tr
    with tr(gr.Tab(ctx.text("merge.tab"), id="merge", elem_id="tab-merge"), "merge.tab"):
        with gr.Row():
            adapter = tr(gr.Dropdown(adapter_choices(), label=ctx.text("merge.adapter"), elem_id="merge-adapter"), "merge.adapter")
            name = tr(gr.Textbox(label=ctx.text("merge.name"), elem_id="merge-name"), "merge.name")
            refresh = tr(gr.Button(ctx.text("dataset.refresh"), size="sm"), "dataset.refresh", "value")
        with gr.Row():
            merge_btn = tr(gr.Button(ctx.text("merge.merge"), variant="primary", elem_id="merge-btn"), "merge.merge", "value")
            limit = tr(gr.Number(200, precision=0, minimum=1, label=ctx.text("merge.limit")), "merge.limit")
            eval_btn = tr(gr.Button(ctx.text("merge.evaluate"), elem_id="eval-btn"), "merge.evaluate", "value")
        msg = gr.Markdown(elem_id="merge-msg")
        table = gr.HTML(elem_id="eval-box")
    lang = ctx.lang

    def suggest(path):
        return f"{Path(path).parent.name}-merged"[:60] if path else ""

    adapter.change(suggest, inputs=adapter, outputs=name)
    refresh.click(lambda: gr.update(choices=adapter_choices()), outputs=adapter)
    merge_btn.click(run_merge, inputs=[adapter, name, lang], outputs=msg)
    eval_btn.click(run_eval, inputs=[adapter, name, limit, lang], outputs=[msg, table])
    ctx.on_load.append((lambda: gr.update(choices=adapter_choices()), [], [adapter]))
