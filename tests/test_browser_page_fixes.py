"""Issue 35 (items 7 and 11), the Dataset and Chat tabs in headless chromium: one studio, one page.

Dataset: an empty ``[]`` file says it holds no records, with no (empty) problems table under "fix
the errors below"; a JSON-array item's field reads "record 2" / "tgt of record 3" (not "[1]"), in
en and zh (the histograms' axes: tests/test_datasets.py).
Chat: the A/B buttons show only in compare mode; max new tokens beyond the model's context is
refused before sending, in the note (no answer bubble, the message stays in the box); after a
reload the running worker is shown and picked at once; after a language switch the compare
buttons stay hidden and the tab's texts are Chinese.
"""

import json
import time

import psutil
import pytest

from tests.browser import Studio, launch_browser, wait_text
from tests.conftest import link_demo
from tests.test_browser_chat_quantize import pick, serve_workers

pytestmark = [pytest.mark.browser, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")

MODEL = "models/demo-base (base)"


@pytest.fixture(scope="module")
def studio(tmp_path_factory, demo_home):
    tmp = tmp_path_factory.mktemp("pagefixes")
    home = link_demo(tmp / "ws", demo_home)
    before = {p.pid for p in serve_workers()}
    s = Studio(home, tmp / "studio.log")
    s.tmp = tmp
    try:
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            s.page = browser.new_page(viewport={"width": 1280, "height": 1400})
            s.problems = []
            s.page.on("pageerror", lambda e: s.problems.append(f"pageerror: {e}"))
            s.page.on("response", lambda r: r.status >= 500 and s.problems.append(f"HTTP {r.status} {r.url}"))
            s.page.goto(s.url)
            yield s
            browser.close()
    finally:
        for w in serve_workers():  # this studio's only (other tests' workers may run beside it)
            try:
                if w.pid not in before and any(str(tmp) in a for a in w.cmdline()):
                    w.kill()
            except psutil.Error:
                pass
        s.close()


def upload(page, path) -> None:
    # Gradio's Clear button (its title is 清除 while the page is in 中文: studio/gradio_fixes.py)
    clear = page.locator("#dataset-upload button[aria-label='Clear'], #dataset-upload button[aria-label='清除']")
    if clear.count():
        clear.click()
    page.locator("#dataset-upload input[type=file]").set_input_files(str(path))


def test_dataset_empty_file_and_record_fields(studio):
    page = studio.page
    empty = studio.tmp / "empty.json"
    empty.write_text("[]\n", encoding="utf-8")
    upload(page, empty)
    summary = wait_text(page.locator("#dataset-summary"), "This file holds no records", 20)
    assert "empty JSON array" in summary and "fix the errors below" not in summary, summary
    assert not page.locator("#dataset-problems").is_visible()  # no table under it, empty or not

    items = [{"src": "q1", "tgt": "a1"}, 5, {"src": "q3"}] + [{"src": f"q{i}", "tgt": f"a{i}"} for i in range(4, 12)]
    arr = studio.tmp / "arr.json"
    arr.write_text(json.dumps(items, ensure_ascii=False, indent=1), encoding="utf-8")
    upload(page, arr)
    table = wait_text(page.locator("#dataset-problems"), "tgt of record 3", 20)
    assert "arr.json" in table and "record 2" in table, table
    assert "[1]" not in table and "[2]" not in table, table
    page.get_by_label("中文").check()
    table = wait_text(page.locator("#dataset-problems"), "第 3 条记录的 tgt", 20)
    assert "第 2 条记录" in table and "整数" in table and " int" not in table, table
    upload(page, empty)
    summary = wait_text(page.locator("#dataset-summary"), "该文件中没有任何记录", 20)
    assert "空的 JSON 数组" in summary
    assert not page.locator("#dataset-problems").is_visible()
    page.get_by_label("English").check()
    wait_text(page.locator("#dataset-summary"), "This file holds no records", 20)
    assert not studio.problems, studio.problems


def test_chat_compare_buttons_max_tokens_and_reload(studio):
    page = studio.page
    page.locator("#tab-chat-button").click()
    assert not page.locator("#chat-a-better").is_visible()  # no compare model: no A/B buttons
    pick(page, "chat-model", MODEL)
    page.locator("#chat-load").click()
    wait_text(page.locator("#chat-status"), "is served at", 120)
    assert not page.locator("#chat-a-better").is_visible()
    # compare mode shows them, leaving it hides them again
    pick(page, "chat-compare", MODEL)
    page.locator("#chat-a-better").wait_for(state="visible", timeout=10000)
    page.locator("#chat-b-better").wait_for(state="visible", timeout=5000)
    pick(page, "chat-compare", "—")
    page.locator("#chat-a-better").wait_for(state="hidden", timeout=10000)

    # the demo model's context is 512 tokens: 512 new tokens never fit, refused before sending
    page.locator("#tab-chat").get_by_text("System prompt and sampling", exact=True).click()
    box = page.locator("#chat-max-tokens input")
    box.fill("512")
    box.press("Tab")
    page.locator("#chat-input textarea").fill("What is 3 plus 4?")
    page.locator("#chat-send").click()
    note = wait_text(page.locator("#chat-note"), "Not sent", 20)
    assert "512" in note and "at most 511" in note, note
    assert page.locator("#chat-a .bot, #chat-a [data-testid=bot]").count() == 0, page.locator("#chat-a").inner_text()
    assert page.locator("#chat-input textarea").input_value() == "What is 3 plus 4?"
    # room for the answer after the prompt: the worker's refusal goes to the note as well
    box.fill("505")
    box.press("Tab")
    page.locator("#chat-send").click()
    note = wait_text(page.locator("#chat-note"), "after this prompt", 20)
    assert "505" in note, note
    assert page.locator("#chat-a .bot, #chat-a [data-testid=bot]").count() == 0, page.locator("#chat-a").inner_text()
    assert page.locator("#chat-input textarea").input_value() == "What is 3 plus 4?"
    box.fill("8")
    box.press("Tab")
    page.locator("#chat-send").click()
    page.locator("#chat-a .bot, #chat-a [data-testid=bot]").last.wait_for(timeout=30000)

    # a reload shows the running worker at once, picked, with no compare buttons
    page.reload()
    page.locator("#tab-chat-button").click()
    wait_text(page.locator("#chat-status"), "is served at", 20)
    assert "demo-base" in page.locator("#chat-model input").input_value()
    assert not page.locator("#chat-a-better").is_visible()
    # 中文: the status follows, the buttons stay hidden
    page.get_by_label("中文").check()
    wait_text(page.locator("#chat-status"), "已在", 20)
    assert not page.locator("#chat-a-better").is_visible()
    deadline = time.time() + 10  # the model's kind in the picker follows the language too
    while time.time() < deadline and "(基座)" not in page.locator("#chat-model input").input_value():
        time.sleep(0.2)
    assert page.locator("#chat-model input").input_value() == "models/demo-base (基座)"
    assert not studio.problems, studio.problems
