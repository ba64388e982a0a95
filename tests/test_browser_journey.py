"""The whole journey by clicking only, in one page and without any reload until the last step:
upload an alpaca file -> import -> the new dataset is offered in Train -> Start -> live curve ->
succeeded (Runs table and detail agree) -> Merge -> the merged model is offered in Chat and
Quantize -> chat answers a dev question -> wint8 report. Then a reload mid-quantize: the job,
its log and its result are still there. With STUDIO_SCREENSHOTS=1 it also writes the README's
screenshots of every tab, in English and Chinese.
"""

import json
import os
import time
from pathlib import Path

import pytest
import requests

from tests.browser import ROOT, Studio, console_errors, launch_browser, wait_text

pytestmark = [pytest.mark.browser, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")
SHOTS = bool(os.environ.get("STUDIO_SCREENSHOTS"))
TRACE = os.environ.get("STUDIO_TRACE")


@pytest.fixture
def home(tmp_path, demo_home):
    h = tmp_path / "ws"
    (h / "models").mkdir(parents=True)
    (h / "datasets").mkdir()
    (h / "models" / "demo-base").symlink_to(demo_home / "models" / "demo-base")
    (h / "datasets" / "demo").symlink_to(demo_home / "datasets" / "demo")
    return h


def alpaca_file(demo_home: Path, out: Path) -> list[dict]:
    """The demo's single-turn training records as an alpaca file; returns the dev records."""
    rows = []
    for line in (demo_home / "datasets" / "demo" / "train.json").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if len(r["src"]) == 1:
            rows.append({"instruction": r["src"][0], "input": "", "output": r["tgt"][0]})
    out.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    dev = [json.loads(x) for x in (demo_home / "datasets" / "demo" / "dev.json").read_text(encoding="utf-8").splitlines()]
    return [{"src": r["src"][0], "tgt": r["tgt"][0]} for r in dev if len(r["src"]) == 1]


def pick(page, elem_id: str, label: str, timeout: float = 90) -> None:
    """Choose ``label`` in a dropdown, waiting until the page offers it (no reload). The waits are
    long: on a loaded 2-core machine a busy renderer took 8-12 s per click (see the closing note
    of issue 9), and a pick given 1.5 s failed although the option was there."""
    box = page.locator(f"#{elem_id} input")
    deadline = time.time() + timeout
    while True:
        box.click()
        box.fill("")  # the dropdown filters on input events: typing the same text again would not
        box.fill(label)  # re-filter choices that arrived since (a person edits the text, too)
        opt = page.get_by_role("option", name=label, exact=True)
        try:
            opt.wait_for(timeout=8000)
            opt.click()
            return
        except Exception:  # noqa: BLE001 - not found by typing: pick it from the whole list
            pass
        try:
            box.fill("")
            alt = page.locator("[role=option]", has_text=label).first
            alt.wait_for(state="attached", timeout=8000)
            alt.click(force=True, timeout=8000)
            return
        except Exception:  # noqa: BLE001 - not offered yet
            pass
        page.keyboard.press("Escape")
        if time.time() > deadline:
            box.click()
            box.fill("")
            time.sleep(1)
            offered = page.evaluate("() => [...document.querySelectorAll('[role=option]')].map(e => e.innerText)")
            raise AssertionError(f"{label!r} was never offered in #{elem_id}; offered: {offered}")


def wait_for_value(page, selector: str, value: str, timeout: float = 15) -> None:
    box = page.locator(selector)
    deadline = time.time() + timeout
    while box.input_value() != value:
        if time.time() > deadline:
            raise AssertionError(f"{selector} holds {box.input_value()!r}, expected {value!r}")
        time.sleep(0.2)


def set_number(page, elem_id: str, value) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Tab")


def tab(page, name: str) -> None:
    page.get_by_role("tab", name=name, exact=True).click()


def shot(page, name: str) -> None:
    if SHOTS:
        page.screenshot(path=str(ROOT / "assets" / f"{name}.png"), full_page=True)


TAB_NAMES = {"en": ["Dataset", "Models", "Train", "Runs", "Cluster", "Merge & evaluate", "Evaluate & predict", "Chat", "Quantize", "Export", "Jobs"],
             "zh": ["数据集", "模型", "训练", "运行", "集群", "合并与评估", "评估与预测", "对话", "量化", "导出", "任务"]}


def tab_names(page) -> list[str]:
    return page.evaluate("() => [...document.querySelectorAll('#studio-tabs [role=tab]')].map(e => e.innerText.trim())")


def shot_zh(page, name: str, wait_for: str) -> None:
    """The same view in Chinese (a screenshot when asked), then back to English; every tab's
    label follows both switches, whatever happened in the page before."""
    page.get_by_label("中文").check()
    page.locator(f"text={wait_for} >> visible=true").first.wait_for(timeout=10000)
    for lang in ("zh", "en"):
        deadline = time.time() + 10
        while tab_names(page) != TAB_NAMES[lang]:
            assert time.time() < deadline, f"{lang}: tab labels {tab_names(page)!r}"
            time.sleep(0.2)
        if lang == "zh":
            shot(page, f"{name}-zh")
            page.get_by_label("English").check()


STEPS = 150  # the demo LoRA answers dev questions exactly well before its preset's 300 steps


@pytest.mark.journey  # `make test-journey` runs it alone
@pytest.mark.timeout(1500)  # the whole journey: ~2 minutes on 2 idle cores, training included; slack for a loaded CI
def test_upload_train_merge_chat_quantize_without_reload(home, tmp_path, demo_home):
    data = tmp_path / "my_alpaca.json"
    dev = alpaca_file(demo_home, data)
    s = Studio(home, tmp_path / "studio.log")
    try:
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            context = browser.new_context(viewport={"width": 1360, "height": 1500})
            if TRACE:  # STUDIO_TRACE=file.zip: a Playwright trace of the walk (show with `playwright show-trace`)
                context.tracing.start(screenshots=True, snapshots=True)
            page = context.new_page()
            errors = console_errors(page)
            try:
                walk(page, s, home, data, dev)
                # not one error or warning in the console over the whole walk, but Gradio's own
                # (tests/browser.py GRADIO_CONSOLE_NOISE, each with its reason)
                assert not errors.unexpected(), errors.summary()
            finally:
                if TRACE:
                    context.tracing.stop(path=TRACE)
            browser.close()
    finally:
        s.close()


def walk(page, s, home: Path, data: Path, dev: list[dict]) -> None:
    """Every step of the journey in one page (see the module's docstring)."""
    page.goto(s.url)

    # Dataset: upload, validate, import
    page.locator("#dataset-upload input[type=file]").set_input_files(str(data))
    page.locator("#dataset-summary").get_by_text("Ready to import").wait_for(timeout=60000)
    assert "alpaca" in page.locator("#dataset-summary").inner_text()
    page.locator("#dataset-name textarea").fill("alpaca-demo")
    page.get_by_role("button", name="Import", exact=True).click()
    page.locator("#dataset-import-msg").get_by_text("Imported").wait_for(timeout=60000)
    shot(page, "dataset-tab")
    shot_zh(page, "dataset-tab", "数据集名称")

    # Train: the new dataset is offered at once
    tab(page, "Train")
    wait_text(page.locator("#train-check"), "No problems", 30)
    pick(page, "cfg-data-dataset_name_or_path", "alpaca-demo")
    page.locator("#train-name textarea, #train-name input").first.fill("journey")
    set_number(page, "cfg-training-max_steps", STEPS)
    assert "Learning rate" in page.locator("#tab-train").inner_text()  # plain names, keys under them
    assert "learning_rate" in page.locator("#tab-train").inner_text()
    shot(page, "train-tab")
    shot_zh(page, "train-tab", "学习率")
    page.get_by_role("button", name="Start", exact=True).click()
    msg = wait_text(page.locator("#train-start-msg"), "-journey is running", 30)
    run_id = msg.split("Run ", 1)[1].split(" ", 1)[0]
    assert json.loads((home / "runs" / run_id / "config.json").read_text())["dataset_name_or_path"].endswith(
        "alpaca-demo")

    # Runs: the curve grows, the run succeeds, the table says the same as the detail line
    wait_text(page.locator("#run-status"), f"{run_id} — running", 30)
    page.locator("#run-plot .js-plotly-plot").wait_for(timeout=90000)
    shot(page, "runs-tab")
    wait_text(page.locator("#run-status"), f"{run_id} — succeeded", 300)
    wait_text(page.locator("#runs-list"), f"{run_id} succeeded", 15)
    n = page.evaluate("() => document.querySelector('#run-plot .js-plotly-plot').data"
                      ".find(t => t.name === 'loss').x.length")
    assert n == STEPS
    shot_zh(page, "runs-tab", "对数坐标")

    # Merge: the finished run's adapter is offered; merge it
    tab(page, "Merge & evaluate")
    pick(page, "merge-adapter", f"runs/{run_id}/output (lora)")
    merged = f"{run_id}-merged"[:60]
    wait_for_value(page, "#merge-name textarea", merged)  # suggested from the run's name
    page.locator("#merge-btn").click()
    wait_text(page.locator("#merge-msg"), "Merged into", 180)
    assert "equal (< 1e-4)" in page.locator("#merge-msg").inner_text()
    shot(page, "merge-tab")
    shot_zh(page, "merge-tab", "合并任务")

    # Chat: the merged model is offered without a reload; it answers a dev question
    tab(page, "Chat")
    pick(page, "chat-model", f"models/{merged} (merged)")
    page.locator("#chat-load").click()
    status = wait_text(page.locator("#chat-status"), "is served at", 180)
    url = status.split("is served at ", 1)[1].split(" ", 1)[0]
    right = 0
    for r in dev[:8]:
        page.locator("#chat-clear").click()
        done = requests.get(url + "/health", timeout=5).json()["generations"]
        page.locator("#chat-input textarea").fill(r["src"])
        page.locator("#chat-send").click()
        deadline = time.time() + 60
        while time.time() < deadline and requests.get(url + "/health", timeout=5).json()["generations"] <= done:
            time.sleep(0.2)
        ref = requests.post(url + "/v1/chat/completions", timeout=60, json={
            "messages": [{"role": "user", "content": r["src"]}], "temperature": 0, "max_tokens": 64}).json()
        answer = ref["choices"][0]["message"]["content"].strip()
        if answer == r["tgt"].strip():
            wait_text(page.locator("#chat-a"), answer, 15)  # the page shows that same answer
            right += 1
            break
    assert right >= 1, "the merged model answered none of 8 dev questions exactly"
    shot(page, "chat-tab")
    shot_zh(page, "chat-tab", "对话")
    page.locator("#chat-unload").click()

    # Quantize: the merged model is offered; wint8; reload mid-job
    tab(page, "Quantize")
    pick(page, "quant-model", f"models/{merged} (merged)")
    pick(page, "quant-preset", "wint8")
    page.get_by_label("Dev records to score").fill("8")
    page.locator("#quant-run").click()
    wait_text(page.locator("#quant-job-status"), "running", 30)
    page.reload()  # mid-quantize: the job, its log and then its result are still there
    tab(page, "Quantize")
    status = wait_text(page.locator("#quant-job-status"), "quantize", 30)
    assert "running" in status or "succeeded" in status
    wait_text(page.locator("#quant-summary"), "smaller", 240)
    assert page.locator("#quant-log pre").inner_text().strip()
    wait_text(page.locator("#quant-job-status"), "succeeded", 10)
    page.locator("#quant-plot-size .js-plotly-plot").wait_for(timeout=20000)
    rep = json.loads((home / "models" / f"{merged}-wint8"[:60] / "report.json").read_text())
    times = rep["size"]["before_bytes"] / rep["size"]["after_bytes"]
    assert f"{times:.3g}× smaller" in page.locator("#quant-summary").inner_text()
    shot(page, "quantize-tab")
    shot_zh(page, "quantize-tab", "量化")

    # Jobs: every run and job in one list, states as their files say
    tab(page, "Jobs")
    listing = wait_text(page.locator("#jobs-list"), "quantize", 20)
    for kind in ("training", "merge", "quantize", "chat worker"):
        assert kind in listing, listing
    shot(page, "jobs-tab")
    shot_zh(page, "jobs-tab", "任务")
