"""Locales cover every key in both languages; core stays UI-free; bind/auth rules."""

import subprocess
import sys
from pathlib import Path

import pytest

from core.data import datasets
from studio import locales

ROOT = Path(__file__).resolve().parents[1]


def test_every_key_has_both_languages():
    for key, entry in locales.TEXT.items():
        for lang in locales.LANGS:
            assert entry.get(lang, "").strip(), f"{key} lacks {lang}"


def test_every_engine_code_is_translated_with_same_placeholders():
    import string

    fields = lambda s: {f for _, f, _, _ in string.Formatter().parse(s) if f}  # noqa: E731
    for code, en in datasets.MESSAGES.items():
        key = f"problem.{code}"
        assert key in locales.TEXT, key
        for lang in locales.LANGS:
            assert fields(locales.TEXT[key][lang]) == fields(en), (key, lang)


def test_every_locale_key_used_in_studio_exists():
    import re

    used = set()
    for f in (ROOT / "studio").rglob("*.py"):
        used |= set(re.findall(r"[\"']((?:app|dataset|device|error)\.[a-z_]+)[\"']", f.read_text(encoding="utf-8")))
    missing = sorted(k for k in used if k not in locales.TEXT)
    assert not missing, missing


def test_every_progress_code_core_reports_is_translated():
    """Each code a job's child reports (core.jobs.report_progress(..., code=...)) has zh/en text whose
    fields are the params it sends."""
    import ast
    import string

    fields = lambda s: {f for _, f, _, _ in string.Formatter().parse(s) if f}  # noqa: E731
    found = []
    for f in (ROOT / "core").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and any(k.arg == "code" for k in node.keywords):
                name = getattr(node.func, "id", getattr(node.func, "attr", ""))
                if name not in ("report_progress", "on_progress"):
                    continue
                code = next(k.value for k in node.keywords if k.arg == "code")
                params = {k.arg for k in node.keywords if k.arg != "code"}
                codes = ([code.value] if isinstance(code, ast.Constant) else
                         [f"demo_copying_{n}" for n in ("dataset", "model")])  # f"demo_copying_{name}"
                for c in codes:
                    found.append(c)
                    key = f"progress.{c}"
                    assert key in locales.TEXT, (f, key)
                    for lang in locales.LANGS:
                        assert fields(locales.TEXT[key][lang]) == params, (key, lang, params)
    assert {"merging", "evaluating_quantized", "answered", "evaluating_target", "demo_pretraining"} <= set(found)


def test_reasons_progress_and_durations_are_said_in_chinese():
    from studio.charts import duration

    zh = lambda r: locales.reason_text(r, "zh")  # noqa: E731
    assert zh("stopped by the user") == "由用户停止"
    assert zh("cancelled before it started") == "开始前已取消"
    assert zh("exit code -9 (killed)") == "退出码 -9（被终止）"
    assert zh("stopped and saved at step 40 (Resume continues from checkpoint-40)").startswith("已在第 40 步停止")
    assert zh("Traceback: something new") == "Traceback: something new"  # an unknown reason is shown as recorded
    assert locales.reason_text("stopped by the user", "en") == "stopped by the user"
    pr = {"fraction": 0.5, "text": "evaluating base+adapter (2/2)", "code": "evaluating_target",
          "params": {"label": "base+adapter", "i": 2, "n": 2}}
    assert locales.progress_text(pr, "zh") == "正在评估基座+适配器（2/2）"
    assert locales.progress_text(pr, "en") == "evaluating base+adapter (2/2)"
    assert locales.progress_text({"text": "copying model.safetensors (12.5 MiB)"}, "zh") == "正在复制 model.safetensors（12.5 MiB）"
    assert locales.progress_text({"text": "step 6/12"}, "zh") == "第 6/12 步"
    assert (duration(70, "zh"), duration(70, "en"), duration(1.5, "zh"), duration(3720, "zh")) == (
        "1 分 10 秒", "1 min 10 s", "1.5 秒", "1 小时 02 分")


def test_every_preset_has_a_chinese_description():
    import json

    for f in sorted((ROOT / "presets").glob("*/*.json")):
        d = json.loads(f.read_text(encoding="utf-8"))
        if f.parent.name in ("runs", "quant"):
            assert d.get("description_zh", "").strip(), f
            assert locales.description(d, "zh") == d["description_zh"] and locales.description(d, "en") == d["description"]


def test_core_imports_without_gradio():
    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'gradio' or name.startswith('gradio.'):\n"
        "            raise ImportError('gradio is blocked')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import pkgutil, core\n"
        "mods = [m.name for m in pkgutil.iter_modules(core.__path__)]\n"
        "for m in mods: __import__('core.' + m)\n"
        "assert 'gradio' not in sys.modules\n"
        "assert 'paddle' not in sys.modules, 'core modules must import paddle lazily'\n"
        "print(len(mods))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.strip()) >= 5


