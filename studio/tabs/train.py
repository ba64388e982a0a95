"""Train tab: preset picker, a form generated from the RunConfig dataclasses, live config check,
command preview, named configs, Start.

Widgets map to dataclass fields (section, name); a handler turns the values into a RunConfig
and calls core — never engine keys directly.
"""

from __future__ import annotations

import json
import math
import shlex
import time
import typing
from dataclasses import MISSING, fields
from pathlib import Path

import gradio as gr

from core import catalog, workspace
from core.train import cluster, config, nodes, runs
from core.train.config import RunConfig
from studio.charts import duration, size
from studio.locales import FIELD_HELP_ZH, description, field_label, reason_text, t

# fields shown open; every other field goes in the section's folded "advanced" group
MAIN_FIELDS = {
    "model": ["model_name_or_path"],
    "data": ["dataset_name_or_path", "src_length", "max_length"],
    "method": ["method", "lora_rank", "num_prefix_tokens", "vera_rank", "lokr_dim", "reft_position", "reft_rank", "dpo_beta",
               "kto_beta"],
    "training": ["per_device_train_batch_size", "learning_rate", "num_train_epochs", "max_steps", "eval_steps", "save_steps",
                 "report_to"],
    "parallel": ["nproc", "nodes"],
}
SECTION_CLASSES = {
    "model": config.ModelSection, "data": config.DataSection, "method": config.MethodSection,
    "training": config.TrainingSection, "parallel": config.ParallelSection,
}


def preset_description(p: dict, lang: str) -> str:
    """A run preset's description in ``lang`` (config.list_presets gives the English one; the file
    holds ``description_zh`` beside it)."""
    try:
        return description(json.loads(Path(p["path"]).read_text(encoding="utf-8")), lang)
    except (OSError, ValueError, KeyError):
        return p.get("description", "")


def configs_dir() -> Path:
    return catalog.configs_dir()


def model_choices() -> list[tuple[str, str]]:
    """Models a run can start from: base, merged and fully fine-tuned ones (not adapters or quantized)."""
    return [(m["label"], m["path"]) for m in catalog.models(["base", "merged", "trained"])]


def dataset_choices() -> list[tuple[str, str]]:
    return [(m.get("name") or Path(m["path"]).name, m["path"]) for m in catalog.datasets()]


def node_choices() -> list[str]:
    return [n.name for n in nodes.list_nodes()]


def saved_configs() -> list[str]:
    return catalog.configs()


def _help(name: str, meta_help: str, lang: str) -> str:
    """The field's help in ``lang`` under its PaddleNLP key (what upstream's JSON calls it)."""
    return f"{name} · " + (FIELD_HELP_ZH.get(name, meta_help) if lang == "zh" else meta_help)


def _widget(section: str, f, lang: str):
    """One widget for one dataclass field, chosen by its type; a method field the default method does
    not read starts hidden (see method_visibility)."""
    w = _widget_of(section, f, lang)
    if section == "method" and not config.reads(config.MethodSection(), f.name):
        w.visible = False
    return w


def method_visibility(names: list[str], method, *switches) -> list:
    """gr.update(visible=...) for each method field in ``names``: shown while ``method`` (with the
    switches of config.METHOD_SWITCHES, in that order) reads it, as config.FIELD_METHODS says."""
    m = config.MethodSection(method=method, **{k: bool(v) for k, v in zip(config.METHOD_SWITCHES, switches)})
    return [gr.update(visible=config.reads(m, n)) for n in names]


