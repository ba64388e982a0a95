"""A ReFT adapter in a real chromium against a real studio: the Merge tab says at once, in the
user's language, that it cannot be merged (and Merge is refused with that reason), and the Chat tab
serves it with its base: the page shows the answer the worker's OpenAI-style API gives."""

import json
import time

import pytest
import requests

from tests.browser import Studio, launch_browser, wait_text
from tests.conftest import link_demo
from tests.test_browser_journey import pick
from tests.test_runs import cli

pytestmark = pytest.mark.browser
playwright = pytest.importorskip("playwright.sync_api")


def test_reft_adapter_merge_says_why_and_chat_serves_it(tmp_path, demo_home):
    home = link_demo(tmp_path / "ws", demo_home)
    cfg = tmp_path / "reft.json"
    from core.train import config

    c = config.load_preset("demo-reft", home)
    c.training.max_steps, c.training.evaluation_strategy, c.training.save_strategy = 60, "no", "no"
    cfg.write_text(json.dumps(c.to_paddlenlp()))
    r = cli("train", str(cfg), "--name", "reft-ui", "--json", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    [out] = list((home / "runs").glob("*-reft-ui/output"))
    run_id = out.parent.name
    label = f"runs/{run_id}/output (reft)"
    dev = [json.loads(x) for x in (home / "datasets" / "demo" / "dev.json").read_text().splitlines()[:3]]
    s = Studio(home, tmp_path / "studio.log")
    try:
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            page.goto(s.url)
            page.locator("#tab-merge-button").click()
            pick(page, "merge-adapter", label)
            wait_text(page.locator("#merge-note"), "A ReFT adapter cannot be merged", 30)
            assert page.locator("#merge-name textarea").input_value() == ""
            page.get_by_label("中文").check()
            wait_text(page.locator("#merge-note"), "ReFT 适配器无法合并", 30)
            page.get_by_label("English").check()
            page.locator("#merge-name textarea").fill("reft-merged")
            page.locator("#merge-btn").click()
            wait_text(page.locator("#merge-note"), "A ReFT adapter cannot be merged", 30)
            assert not (home / "models" / "reft-merged").exists()

            page.locator("#tab-chat-button").click()
            pick(page, "chat-model", label)
            page.locator("#chat-load").click()
            status = wait_text(page.locator("#chat-status"), "is served at", 180)
            url = status.split("is served at ", 1)[1].split(" ", 1)[0]
            health = requests.get(url + "/health", timeout=5).json()
            done = health["generations"]
            question = dev[0]["src"][-1] if isinstance(dev[0]["src"], list) else dev[0]["src"]
            page.locator("#chat-input textarea").fill(question)
            page.locator("#chat-send").click()
            deadline = time.time() + 60
            while time.time() < deadline and requests.get(url + "/health", timeout=5).json()["generations"] <= done:
                time.sleep(0.2)
            ref = requests.post(url + "/v1/chat/completions", timeout=60, json={
                "messages": [{"role": "user", "content": question}], "temperature": 0, "max_tokens": 64}).json()
            answer = ref["choices"][0]["message"]["content"].strip()
            assert answer
            wait_text(page.locator("#chat-a"), answer, 15)
            page.locator("#chat-unload").click()
            browser.close()
    finally:
        s.close()