@pytest.mark.parametrize(
    "host, auth, ok",
    [
        ("127.0.0.1", None, True),
        ("localhost", None, True),
        ("::1", None, True),
        ("0.0.0.0", None, False),
        ("192.168.1.5", None, False),
        ("0.0.0.0", "admin:secret", True),
        ("0.0.0.0", "admin:", False),
        ("127.0.0.1", "nocolon", False),
    ],
)
def test_bind_rules(host, auth, ok):
    from studio.bind import check_bind

    if ok:
        pair = check_bind(host, auth)
        assert pair == (tuple(auth.split(":")) if auth else None)
    else:
        with pytest.raises(ValueError):
            check_bind(host, auth)


BLOCK_GRADIO = (
    "import sys, importlib.abc\n"
    "class Block(importlib.abc.MetaPathFinder):\n"
    "    def find_spec(self, name, path, target=None):\n"
    "        if name.split('.')[0] in ('gradio', 'paddle', 'paddlenlp'):\n"
    "            raise ImportError(name + ' is blocked')\n"
    "sys.meta_path.insert(0, Block())\n"
)


def test_cli_refuses_public_bind_without_auth():
    """Said before gradio, paddle and the tabs load: 0.1 s (it took 3 s, 11-15 s on a loaded machine)."""
    import os
    import time

    env = {k: v for k, v in os.environ.items() if k != "PADDLE_STUDIO_AUTH"}
    code = BLOCK_GRADIO + "from core.cli import main; sys.exit(main(sys.argv[1:]))"
    for args, says in [(["--host", "0.0.0.0"], "needs --auth"), (["--host", "192.168.1.5", "--auth", "admin:"], "USER:PASS")]:
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-c", code, "ui", "--port", "7999", *args],
                           cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
        took = time.monotonic() - t0
        assert r.returncode == 2 and says in r.stderr, r.stderr
        assert took < 5.0, took


def test_the_bind_rule_loads_without_gradio():
    code = BLOCK_GRADIO + "import studio.bind"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_the_studio_takes_its_login_secret_out_of_the_environment(monkeypatch):
    """Read once, $PADDLE_STUDIO_AUTH leaves the studio's environment: no child inherits it."""
    import argparse
    import os

    from core import cli

    monkeypatch.setenv("PADDLE_STUDIO_AUTH", "nocolon")  # refused, so nothing starts
    assert cli.cmd_ui(argparse.Namespace(host="0.0.0.0", port=7999, auth=None, lang="en", demo=False)) == 2
    assert "PADDLE_STUDIO_AUTH" not in os.environ


def test_a_watch_draws_again_whatever_it_last_drew_is_not_the_probes():
    """A live view's tick draws when the probe's signature or the language differs from what the
    watch last drew, and skips otherwise; so a lost or out-of-order update is repaired next tick."""
    import gradio as gr

    from studio.live import Ctx

    probed = {"sig": 1}
    with gr.Blocks() as demo:
        lang = gr.Radio(["en", "zh"], value="en")
        ctx = Ctx(lang=lang)
        out = gr.Markdown()
        ctx.watch(1.0, lambda: probed["sig"], [], lambda lg: [f"drawn {probed['sig']} {lg}"], [lang], [out], gated=False)
        ctx.wire_watches()
    tick = next(f.fn for f in demo.fns.values() if f.fn is not None and f.fn.__name__ == "tick_render")

    def is_skip(v):
        return isinstance(v, dict) and v.get("__type__") == "update" and len(v) == 1

    first = tick(None, "en")
    assert first == [[[1, "en"]], "drawn 1 en"]
    assert all(is_skip(v) for v in tick([[1, "en"]], "en"))  # nothing changed since drawn
    assert tick([[1, "en"]], "zh") == [[[1, "zh"]], "drawn 1 zh"]  # the language alone redraws
    probed["sig"] = 2
    assert tick([[1, "en"]], "en") == [[[2, "en"]], "drawn 2 en"]
    # a stale draw (another event's older update landed last) leaves an older key: drawn again
    assert tick([[1, "zh"]], "en") == [[[2, "en"]], "drawn 2 en"]