def _widget_of(section: str, f, lang: str):
    help_ = _help(f.name, f.metadata.get("help", ""), lang)
    label = field_label(f.name, lang)
    default = f.default if f.default is not MISSING else None
    elem = f"cfg-{section}-{f.name}"
    choices = f.metadata.get("choices")
    hint = typing.get_type_hints(SECTION_CLASSES[section])[f.name]
    if f.name == "model_name_or_path":
        return gr.Dropdown(model_choices(), value=None, allow_custom_value=True, label=label, info=help_, elem_id=elem)
    if f.name == "nodes":  # the Cluster tab's nodes, in node-rank order
        return gr.Dropdown(node_choices(), value=[], multiselect=True, label=label, info=help_, elem_id=elem)
    if f.name == "dataset_name_or_path":
        return gr.Dropdown(dataset_choices(), value=None, allow_custom_value=True, label=label, info=help_, elem_id=elem)
    if choices:
        return gr.Dropdown(list(choices), value=default, label=label, info=help_, elem_id=elem)
    if hint is bool:
        return gr.Checkbox(value=default, label=label, info=help_, elem_id=elem)
    if hint is int:
        return gr.Number(value=default, precision=0, label=label, info=help_, elem_id=elem)
    if hint is float:
        return gr.Number(value=default, label=label, info=help_, elem_id=elem)
    return gr.Textbox(value=default or "", label=label, info=help_, elem_id=elem)


def values_to_config(spec: list[tuple[str, str]], name: str, values: list) -> RunConfig:
    d: dict = {"name": (name or "run").strip() or "run"}
    for (section, fname), v in zip(spec, values):
        cls = SECTION_CLASSES[section]
        hint = typing.get_type_hints(cls)[fname]
        if hint is int:
            # Infinity/NaN typed into a number box stays as it is: the config check names it (int() would raise)
            v = 0 if v is None else int(v) if math.isfinite(float(v)) else float(v)
        elif hint is float:
            v = float(v) if v is not None else 0.0
        elif hint is bool:
            v = bool(v)
        elif v == "" and fname in ("tokenizer_name_or_path", "chat_template", "weight_quantize_algo"):
            v = None
        elif fname == "nodes":
            v = ",".join(v) if isinstance(v, list) else (v or "")
        d.setdefault(section, {})[fname] = v
    cfg = RunConfig.from_dict(d)
    # a field the method does not read is hidden in the form: what it holds (set for another method) is
    # not sent, its default is (the field keeps its value for when that method is chosen again)
    defaults = config.MethodSection()
    for fname in config.unread_fields(cfg.method):
        setattr(cfg.method, fname, getattr(defaults, fname))
    return cfg


def config_to_values(spec: list[tuple[str, str]], cfg: RunConfig) -> list:
    d = cfg.to_dict()
    return [cfg.parallel.node_names() if (section, fname) == ("parallel", "nodes")
            else d[section][fname] if d[section][fname] is not None else "" for section, fname in spec]


def preflight_markdown(res: dict, lang: str) -> str:
    """Every problem a multi-node preflight found, each with its node; or that all nodes are ready."""
    if res["ok"]:
        return t("train.preflight_ok", lang, n=len(res["nodes"]), master=res.get("master") or "")
    lines = [t("train.preflight_problems", lang, n=len(res["problems"]))]
    for p in res["problems"]:
        lines.append(f"- **{p['node']}** · `{p['code']}`: {p['message']}")
    return "\n".join(lines)


def estimate_markdown(cfg: RunConfig, lang: str) -> str:
    """Will it fit: peak memory per process and in all, time to finish, against free memory and disk."""
    from core.train import estimate

    e = estimate.estimate(cfg, measure=False)  # no tokenizer loaded in the studio for a live check
    if not e:
        return ""
    when = duration(e["seconds"], lang) if e["seconds"] is not None else "?"
    mib = lambda v: size(v * (1 << 20))  # noqa: E731 - 464 MiB, 20.2 GiB
    text = t("train.estimate", lang, per=mib(e["per_process_mib"]), total=mib(e["total_mib"]), free=mib(e["free_mib"]),
             time=when, steps=f"{e['steps']:,}" if e["steps"] else "?", disk=mib(e["disk_mib"]),
             runs=e["calibrated_runs"])
    if e.get("dry_run"):
        text += t("train.estimate_dry", lang, run=e["dry_run"])
    if e.get("lengths_from") == "dataset":
        text += t("train.estimate_lengths", lang, mean=f"{e['seq_mean']:.0f}", peak=e["seq_peak"])
    elif e.get("lengths_from") == "unmeasured":
        text += t("train.estimate_unmeasured", lang, max=e["seq_peak"])
    if not e["fits_memory"]:
        text += "\n\n" + t("train.estimate_no_memory", lang, total=mib(e["total_mib"]), free=mib(e["free_mib"]))
    if not e["fits_disk"]:
        text += "\n\n" + t("train.estimate_no_disk", lang, disk=mib(e["disk_mib"]), free=mib(e["disk_free_mib"]))
    return "\n\n" + text


