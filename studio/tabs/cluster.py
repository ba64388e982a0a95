"""Cluster tab: the other machines multi-node runs span (core.train.nodes): listed, added, edited,
removed, tested. The Train tab offers them in its "Other machines" box; the Runs tab shows each
node of a run. No logic here beyond turning the form into a node."""

from __future__ import annotations

import sys

import gradio as gr

from core.train import nodes
from studio.charts import html_table
from studio.locales import t


def nodes_table(lang: str) -> str:
    rows = [[n.name, t(f"cluster.kind_{n.kind}", lang),
             f"{n.user + '@' if n.user else ''}{n.host}:{n.port}" if n.kind == "ssh" else "-",
             n.home, n.python, " ".join(f"{k}={v}" for k, v in (n.env or {}).items()), n.head_address]
            for n in nodes.list_nodes()]
    cols = [t(f"cluster.col_{c}", lang) for c in ("name", "kind", "address", "home", "python", "env", "head")]
    return html_table(cols, rows, elem_id="cluster-table", empty=t("cluster.empty", lang))


def names() -> list[str]:
    return [n.name for n in nodes.list_nodes()]


def parse_env(text: str) -> dict:
    """NAME=value per line (or separated by spaces); ValueError naming the line that is not."""
    env = {}
    for i, part in enumerate((text or "").replace(";", "\n").split(), start=1):
        if "=" not in part:
            raise nodes.NodeError("bad_env", f"env item {i} {part!r} is not NAME=value", "env")
        k, v = part.split("=", 1)
        env[k.strip()] = v.strip()
    return env