def test_views_sharing_a_timer_draw_apart_and_a_throttled_one_waits_its_turn():
    """Two views on one timer (the Runs tab's run and list): each is drawn only when its own probe
    changed; the one with ``every`` not sooner than that after its last draw, and then without
    another change (a change it held back is not lost)."""
    import time as clock

    import gradio as gr

    from studio.live import Ctx, View

    sig = {"run": 1, "list": 1}
    with gr.Blocks() as demo:
        lang = gr.Radio(["en", "zh"], value="en")
        ctx = Ctx(lang=lang)
        a, b = gr.Markdown(), gr.Markdown()
        ctx.watch_views(1.0, [View(lambda: sig["run"], [], lambda: [f"run {sig['run']}"], [], [a]),
                              View(lambda: sig["list"], [], lambda: [f"list {sig['list']}"], [], [b], every=0.5)],
                        gated=False)
        ctx.wire_watches()
    tick = next(f.fn for f in demo.fns.values() if f.fn is not None and f.fn.__name__ == "tick_render")

    def skipped(v):
        return isinstance(v, dict) and v.get("__type__") == "update" and len(v) == 1

    seen, *out = tick(None, "en")
    assert out == ["run 1", "list 1"]
    sig["run"], sig["list"] = 2, 2
    seen, *out = tick(seen, "en")
    assert out[0] == "run 2" and skipped(out[1])  # the list was drawn under 0.5 s ago: held back
    assert all(skipped(v) for v in tick(seen, "en"))  # still held, the run unchanged: nothing sent
    clock.sleep(0.6)
    seen, *out = tick(seen, "en")
    assert skipped(out[0]) and out[1] == "list 2"  # its turn: the held change is drawn
    assert all(skipped(v) for v in tick(seen, "en"))


def test_each_tab_ticks_one_event_which_also_watches_the_pickers(tmp_path, monkeypatch):
    """A tab with live views has one timer and one tick event, each input once, and the workspace
    pickers (with the demo banner) are watched in it: a shown Runs tab costs the page one event a tick, not three
    timers' events. The pickers' own timer belongs only to the tabs without a live view."""
    import json

    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(tmp_path / "ws"))
    from studio.app import build_app

    demo = build_app()
    ids = lambda fn: {demo.blocks[o._id].elem_id for o in fn.outputs}  # noqa: E731
    ticks = [f for f in demo.fns.values() if f.fn is not None and f.fn.__name__ == "tick_render"]
    timers = [t for f in ticks for t, _ in f.targets]
    assert len(timers) == len(set(timers)), "a timer with two tick events"
    # each input once (the page walks its component tree twice per input of every event)
    assert all(len(f.inputs) == len({i._id for i in f.inputs}) for f in ticks)
    # and outside the queue: three status messages per tick in the page instead of five
    assert ticks and all(f.queue is False for f in ticks)
    runs = [f for f in ticks if "runs-list" in ids(f)]
    assert len(runs) == 1 and {"run-status", "run-plot", "demo-banner", "cfg-data-dataset_name_or_path"} <= ids(runs[0])
    pickers_only = [f for f in ticks if "demo-banner" in ids(f) and not ids(f) & {"runs-list", "jobs-list"}
                    and not any(i and i.endswith("-job-status") for i in ids(f))]
    assert len(pickers_only) == 1
    timer = demo.blocks[pickers_only[0].targets[0][0]]
    gate = next(f for f in demo.fns.values() if f.js and "__studioLive" in f.js and timer in f.outputs)
    owners = json.loads(gate.js.split(" return ", 1)[1].split(".map(", 1)[0])[gate.outputs.index(timer)]
    assert "tab-dataset" in owners and "tab-train" in owners
    assert not {"tab-runs", "tab-jobs", "tab-quantize", "tab-merge"} & set(owners)
    assert sum("run-status" in ids(f) for f in ticks) == 1  # the run's view and the list: one event


def test_a_workspace_that_cannot_be_reconciled_is_said_once(monkeypatch, capsys):
    """A read-only workspace makes every look fail the same way: one line, not one every few seconds;
    a line again when it works, and when the failure changes."""
    import errno

    from studio import app

    fail = {"e": OSError(errno.EROFS, "Read-only file system", "/ws/.spare")}

    def keep_warm():
        if fail["e"]:
            raise fail["e"]

    monkeypatch.setattr(app.catalog, "reconcile", lambda: [])
    monkeypatch.setattr(app.catalog, "keep_warm", keep_warm)
    r = app.Reconciler(every=0.0)
    for _ in range(5):
        r.step()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "read-only file system" in err[0] and "/ws/.spare" in err[0], err
    fail["e"] = None
    r.step()
    r.step()
    assert capsys.readouterr().err.strip().splitlines() == ["paddle-studio: reconciling the workspace works again"]
    fail["e"] = OSError(errno.ENOSPC, "No space left on device", "/ws/runs")
    r.step()
    r.step()
    assert "disk is full" in capsys.readouterr().err


def test_paddles_build_warnings_are_not_in_cli_answers(tmp_path):
    """`import paddle` warns about its own build (no ccache, setuptools over distutils) on every start;
    a verb that imports paddle says none of it."""
    import os

    r = subprocess.run([sys.executable, "-m", "core.cli", "demo", "init", "--family", "qwen", "--out", str(tmp_path / "m")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PADDLE_STUDIO_HOME": str(tmp_path / "ws")})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ccache" not in r.stderr and "distutils" not in r.stderr, r.stderr[-2000:]
