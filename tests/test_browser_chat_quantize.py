"""Chat and Quantize tabs in headless chromium, on the demo model.

Chat: Load starts a real `paddle-studio serve` worker (the studio process holds no weights),
a message streams back, and the answer shown is the one the worker gives any other client for
the same request; Unload ends the worker. Quantize: the demo model is quantized from the tab
and the report (table and charts) appears; the result opens in Chat.
"""

import json
import time

import psutil
import pytest
import requests

from tests.browser import Studio, launch_browser, wait_text

pytestmark = [pytest.mark.browser, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")


@pytest.fixture
def home(tmp_path, demo_home):
    h = tmp_path / "ws"
    (h / "models").mkdir(parents=True)
    (h / "datasets").mkdir()
    (h / "models" / "demo-base").symlink_to(demo_home / "models" / "demo-base")
    (h / "datasets" / "demo").symlink_to(demo_home / "datasets" / "demo")
    return h


def pick(page, elem_id: str, label: str) -> None:
    box = page.locator(f"#{elem_id} input")
    box.click()
    box.fill(label)
    page.get_by_role("option", name=label, exact=True).click()


def serve_workers() -> list:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmd = p.info["cmdline"] or []
            if "core.cli" in cmd and "serve" in cmd:
                out.append(p)
        except psutil.Error:
            continue
    return out


def test_chat_streams_from_a_serve_worker(home, tmp_path):
    s = Studio(home, tmp_path / "studio.log")
    before = {p.pid for p in serve_workers()}
    try:
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            page.goto(s.url)
            page.get_by_role("tab", name="Chat", exact=True).click()
            pick(page, "chat-model", "models/demo-base (base)")
            wait_text(page.locator("#chat-status"), "is not loaded", 20)
            page.locator("#chat-load").click()
            status = wait_text(page.locator("#chat-status"), "is served at", 120)
            url = status.split("is served at ", 1)[1].split(" ", 1)[0]
            assert requests.get(url + "/health", timeout=5).json()["status"] == "ok"
            workers = [w for w in serve_workers() if w.pid not in before]
            assert len(workers) == 1 and workers[0].pid != s.proc.pid
            prompt = "What is 3 plus 4?"
            # a whole stream whatever the demo build's base says first (some builds end at once)
            page.get_by_text("System prompt and sampling").click()
            page.locator("#chat-ignore-eos input").check()
            page.locator("#chat-input textarea").fill(prompt)
            page.locator("#chat-send").click()
            deadline = time.time() + 60
            shown = ""
            while time.time() < deadline:
                texts = page.locator("#chat-a").inner_text()
                if prompt in texts and len(texts.replace(prompt, "").strip()) > 0:
                    shown = texts
                    break
                time.sleep(0.2)
            assert shown, f"no answer appeared: {page.locator('#chat-a').inner_text()!r}"
            deadline = time.time() + 60  # the stream ends (64 tokens)
            while time.time() < deadline and requests.get(url + "/health", timeout=5).json()["generations"] < 1:
                time.sleep(0.2)
            time.sleep(0.5)
            shown = " ".join(page.locator("#chat-a").inner_text().split())
            # the same request from another client gives the same greedy answer
            ref = requests.post(url + "/v1/chat/completions", timeout=60, json={
                "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": 64,
                "ignore_eos": True}).json()
            answer = " ".join(ref["choices"][0]["message"]["content"].split())
            assert answer
            wait_text(page.locator("#chat-a"), answer, 15)
            page.get_by_text("Copy as API call (curl / Python)").click()
            wait_text(page.locator("#chat-api"), f"curl -N {url}/v1/chat/completions", 10)
            # Stop mid-stream: the worker stops generating (it counts the generation as cancelled)
            box = page.locator("#chat-max-tokens input")
            box.fill("400")
            box.press("Tab")
            page.locator("#chat-ignore-eos input").check()  # a stream long enough to stop mid-way
            page.locator("#chat-regen").click()
            deadline = time.time() + 30
            while time.time() < deadline and requests.get(url + "/health", timeout=5).json()["active"] < 1:
                time.sleep(0.05)
            page.locator("#chat-stop").click()
            deadline = time.time() + 15
            h = {}
            while time.time() < deadline:
                h = requests.get(url + "/health", timeout=5).json()
                if h["cancelled"] >= 1 and h["active"] == 0:
                    break
                time.sleep(0.1)
            assert h["cancelled"] >= 1 and h["active"] == 0, [(r["finish_reason"], r["completion_tokens"]) for r in h["recent"]]
            assert h["recent"][-1]["finish_reason"] == "cancelled" and h["recent"][-1]["completion_tokens"] < 400
            page.locator("#chat-unload").click()
            wait_text(page.locator("#chat-status"), "is not loaded", 30)
            deadline = time.time() + 15
            while time.time() < deadline and any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers):
                time.sleep(0.2)
            assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)
            browser.close()
    finally:
        for w in serve_workers():
            if w.pid not in before:
                w.kill()
        s.close()


