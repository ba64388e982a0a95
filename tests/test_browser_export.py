"""The Export tab in chromium: a prefix adapter is refused the moment it is picked (English, then
中文 after the switch), nothing starts; the demo model is exported as a job from the page; "Open in
Chat" loads the static folder in the Chat tab, whose answer is Paddle Inference's own."""

import json
import os
import time

import pytest

from tests.browser import ROOT, Studio, launch_browser, wait_text
from tests.conftest import link_demo
from tests.test_browser_chat_quantize import serve_workers
from tests.test_browser_journey import pick

pytestmark = [pytest.mark.browser, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")


def test_export_from_the_page_and_chat_with_it(tmp_path, demo_home):
    home = link_demo(tmp_path / "ws", demo_home)
    pfx = home / "models" / "my-prefix"
    pfx.mkdir()
    (pfx / "prefix_config.json").write_text(json.dumps({"base_model_name_or_path": str(home / "models" / "demo-base"),
                                                        "num_prefix_tokens": 8}), encoding="utf-8")
    s = Studio(home, tmp_path / "studio.log")
    before = {p.pid for p in serve_workers()}
    try:
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            page.goto(s.url)
            page.locator("#tab-export-button").click()
            pick(page, "export-model", "models/my-prefix (prefix)")
            wait_text(page.locator("#export-note"), "A prefix-tuning adapter cannot be exported", 30)
            page.get_by_label("中文").check()
            wait_text(page.locator("#export-note"), "前缀微调适配器无法导出", 30)
            page.locator("#export-run").click()
            wait_text(page.locator("#export-note"), "前缀微调适配器无法导出", 30)
            assert not (home / "models" / "my-prefix-static").exists() and not list((home / "jobs").glob("*export*")) \
                if (home / "jobs").is_dir() else True
            page.get_by_label("English").check()
            pick(page, "export-model", "models/demo-base (base)")
            deadline = time.time() + 20
            while time.time() < deadline and page.locator("#export-name textarea, #export-name input").first.input_value() != "demo-base-static":
                time.sleep(0.2)
            assert page.locator("#export-name textarea, #export-name input").first.input_value() == "demo-base-static"
            page.locator("#export-run").click()
            wait_text(page.locator("#export-summary"), "Exported to", 180)
            if os.environ.get("STUDIO_SCREENSHOTS"):
                page.screenshot(path=str(ROOT / "assets" / "export-tab.png"), full_page=True)
            assert (home / "models" / "demo-base-static" / "studio_model.json").is_file()
            page.locator("#export-open-chat").click()
            wait_text(page.locator("#chat-status"), "is not loaded", 30)
            page.locator("#chat-load").click()
            wait_text(page.locator("#chat-status"), "is served at", 120)
            prompt = "What is 3 plus 4?"
            page.get_by_text("System prompt and sampling").click()
            box = page.locator("#chat-max-tokens input")
            box.fill("24")
            box.press("Tab")
            page.locator("#chat-input textarea").fill(prompt)
            page.locator("#chat-send").click()
            from core.models.static import StaticEngine

            want = StaticEngine(home / "models" / "demo-base-static").answers([[{"role": "user", "content": prompt}]], 24)[0]
            assert want
            wait_text(page.locator("#chat-a"), " ".join(want.split()), 60)
            page.locator("#chat-unload").click()
            browser.close()
    finally:
        for w in serve_workers():
            if w.pid not in before:
                w.kill()
        s.close()
