"""Preference pairs from the Chat tab in a real chromium: two models compared, "A is better"
clicked after three answers, the workspace dataset holds three valid preference records (the
Dataset tab lists it, without a reload), and "Train DPO on these" opens the Train form filled in
for a DPO run on them."""

import json
import time

import pytest
import requests

from core.data import datasets
from tests.browser import Studio, launch_browser, wait_text
from tests.conftest import link_demo
from tests.test_browser_journey import pick
from tests.test_runs import cli

pytestmark = pytest.mark.browser
SETTINGS = __import__("studio.locales", fromlist=["t"]).t("chat.settings", "en")
playwright = pytest.importorskip("playwright.sync_api")


def test_compare_keep_three_pairs_and_fill_the_train_form(tmp_path, demo_home):
    home = link_demo(tmp_path / "ws", demo_home)
    r = cli("demo", "init", "--family", "llama", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    dev = [json.loads(x) for x in (home / "datasets" / "demo" / "dev.json").read_text().splitlines()[:3]]
    s = Studio(home, tmp_path / "studio.log")
    try:
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport={"width": 1280, "height": 1600})
            page.goto(s.url)
            page.locator("#tab-chat-button").click()
            pick(page, "chat-model", "models/demo-base (base)")
            pick(page, "chat-compare", "models/tiny-llama (base)")
            page.locator("#chat-load").click()
            wait_text(page.locator("#chat-status"), "tiny-llama", 180)
            status = wait_text(page.locator("#chat-status"), "is served at", 180)
            urls = [part.split(" ", 1)[0] for part in status.split("is served at ")[1:]]
            assert len(urls) == 2, status
            page.locator("#chat-pref-name textarea").fill("my-prefs")
            # answers that never stop early (an empty answer cannot be preferred), and short
            page.locator("#tab-chat").get_by_text(SETTINGS, exact=True).click()
            page.locator("#chat-ignore-eos input").check()
            page.locator("#chat-max-tokens input").fill("6")
            for k, r in enumerate(dev, 1):
                q = r["src"][-1] if isinstance(r["src"], list) else r["src"]
                done = [requests.get(u + "/health", timeout=5).json()["generations"] for u in urls]
                page.locator("#chat-clear").click()
                page.locator("#chat-input textarea").fill(q)
                page.locator("#chat-send").click()
                deadline = time.time() + 90
                while time.time() < deadline and any(
                        requests.get(u + "/health", timeout=5).json()["generations"] <= n for u, n in zip(urls, done)):
                    time.sleep(0.2)
                time.sleep(1.0)  # the last streamed chunk reaches the page
                page.locator("#chat-a-better").click()
                wait_text(page.locator("#chat-pref-note"), f"now holds {k} preference pairs", 30)
            d = home / "datasets" / "my-prefs"
            rep = datasets.validate(d / "train.json")
            assert (rep.format, rep.good, rep.bad) == ("preference", 3, 0)
            recs = [json.loads(x) for x in (d / "train.json").read_text().splitlines()]
            assert [x["src"][-1] for x in recs] == [r["src"][-1] if isinstance(r["src"], list) else r["src"] for r in dev]
            assert all(x["sort"] == [1, 0] for x in recs)
            # the Dataset tab lists it at once
            page.locator("#tab-dataset-button").click()
            row = wait_text(page.locator("#dataset-list"), "my-prefs", 30)
            assert "preference" in row
            # Train DPO on these: the Train form, filled in
            page.locator("#tab-chat-button").click()
            page.locator("#chat-train-dpo").click()
            page.locator("#cfg-method-method input").wait_for(timeout=30000)
            deadline_ok = False
            for _ in range(100):
                if page.locator("#cfg-method-method input").input_value() == "dpo" and \
                        page.locator("#cfg-data-dataset_name_or_path input").input_value().endswith("my-prefs"):
                    deadline_ok = True
                    break
                page.wait_for_timeout(300)
            assert deadline_ok, page.locator("#cfg-method-method input").input_value()
            assert page.locator("#tab-train").is_visible()
            assert "models/demo-base" in page.locator("#cfg-model-model_name_or_path input").input_value()
            page.locator("#tab-chat-button").click()
            page.locator("#chat-unload").click()
            browser.close()
    finally:
        s.close()
