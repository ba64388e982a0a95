"""The Dataset tab in a real headless chromium against a real studio process."""

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.browser import ROOT, Studio, launch_browser, wait_text

pytestmark = pytest.mark.browser
playwright = pytest.importorskip("playwright.sync_api")


@pytest.fixture
def studio(tmp_path, demo_home):
    home = tmp_path / "ws"
    (home / "models").mkdir(parents=True)
    # the demo tokenizer for the token-length panel (read-only copy of the demo model folder)
    shutil.copytree(demo_home / "models" / "demo-base", home / "models" / "demo-base")
    s = Studio(home, tmp_path / "studio.log")
    yield s, home
    s.close()


def test_upload_broken_then_good_import_and_list(studio, tmp_path, demo_home):
    s, home = studio
    broken = tmp_path / "broken.json"
    broken.write_text(
        '{"src": "问题一", "tgt": "回答一"}\n{"src": "问题二"}\n{"src": "a", "tgt": ["b"]}\n{not json}\n', encoding="utf-8"
    )
    good = tmp_path / "my_chat.jsonl"
    good.write_text(
        "".join(
            json.dumps({"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]}) + "\n"
            for i in range(20)
        ),
        encoding="utf-8",
    )
    with playwright.sync_playwright() as p:
        browser = launch_browser(p)
        page = browser.new_page(viewport={"width": 1280, "height": 1500})
        page.goto(s.url)
        page.locator("#dataset-upload input[type=file]").set_input_files(str(broken))
        problems = page.locator("#dataset-problems")
        problems.get_by_text("missing field").wait_for(timeout=20000)
        table = " ".join(problems.inner_text().split())  # one row reads: file line field severity reason
        assert "broken.json 2 tgt error missing field" in table, table
        assert "broken.json 3 src/tgt error src and tgt must both be strings or both be lists" in table, table
        assert "broken.json 4 error invalid JSON" in table, table
        assert page.locator("#dataset-summary").get_by_text("Not ready").is_visible()

        # the language switch translates labels and the messages already shown
        page.get_by_label("中文").check()
        page.locator("#dataset-problems").get_by_text("缺少字段").wait_for(timeout=10000)
        page.get_by_text("数据集名称").wait_for()
        page.get_by_label("English").check()
        page.locator("#dataset-problems").get_by_text("missing field").wait_for(timeout=10000)

        page.locator("#dataset-upload button[aria-label='Clear']").click()
        page.locator("#dataset-upload input[type=file]").set_input_files(str(good))
        page.locator("#dataset-summary").get_by_text("Ready to import").wait_for(timeout=20000)
        assert "messages" in page.locator("#dataset-summary").inner_text()
        page.locator("#dataset-preview").get_by_text("a0").wait_for()

        page.get_by_role("button", name="Compute token lengths", exact=True).click()
        page.locator("#token-summary").wait_for(timeout=60000)
        page.locator("#token-hist-total .js-plotly-plot").wait_for(timeout=20000)
        assert page.locator("#token-hists .js-plotly-plot").count() == 2

        name = page.locator("#dataset-name textarea")
        assert name.input_value() == "my_chat"
        name.fill("chat-demo")
        page.get_by_role("button", name="Import", exact=True).click()
        page.locator("#dataset-import-msg").get_by_text("Imported").wait_for(timeout=20000)
        wait_text(page.locator("#dataset-list"), "chat-demo 18 2 messages my_chat.jsonl")
        meta = json.loads((home / "datasets" / "chat-demo" / "meta.json").read_text())
        assert (meta["train"], meta["dev"], meta["format"]) == (18, 2, "messages")

        page.reload()
        wait_text(page.locator("#dataset-list"), "chat-demo 18 2 messages my_chat.jsonl")
        if os.environ.get("STUDIO_SCREENSHOTS"):
            lines = (demo_home / "datasets" / "demo" / "dev.json").read_text(encoding="utf-8").splitlines()
            lines[3] = lines[3].replace('"tgt"', '"tgt_"')
            lines[7] = lines[7][:-9]
            lines[11] = '{"src": ["计算 1 + 2 等于多少？", "再加 3 呢？"], "tgt": ["1 + 2 = 3"]}'
            shot = tmp_path / "demo_dev_with_errors.json"
            shot.write_text("\n".join(lines) + "\n", encoding="utf-8")
            page.locator("#dataset-upload input[type=file]").set_input_files(str(shot))
            page.get_by_label("src_length").fill("24")
            page.get_by_label("max_length").fill("40")
            page.locator("#dataset-problems").get_by_text("missing field").wait_for(timeout=20000)
            page.get_by_role("button", name="Compute token lengths", exact=True).click()
            page.locator("#token-summary").wait_for(timeout=60000)
            page.screenshot(path=str(ROOT / "assets" / "dataset-tab.png"), full_page=True)
            page.get_by_label("中文").check()
            page.locator("#dataset-problems").get_by_text("缺少字段").wait_for(timeout=10000)
            page.screenshot(path=str(ROOT / "assets" / "dataset-tab-zh.png"), full_page=True)
        browser.close()