def check_markdown(cfg: RunConfig, lang: str) -> str:
    problems = config.check(cfg)
    if not problems:
        return t("train.check_ok", lang) + estimate_markdown(cfg, lang)
    lines = [t("train.check_problems", lang, n=len(problems))]
    for p in problems:
        lines.append(f"- `{p['field']}`: " + t(f"check.{p['code']}", lang, field=p["field"], **p["params"]))
    return "\n".join(lines)


def command_preview(cfg: RunConfig) -> str:
    """What Start will run, and the same run headless (after Save config)."""
    probe = Path(workspace.runs_dir()) / "<run-id>"
    argv = runs.launch_argv(probe, cfg.to_dict()["parallel"])
    flat = cfg.to_paddlenlp(output_dir=str(probe / "output"))
    return (
        "# launch (written to the run's command.txt)\n" + shlex.join(argv)
        + f"\n\n# headless twin, after “Save config”:\npaddle-studio train {configs_dir() / (cfg.name + '.json')}"
        + "\n\n# config.json (the PaddleNLP argument JSON)\n" + json.dumps(flat, indent=2, ensure_ascii=False)
    )


# The form's values as JSON, stamped so that a second click with the same values is still a change.
FORM_JS = "(...values) => JSON.stringify({values: values, at: Date.now() + Math.random()})"


