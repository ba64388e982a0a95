"""A blank-infilling family in the page, in 中文: a tiny ChatGLM-6B v1 is offered by the Chat tab and
answers in its own template through a real serve worker (the answer the page shows is the one any
other client gets for the same greedy request), and the Train tab's live check refuses DPO on it
with the reason, in Chinese."""

import time

import pytest
import requests

from tests.browser import Studio, launch_browser, wait_text
from tests.conftest import link_demo
from tests.test_browser_chat_quantize import serve_workers
from tests.test_browser_journey import pick
from tests.test_runs import cli

pytestmark = [pytest.mark.browser, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")


def test_chatglm_v1_chats_and_is_checked_in_chinese(tmp_path, demo_home):
    home = link_demo(tmp_path / "ws", demo_home)
    r = cli("demo", "init", "--family", "chatglm", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    # 150 steps of full SFT on the demo data, so the tiny model answers with words (a random one picks
    # special tokens, which decode to nothing)
    import os
    import shutil

    from tests.test_families import _train

    os.environ["PADDLE_STUDIO_HOME"] = str(home)
    try:
        run, problems = _train(home, str(home / "models" / "tiny-chatglm"), "sft", 150, "chatglm-sft")
    finally:
        os.environ.pop("PADDLE_STUDIO_HOME", None)
    assert not problems, problems
    shutil.copytree(run / "output", home / "models" / "chatglm-sft")
    s = Studio(home, tmp_path / "studio.log")
    before = {p.pid for p in serve_workers()}
    try:
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            page.goto(s.url)
            page.get_by_label("中文").check()
            page.locator("#tab-chat-button").click()
            pick(page, "chat-model", "models/chatglm-sft (基座)")  # the Chat picker names kinds in the page's language
            page.locator("#chat-load").click()
            status = wait_text(page.locator("#chat-status"), "http://127.0.0.1:", 120)
            url = "http://127.0.0.1:" + status.split("http://127.0.0.1:", 1)[1].split(" ", 1)[0].rstrip("。，,")
            prompt = "你好，红色的苹果"
            page.get_by_text("系统提示与采样参数").click()
            page.locator("#chat-ignore-eos input").check()
            box = page.locator("#chat-max-tokens input")
            box.fill("12")
            box.press("Tab")
            page.locator("#chat-input textarea").fill(prompt)
            page.locator("#chat-send").click()
            deadline = time.time() + 60
            while time.time() < deadline and requests.get(url + "/health", timeout=5).json()["generations"] < 1:
                time.sleep(0.2)
            ref = requests.post(url + "/v1/chat/completions", timeout=60, json={
                "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": 12,
                "ignore_eos": True}).json()
            answer = " ".join(ref["choices"][0]["message"]["content"].split())
            assert answer
            wait_text(page.locator("#chat-a"), answer, 20)
            # the worker built the [gMASK]<sop> prompt and its 4-D mask: its answer is the model's own
            from core.chat.engine import ChatEngine

            eng = ChatEngine(str(home / "models" / "chatglm-sft"))
            ids = eng.encode([{"role": "user", "content": prompt}])
            assert ids[-2:] == [eng.tokenizer.gmask_token_id, eng.tokenizer.bos_token_id]
            local = eng.start([{"role": "user", "content": prompt}], {"max_new_tokens": 12, "temperature": 0, "ignore_eos": True})
            "".join(local)
            assert " ".join(local.text.split()) == answer
            page.locator("#chat-unload").click()
            # Train: DPO on this family is refused by the live check, with the reason, in Chinese
            page.locator("#tab-train-button").click()
            pick(page, "cfg-model-model_name_or_path", "models/tiny-chatglm (base)", timeout=60)
            pick(page, "cfg-method-method", "dpo", timeout=60)
            wait_text(page.locator("#train-check"), "四维的填空式注意力掩码", 60)
            browser.close()
    finally:
        for w in serve_workers():
            if w.pid not in before:
                w.kill()
        s.close()
