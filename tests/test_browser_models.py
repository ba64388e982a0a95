"""The Models tab in a real chromium against a real studio: a broken folder is refused with its
reason, a Hugging Face folder is checked, imported (converted) as a job, listed, and offered by the
Train, Chat and Quantize tabs without a reload."""

import os

import pytest

from tests.browser import ROOT, Studio, launch_browser, wait_text
from tests.conftest import link_demo
from tests.test_browser_journey import pick
from tests.test_runs import cli

pytestmark = pytest.mark.browser
playwright = pytest.importorskip("playwright.sync_api")


def test_check_import_and_offer_everywhere(tmp_path, demo_home):
    home = link_demo(tmp_path / "ws", demo_home)
    hf = tmp_path / "downloads" / "Qwen2-tiny"
    r = cli("demo", "init", "--family", "qwen2", "--out", str(hf), "--hf", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    broken = tmp_path / "downloads" / "no-config"
    broken.mkdir()
    s = Studio(home, tmp_path / "studio.log")
    try:
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            page.goto(s.url)
            page.locator("#tab-models-button").click()
            wait_text(page.locator("#models-table"), "demo-base")
            page.locator("#models-folder textarea").fill(str(broken))
            page.locator("#models-inspect").click()
            wait_text(page.locator("#models-report"), "no config.json")
            page.locator("#models-folder textarea").fill(str(hf))
            page.locator("#models-inspect").click()
            wait_text(page.locator("#models-report"), "PyTorch (Hugging Face) weights, converted on import")
            wait_text(page.locator("#models-report"), "qwen2")
            page.locator("#models-name textarea").fill("my-qwen")
            page.locator("#models-import").click()
            wait_text(page.locator("#models-imported"), "Imported my-qwen", 90)
            wait_text(page.locator("#import-job-status"), "succeeded", 30)
            row = wait_text(page.locator("#models-table"), "my-qwen", 30)
            assert "converted from PyTorch" in row
            if os.environ.get("STUDIO_SCREENSHOTS"):
                page.screenshot(path=str(ROOT / "assets" / "models-tab.png"), full_page=True)
            assert (home / "models" / "my-qwen" / "studio_model.json").is_file()
            # what this tab created, every other tab offers at once
            page.locator("#tab-train-button").click()
            pick(page, "cfg-model-model_name_or_path", "models/my-qwen (base)", timeout=60)
            page.locator("#tab-chat-button").click()
            pick(page, "chat-model", "models/my-qwen (base)", timeout=60)
            page.locator("#tab-quantize-button").click()
            pick(page, "quant-model", "models/my-qwen (base)", timeout=60)
            # the import job is still shown after a reload
            page.reload()
            page.locator("#tab-models-button").click()
            wait_text(page.locator("#import-job-status"), "succeeded", 30)
            page.get_by_label("中文").check()
            wait_text(page.locator("#models-table"), "参数量", 20)  # the table re-rendered in Chinese
            page.get_by_text("工作区中的模型").wait_for(timeout=10000)
            if os.environ.get("STUDIO_SCREENSHOTS"):
                page.screenshot(path=str(ROOT / "assets" / "models-tab-zh.png"), full_page=True)
            browser.close()
    finally:
        s.close()