def build_train_tab(ctx):
    lang0 = ctx.initial_lang
    tr = ctx.tr
    spec: list[tuple[str, str]] = []
    widgets = []
    with tr(gr.Tab(ctx.text("train.tab"), id="train", elem_id="tab-train"), "train.tab") as tab:
        with gr.Row():
            presets = config.list_presets()
            preset = tr(gr.Dropdown([p["name"] for p in presets], value="demo-lora" if presets else None,
                                    label=ctx.text("train.preset"), elem_id="train-preset"), "train.preset")
            load_preset_btn = tr(gr.Button(ctx.text("train.load_preset")), "train.load_preset", "value")
            run_name = tr(gr.Textbox("demo-lora", label=ctx.text("train.run_name"), elem_id="train-name"), "train.run_name")
        preset_desc = gr.Markdown(elem_id="train-preset-desc")
        for section in RunConfig.SECTIONS:
            cls = SECTION_CLASSES[section]
            fs = fields(cls)
            main = [f for f in fs if f.name in MAIN_FIELDS[section]]
            rest = [f for f in fs if f.name not in MAIN_FIELDS[section]]
            ctx.heading(f"train.section_{section}")
            with gr.Row():
                for f in main:
                    widgets.append(_widget(section, f, lang0))
                    spec.append((section, f.name))
            if rest:
                with tr(gr.Accordion(ctx.text("train.advanced"), open=False), "train.advanced"):
                    with gr.Row():
                        for f in rest:
                            widgets.append(_widget(section, f, lang0))
                            spec.append((section, f.name))
        ctx.heading("train.check")
        check_md = gr.Markdown(elem_id="train-check")
        with tr(gr.Accordion(ctx.text("train.command"), open=False), "train.command"):
            command = gr.Code(language="shell", elem_id="train-command", interactive=False)
        with gr.Row():
            saved = tr(gr.Dropdown(saved_configs(), label=ctx.text("train.saved"), allow_custom_value=False), "train.saved")
            load_btn = tr(gr.Button(ctx.text("train.load")), "train.load", "value")
            save_btn = tr(gr.Button(ctx.text("train.save")), "train.save", "value")
            preflight_btn = tr(gr.Button(ctx.text("train.preflight"), elem_id="train-preflight"), "train.preflight", "value")
            copy_btn = tr(gr.Button(ctx.text("train.copy"), elem_id="train-copy"), "train.copy", "value")
            dry_btn = tr(gr.Button(ctx.text("train.dry_run"), elem_id="train-dry-run"), "train.dry_run", "value")
            start_btn = tr(gr.Button(ctx.text("train.start"), variant="primary", elem_id="train-start"), "train.start", "value")
        start_msg = gr.Markdown(elem_id="train-start-msg")
        # inside the Tab: a component directly under gr.Tabs shifts the index every later tab
        # registers under (the next tab's label overwrote another's and the page froze)
        started = gr.State(None)  # the run id this browser started last (the Runs tab follows it)
        to_runs = gr.Textbox(visible=False)  # set when a run started: the page then shows the Runs tab
        # The form's values as one JSON text, gathered in the page (see FORM_JS): what the check,
        # Save and Start read, so no server event takes the form's 54 widgets as inputs.
        form = gr.Textbox(visible=False, elem_id="train-form-values")
        to_save = gr.Textbox(visible=False)
        to_start = gr.Textbox(visible=False)
        to_preflight = gr.Textbox(visible=False)
        to_dry = gr.Textbox(visible=False)
        unfit_ok = gr.State(None)  # the config whose estimate did not fit and that Start was clicked for once
        to_copy = gr.Textbox(visible=False)

    lang = ctx.lang

    def refresh(name, lg, *values):
        cfg = values_to_config(spec, name, list(values))
        return check_markdown(cfg, lg), command_preview(cfg)

    def form_values(text) -> list:
        """[run name, *widget values] from the JSON the page gathered (FORM_JS)."""
        values = json.loads(text)["values"] if text else []
        if len(values) != len(widgets) + 1:
            raise ValueError(f"the page sent {len(values)} form values, the form has {len(widgets) + 1}")
        return values

    def refresh_form(text, lg):
        try:
            name, *values = form_values(text)
        except (ValueError, KeyError, TypeError):  # nothing gathered yet, or not the page's JSON
            return gr.skip(), gr.skip()
        return refresh(name, lg, *values)

    def load_preset(name, lg):
        if not name:  # the box was cleared (the form holds no preset): nothing to load
            return [gr.update()] * (len(widgets) + 1) + [""]
        try:
            cfg = config.load_preset(name)
        except (OSError, ValueError, KeyError) as e:
            return [gr.update()] * (len(widgets) + 1) + [t("error.prefix", lg) + str(e)]
        desc = next((preset_description(p, lg) + f"  \n`{p['command']}`" for p in config.list_presets() if p["name"] == name), "")
        return [name, *config_to_values(spec, cfg), desc]

    def save(text, lg):
        if not text:
            return gr.skip(), gr.skip()
        try:
            name, *values = form_values(text)
        except (ValueError, KeyError, TypeError) as e:
            return t("error.prefix", lg) + t("error.unexpected", lg, detail=str(e)), gr.skip()
        cfg = values_to_config(spec, name, list(values))
        code = workspace.check_name(cfg.name)
        if code:
            return t("error.prefix", lg) + t(f"problem.{code}", lg, name=cfg.name), gr.update()
        try:
            path = config.save_named(cfg)
        except OSError as e:
            return t("error.prefix", lg) + t("error.unexpected", lg, detail=str(e)), gr.update()
        return t("train.saved_as", lg, path=str(path)), gr.update(choices=saved_configs(), value=cfg.name)

    def load_saved(name, lg):
        if not name:
            return [gr.update()] * (len(widgets) + 3)
        try:
            cfg = config.load_named(name)
        except (OSError, ValueError):
            return [gr.update()] * (len(widgets) + 3)
        return [name, *config_to_values(spec, cfg), None, ""]  # the form no longer holds the preset

    def start(text, lg, unfit):
        if not text:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        try:
            name, *values = form_values(text)
        except (ValueError, KeyError, TypeError) as e:
            return t("error.prefix", lg) + t("error.unexpected", lg, detail=str(e)), None, "", None
        cfg = values_to_config(spec, name, list(values))
        problems = config.check(cfg)
        if problems:
            return check_markdown(cfg, lg), None, "", None
        from core.train import estimate

        e = estimate.estimate(cfg, measure=False)
        key = estimate.fingerprint(cfg)
        if e and not (e["fits_memory"] and e["fits_disk"]) and unfit != key:  # warned first; a second click starts
            return t("train.start_anyway", lg), None, "", key
        try:
            if cfg.parallel.node_names():  # several machines: every node is checked first
                res = cluster.preflight(cfg)
                if not res["ok"]:
                    return preflight_markdown(res, lg), None, ""
                run_id = cluster.create(cfg, master=res["master"])
            else:
                run_id = runs.create(cfg)
            st = runs.start(run_id)
        except Exception as e:  # noqa: BLE001 - show it, never crash the page
            return t("error.prefix", lg) + t("error.unexpected", lg, detail=str(e)), None, "", None
        msg = t("train.started", lg, run=run_id, state=t(f"state.{st['state']}", lg), dir=str(runs.run_dir(run_id)))
        return msg, run_id, run_id, None

    def dry_run(text, lg):
        """Train the form's config for estimate.DRY_RUN_STEPS steps as a run of its own, following it
        here; then the check's estimate, measured from it."""
        from core.train import estimate

        if not text:
            yield gr.skip(), gr.skip()
            return
        try:
            name, *values = form_values(text)
        except (ValueError, KeyError, TypeError) as e:
            yield t("error.prefix", lg) + t("error.unexpected", lg, detail=str(e)), gr.skip()
            return
        cfg = values_to_config(spec, name, list(values))
        if config.check(cfg):
            yield gr.skip(), check_markdown(cfg, lg)
            return
        steps = estimate.DRY_RUN_STEPS
        try:
            run_id = estimate.dry_run(cfg, steps)
        except Exception as e:  # noqa: BLE001 - show it, never crash the page
            yield t("error.prefix", lg) + t("error.unexpected", lg, detail=str(e)), gr.skip()
            return
        yield t("train.dry_started", lg, run=run_id, steps=steps), gr.skip()
        step = 0
        while (st := runs.status(run_id))["state"] in runs.ACTIVE:
            now = runs.progress(runs.read_metrics(run_id)[0])["step"]
            if now != step:
                step = now
                yield t("train.dry_progress", lg, run=run_id, step=step, steps=steps), gr.skip()
            time.sleep(1.0)
        if st["state"] != "succeeded":
            yield t("train.dry_failed", lg, run=run_id, state=t(f"state.{st['state']}", lg),
                    reason=reason_text(st.get("reason"), lg)), gr.skip()
            return
        yield t("train.dry_done", lg, run=run_id), check_markdown(cfg, lg)

    def with_nodes(text, lg):
        """(RunConfig, None) from the gathered form, or (None, message) when it names no node."""
        try:
            name, *values = form_values(text)
        except (ValueError, KeyError, TypeError) as e:
            return None, t("error.prefix", lg) + t("error.unexpected", lg, detail=str(e))
        cfg = values_to_config(spec, name, list(values))
        if not cfg.parallel.node_names():
            return None, t("train.no_nodes", lg)
        return cfg, None

    def on_nodes(work):
        """The handler of a button that acts on the nodes the form names: ``work(cfg, lg, progress)``
        gives its message; no nodes named, or any error, is said instead (never a crashed page)."""
        def handler(text, lg, progress=gr.Progress()):
            if not text:
                return gr.skip()
            cfg, msg = with_nodes(text, lg)
            if cfg is None:
                return msg
            try:
                return work(cfg, lg, progress)
            except Exception as e:  # noqa: BLE001 - ssh's and the nodes' own failures included
                return t("error.prefix", lg) + str(e)
        return handler

    def preflight(cfg, lg, progress):
        return preflight_markdown(cluster.preflight(cfg), lg)

    def copy(cfg, lg, progress):
        done = nodes.copy_missing(cfg.to_paddlenlp(output_dir="-"), cfg.parallel.node_names(),
                                  progress=lambda n, w, sent, total: progress(sent / max(total, 1), desc=f"{n}: {w}"))
        if not done:
            return t("train.copy_none", lg)
        return "\n".join(t("train.copied", lg, what=c["what"], node=c["node"], dest=c["dest"],
                            mb=f"{c['bytes'] / 1e6:.3g}") for c in done)

    # Every widget's change, Save and Start first gather the form in the page (an event with no
    # server part), then a server event reads that one value. Gradio 6.17's page keeps the loading
    # status of every input of every event that ran and, at each status message of any later event,
    # looks each of them up in the component tree: with the form's 54 widgets among them that walk
    # was most of what a page following a run cost.
    form_inputs = [run_name, *widgets]
    for w in form_inputs:
        w.change(None, inputs=form_inputs, outputs=[form], js=FORM_JS)
    form.change(refresh_form, inputs=[form, lang], outputs=[check_md, command], show_progress="hidden")
    load_preset_btn.click(load_preset, inputs=[preset, lang], outputs=[run_name, *widgets, preset_desc],
                          show_progress="hidden")
    save_btn.click(None, inputs=form_inputs, outputs=[to_save], js=FORM_JS)
    to_save.change(save, inputs=[to_save, lang], outputs=[start_msg, saved])
    load_btn.click(load_saved, inputs=[saved, lang], outputs=[run_name, *widgets, preset, preset_desc],
                   show_progress="hidden")
    # a method field is shown only while the chosen method (and its switches) reads it, at once on a
    # change of either (a language switch updates labels only, and a reload builds the preset's lora)
    owned = [(w, fname) for w, (section, fname) in zip(widgets, spec)
             if section == "method" and fname in config.FIELD_METHODS]
    names = [fname for _, fname in owned]
    method_inputs = [widgets[spec.index(("method", k))] for k in ("method", *config.METHOD_SWITCHES)]
    visibility = lambda *v: method_visibility(names, *v)  # noqa: E731
    for switch in method_inputs:
        switch.change(visibility, inputs=method_inputs, outputs=[w for w, _ in owned], show_progress="hidden",
                      queue=False)
    start_btn.click(None, inputs=form_inputs, outputs=[to_start], js=FORM_JS)
    preflight_btn.click(None, inputs=form_inputs, outputs=[to_preflight], js=FORM_JS)
    to_preflight.change(on_nodes(preflight), inputs=[to_preflight, lang], outputs=[start_msg])
    copy_btn.click(None, inputs=form_inputs, outputs=[to_copy], js=FORM_JS)
    to_copy.change(on_nodes(copy), inputs=[to_copy, lang], outputs=[start_msg])
    ctx.go_to(to_start.change(start, inputs=[to_start, lang, unfit_ok], outputs=[start_msg, started, to_runs, unfit_ok]),
              "runs", to_runs)
    dry_btn.click(None, inputs=form_inputs, outputs=[to_dry], js=FORM_JS)
    to_dry.change(dry_run, inputs=[to_dry, lang], outputs=[start_msg, check_md], show_progress="hidden")

    def on_load(name, lg):
        return [*load_preset(name, lg), gr.update(choices=saved_configs())]

    ctx.on_load.append((on_load, [preset, lang], [run_name, *widgets, preset_desc, saved]))
    ctx.relocalize.append((refresh_form, [form, lang], [check_md, command]))
    ctx.relocalize.append((lambda name, lg: next((preset_description(p, lg) + f"  \n`{p['command']}`"
                                                  for p in config.list_presets() if p["name"] == name), ""),
                           [preset, lang], [preset_desc]))
    for w, (section, fname) in zip(widgets, spec):
        meta = next(f for f in fields(SECTION_CLASSES[section]) if f.name == fname)
        ctx.tr_fn(w, "info", lambda lg, n=fname, h=meta.metadata.get("help", ""): _help(n, h, lg))
        ctx.tr_fn(w, "label", lambda lg, n=fname: field_label(n, lg))
    # the preset box and its description last: a tab that fills the form in clears them (it no longer holds the preset)
    ctx.train_form = (run_name, spec, widgets, [preset, preset_desc])
    model_w = widgets[spec.index(("model", "model_name_or_path"))]
    data_w = widgets[spec.index(("data", "dataset_name_or_path"))]
    nodes_w = widgets[spec.index(("parallel", "nodes"))]
    ctx.picker(tab, lambda: (gr.update(choices=model_choices()), gr.update(choices=dataset_choices()),
                             gr.update(choices=saved_configs()), gr.update(choices=node_choices())), [],
               [model_w, data_w, saved, nodes_w])
    return started
