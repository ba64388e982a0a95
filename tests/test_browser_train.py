"""Train tab in headless chromium: live config check, then Start a demo run that really trains."""

import json
import re
import time

import pytest

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


def set_number(page, elem_id: str, value) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Tab")


def test_live_check_then_start_a_demo_run(home, tmp_path):
    s = Studio(home, tmp_path / "studio.log")
    try:
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport={"width": 1280, "height": 1600})
            page.goto(s.url)
            page.get_by_role("tab", name="Train").click()
            wait_text(page.locator("#train-check"), "No problems", 30)
            # a bad value is reported live, with the field, and Start refuses it
            set_number(page, "cfg-data-max_length", 32)
            wait_text(page.locator("#train-check"), "max_length (32) must be greater than src_length (64)", 20)
            page.get_by_role("button", name="Start", exact=True).click()
            wait_text(page.locator("#train-check"), "1 problem(s)", 20)
            assert not (home / "runs").exists()
            set_number(page, "cfg-data-max_length", 96)
            wait_text(page.locator("#train-check"), "No problems", 20)
            set_number(page, "cfg-training-max_steps", 30)
            set_number(page, "cfg-training-eval_steps", 15)
            page.get_by_role("button", name="Start", exact=True).click()
            msg = wait_text(page.locator("#train-start-msg"), "is running", 30)
            run_id = re.search(r"Run (\S+) is running", msg).group(1)
            browser.close()
        d = home / "runs" / run_id
        deadline = time.time() + 180
        while time.time() < deadline and json.loads((d / "status.json").read_text())["state"] == "running":
            time.sleep(0.5)
        st = json.loads((d / "status.json").read_text())
        assert st["state"] == "succeeded" and st["exit_code"] == 0
        recs = [json.loads(l) for l in (d / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in recs if "loss" in r] == list(range(1, 31))
        assert [r["step"] for r in recs if "eval_loss" in r] == [15, 30]
        cfg = json.loads((d / "config.json").read_text())
        assert cfg["max_steps"] == 30 and cfg["lora"] is True and cfg["max_length"] == 96
    finally:
        s.close()