def build_cluster_tab(ctx):
    tr = ctx.tr
    with tr(gr.Tab(ctx.text("cluster.tab"), id="cluster", elem_id="tab-cluster"), "cluster.tab") as tab:
        ctx.heading("cluster.list")
        table = gr.HTML(nodes_table(ctx.initial_lang), elem_id="cluster-box")
        intro = tr(gr.Markdown(ctx.text("cluster.intro"), elem_id="cluster-intro"), "cluster.intro", "value")
        ctx.heading("cluster.edit")
        with gr.Row():
            pick = tr(gr.Dropdown(["", *names()], value="", label=ctx.text("cluster.pick"), elem_id="cluster-pick"),
                      "cluster.pick")
            kind = tr(gr.Radio([("SSH", "ssh"), (ctx.text("cluster.kind_manual"), "manual")], value="ssh",
                               label=ctx.text("cluster.kind"), elem_id="cluster-kind"), "cluster.kind")
        with gr.Row():
            name = tr(gr.Textbox(label=ctx.text("cluster.name"), elem_id="cluster-name"), "cluster.name")
            host = tr(gr.Textbox(label=ctx.text("cluster.host"), placeholder="10.0.0.12", elem_id="cluster-host"),
                      "cluster.host")
            port = tr(gr.Number(22, precision=0, label=ctx.text("cluster.port"), elem_id="cluster-port"), "cluster.port")
            user = tr(gr.Textbox(label=ctx.text("cluster.user"), elem_id="cluster-user"), "cluster.user")
        with gr.Row():
            key = tr(gr.Textbox(label=ctx.text("cluster.key"), placeholder="~/.ssh/id_ed25519", elem_id="cluster-key"),
                     "cluster.key")
            head_address = tr(gr.Textbox(label=ctx.text("cluster.head_address"), elem_id="cluster-head-address"),
                              "cluster.head_address")
        with gr.Row():
            # the usual layout: the studio installed at the same place on every machine
            python = tr(gr.Textbox(sys.executable, label=ctx.text("cluster.python"), elem_id="cluster-python"),
                        "cluster.python")
            studio_dir = tr(gr.Textbox(str(nodes.STUDIO_DIR), label=ctx.text("cluster.studio_dir"),
                                       elem_id="cluster-studio-dir"), "cluster.studio_dir")
            home = tr(gr.Textbox(label=ctx.text("cluster.home"), elem_id="cluster-home"), "cluster.home")
        env = tr(gr.Textbox(label=ctx.text("cluster.env"), lines=2, placeholder="GLOO_SOCKET_IFNAME=eth0",
                            elem_id="cluster-env"), "cluster.env")
        with gr.Row():
            save_btn = tr(gr.Button(ctx.text("cluster.save"), variant="primary", elem_id="cluster-save"),
                          "cluster.save", "value")
            test_btn = tr(gr.Button(ctx.text("cluster.test"), elem_id="cluster-test"), "cluster.test", "value")
            remove_btn = tr(gr.Button(ctx.text("cluster.remove"), variant="stop", elem_id="cluster-remove"),
                            "cluster.remove", "value")
        msg = gr.Markdown(elem_id="cluster-msg")
    ctx.tr_fn(kind, "choices", lambda lg: [("SSH", "ssh"), (t("cluster.kind_manual", lg), "manual")])
    lang = ctx.lang
    form = [name, kind, host, port, user, key, python, studio_dir, home, env, head_address]

    def fill(picked):
        if not picked:
            return ["", "ssh", "", 22, "", "", sys.executable, str(nodes.STUDIO_DIR), "", "", ""]
        try:
            n = nodes.get(picked)
        except nodes.NodeError:
            return [gr.skip()] * len(form)
        return [n.name, n.kind, n.host, n.port, n.user, n.key_file, n.python, n.studio_dir, n.home,
                "\n".join(f"{k}={v}" for k, v in (n.env or {}).items()), n.head_address]

    def save(picked, nm, kd, hs, pt, us, ky, py, sd, hm, ev, ha, lg):
        try:
            node = nodes.Node(name=(nm or "").strip(), kind=kd or "ssh", host=(hs or "").strip(),
                              port=int(pt) if pt is not None else 22, user=(us or "").strip(), key_file=(ky or "").strip(),
                              python=(py or "").strip(), studio_dir=(sd or "").strip(), home=(hm or "").strip(),
                              env=parse_env(ev), head_address=(ha or "").strip())
            saved = nodes.save(node, replace=picked or None)
        except (nodes.NodeError, ValueError, OSError) as e:
            field = f" (`{e.field}`)" if getattr(e, "field", "") else ""
            return t("error.prefix", lg) + str(e) + field, gr.skip(), gr.skip()
        return (t("cluster.saved", lg, node=saved.label()), nodes_table(lg),
                gr.update(choices=["", *names()], value=saved.name))

    def test(picked, nm, lg):
        target = picked or (nm or "").strip()
        if not target:
            return t("cluster.pick_first", lg)
        try:
            res = nodes.test_node(target)
        except Exception as e:  # noqa: BLE001 - ssh's own failures included: shown, never a crashed page
            return t("error.prefix", lg) + str(e)
        v = res["versions"]
        line = t("cluster.tested", lg, node=target, paddle=v["paddle"], nlp=v["paddlenlp"], studio=v["studio"],
                 cpus=res["cpus"], gpus=res["gpus"], free=f"{(res['free_bytes'] or 0) / 2**30:.3g}", home=res["home"])
        for k, (theirs, mine) in res["differs"].items():
            line += "\n- " + t("cluster.differs", lg, what=k, theirs=theirs, mine=mine)
        return line

    def remove(picked, lg):
        if not picked:
            return t("cluster.pick_first", lg), gr.skip(), gr.skip()
        try:
            nodes.remove(picked)
        except nodes.NodeError as e:
            return t("error.prefix", lg) + str(e), gr.skip(), gr.skip()
        return t("cluster.removed", lg, node=picked), nodes_table(lg), gr.update(choices=["", *names()], value="")

    pick.change(fill, inputs=[pick], outputs=form, show_progress="hidden")
    save_btn.click(save, inputs=[pick, *form, lang], outputs=[msg, table, pick])
    test_btn.click(test, inputs=[pick, name, lang], outputs=[msg])
    remove_btn.click(remove, inputs=[pick, lang], outputs=[msg, table, pick])
    ctx.picker(tab, lambda lg: (nodes_table(lg), gr.update(choices=["", *names()])), [lang], [table, pick])
    ctx.relocalize.append((lambda lg: nodes_table(lg), [lang], [table]))
    return intro
