"""The Evaluate & predict tab in chromium: a merged model (a LoRA merged into the demo base) on an
uploaded JSONL file, as a job from the page; the metrics; the predictions a page at a time (page 2
holds other records than page 1, each answer the one core's evaluate gives for that prompt);
predictions.jsonl downloaded whole; a reload finds the job and its predictions again."""

import json
import time

import pytest

from tests.browser import Studio, launch_browser, wait_text
from tests.conftest import link_demo
from tests.test_browser_journey import pick

pytestmark = [pytest.mark.browser, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")

RECORDS, MAX_NEW = 14, 12


def shown_rows(page) -> list[list[str]]:
    return page.evaluate("() => [...document.querySelectorAll('#evaluate-preds-table tbody tr')]"
                         ".map(tr => [...tr.querySelectorAll('td')].map(td => td.innerText.replace(/\\s+/g, ' ').trim()))")


def test_evaluate_an_uploaded_file_page_and_download(tmp_path, demo_home, merged_demo):
    home = link_demo(tmp_path / "ws", demo_home)
    (home / "models" / "demo-merged").symlink_to(merged_demo[0])  # a LoRA merged into the demo base
    dev = (home / "datasets" / "demo" / "dev.json").read_text(encoding="utf-8").splitlines()
    upload = tmp_path / "my-questions.jsonl"
    upload.write_text("\n".join(dev[:RECORDS]) + "\n", encoding="utf-8")
    s = Studio(home, tmp_path / "studio.log")
    try:
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            page.goto(s.url)
            page.locator("#tab-evaluate-button").click()
            pick(page, "evaluate-model", "models/demo-merged (merged)")
            page.locator("#evaluate-upload input[type=file]").set_input_files(str(upload))
            wait_text(page.locator("#evaluate-upload"), "my-questions", 30)  # Gradio shows "my-questions .jsonl"
            for box, value in (("evaluate-limit", 0), ("evaluate-max-tokens", MAX_NEW)):
                field = page.locator(f"#{box} input")
                field.fill(str(value))
                field.press("Tab")
            page.locator("#evaluate-run").click()
            wait_text(page.locator("#evaluate-note"), "Started job", 30)

            from core.models import evaluate  # core's answers for the same prompts, while the job runs

            want = evaluate.evaluate(str(merged_demo[0]), None, upload, max_new_tokens=MAX_NEW,
                                     predictions=True)["predictions"]
            norm = lambda x: " ".join(x.split())  # noqa: E731

            wait_text(page.locator("#evaluate-summary"), f"on {RECORDS} records of my-questions.jsonl", 90)
            assert "exact match" in page.locator("#evaluate-metrics").inner_text()
            wait_text(page.locator("#evaluate-page"), f"Page 1 of 2 · {RECORDS} records", 10)
            first = shown_rows(page)
            assert [r[0] for r in first] == [str(i) for i in range(1, 11)]
            page.locator("#evaluate-next").click()
            wait_text(page.locator("#evaluate-page"), "Page 2 of 2", 20)
            second = shown_rows(page)
            assert [r[0] for r in second] == [str(i) for i in range(11, RECORDS + 1)]
            assert first[0][1:4] != second[0][1:4]
            for row in first + second:
                w = want[int(row[0]) - 1]
                assert row[1].startswith(norm(w["prompt"])) and row[2] == norm(w["reference"]), (row, w)
                assert row[3] == norm(w["output"]), (row, w)
                assert (row[6] == "—") == (w["bleu4"] is None) and row[4] == ("yes" if w["exact_match"] else "no")
            page.locator("#evaluate-prev").click()
            wait_text(page.locator("#evaluate-page"), "Page 1 of 2", 10)

            with page.expect_download(timeout=20000) as dl:
                page.locator("#evaluate-download a").first.click()
            got = [json.loads(x) for x in open(dl.value.path(), encoding="utf-8").read().splitlines() if x.strip()]
            assert len(got) == RECORDS
            assert all({"index", "prompt", "reference", "output", "exact_match", "rouge_l", "bleu4"} <= set(r) for r in got)
            assert [r["output"] for r in got] == [w["output"] for w in want]

            page.reload()  # the job and its predictions survive a reload
            page.locator("#tab-evaluate-button").click()
            wait_text(page.locator("#evaluate-summary"), f"on {RECORDS} records", 30)
            wait_text(page.locator("#evaluate-page"), "Page 1 of 2", 10)
            browser.close()
    finally:
        s.close()