def test_quantize_from_the_tab_shows_the_report(home, tmp_path):
    s = Studio(home, tmp_path / "studio.log")
    try:
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            page.goto(s.url)
            page.get_by_role("tab", name="Quantize", exact=True).click()
            pick(page, "quant-model", "models/demo-base (base)")
            pick(page, "quant-preset", "wint8")
            wait_text(page.locator("#quant-preset-desc"), "Weight-only INT8", 20)
            pick(page, "quant-data", "demo")  # the base model records no training data
            page.locator("#quant-name textarea, #quant-name input").first.fill("demo-wint8")
            page.get_by_label("Dev records to score").fill("8")
            page.locator("#quant-run").click()
            wait_text(page.locator("#quant-report"), "smaller", 240)
            table = " ".join(page.locator("#quant-report-table").inner_text().split())
            assert "weight_bytes" in table and "perplexity" in table
            page.locator("#quant-plot-size .js-plotly-plot").wait_for(timeout=20000)
            page.locator("#quant-plot-quality .js-plotly-plot").wait_for(timeout=20000)
            bars = page.evaluate("() => document.querySelector('#quant-plot-size .js-plotly-plot').data.map(t => t.text[0])")
            assert all(b.endswith("MiB") for b in bars) and len(bars) == 2  # values written on the bars
            rep = json.loads((home / "models" / "demo-wint8" / "report.json").read_text())
            assert rep["size"]["after_bytes"] < rep["size"]["before_bytes"]
            ppl = rep["eval"]["before"]["perplexity"], rep["eval"]["after"]["perplexity"]
            assert abs(ppl[1] - ppl[0]) / ppl[0] < 0.01
            times = rep["size"]["before_bytes"] / rep["size"]["after_bytes"]
            assert times > 1 and f"{times:.3g}× smaller" in page.locator("#quant-summary").inner_text()
            # the result opens in the Chat tab, picked and ready to load
            page.locator("#quant-open-chat").click()
            wait_text(page.locator("#chat-status"), "demo-wint8", 20)
            browser.close()
    finally:
        s.close()


def test_quantize_from_a_paddlenlp_config_file(home, tmp_path):
    """An llm/run_quantization.py argument file uploaded in the Quantize tab: a typo is named with
    its fix and nothing can start; the corrected file shows what will run and runs as a job."""
    bad, good = tmp_path / "bad.json", tmp_path / "ptq_argument.json"
    args = {"model_name_or_path": "demo-base", "dataset_name_or_path": "demo", "do_ptq": True,
            "quant_type": "weight_only_int8", "ptq_step": 1, "output_dir": "./checkpoints/wint8_ckpts"}
    bad.write_text(json.dumps({**args, "ptq_stpe": 1}))
    good.write_text(json.dumps(args))
    s = Studio(home, tmp_path / "studio.log")
    try:
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            page.goto(s.url)
            page.get_by_role("tab", name="Quantize", exact=True).click()
            page.locator("#quant-from-config").get_by_text("Or start from a PaddleNLP").click()
            page.locator("#quant-config-file input[type=file]").set_input_files(str(bad))
            wait_text(page.locator("#quant-config-plan"), "did you mean 'ptq_step'?", 30)
            assert page.locator("#quant-config-start").is_disabled()
            page.locator("#quant-config-file button[aria-label='Clear']").click()
            page.locator("#quant-config-file input[type=file]").set_input_files(str(good))
            wait_text(page.locator("#quant-config-plan"), "Runs as:", 30)
            assert "output model wint8_ckpts" in page.locator("#quant-config-plan").inner_text()
            # a burst of tab selections (as the page's first pass over the tabs and a click during it
            # make): the timers on must be the shown tab's, or the job view below never moves
            page.evaluate("() => ['tab-jobs', 'tab-runs', 'tab-quantize'].forEach("
                          "(id) => document.getElementById(id + '-button').click())")
            page.wait_for_function("window.__studioLive === 'tab-quantize'", timeout=10000)
            page.locator("#quant-config-start").click()
            wait_text(page.locator("#quant-job-status"), "succeeded", 240)
            wait_text(page.locator("#quant-report"), "smaller", 30)
            rep = json.loads((home / "models" / "wint8_ckpts" / "report.json").read_text())
            assert rep["algorithm"] == "weight_only_int8" and rep["calibration"]["steps"] == 1
            browser.close()
    finally:
        s.close()
