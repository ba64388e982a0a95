"""The Dataset tab's paged browser and dataset mixing in a real headless chromium (issue 35)."""

import json
import time

import pytest

from tests.browser import Studio, launch_browser, wait_text

pytestmark = pytest.mark.browser
playwright = pytest.importorskip("playwright.sync_api")
WAIT = 60  # s for one event's answer: on a loaded 2-core machine one took 15 s (a page load's events first)


def write_dataset(home, name, train, dev):
    d = home / "datasets" / name
    d.mkdir(parents=True)
    for split, rows in (("train", train), ("dev", dev)):
        (d / f"{split}.json").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (d / "meta.json").write_text(json.dumps({"name": name, "train": len(train), "dev": len(dev), "format": "paddlenlp"}))


def pick(page, elem_id: str, label: str) -> None:
    """Choose ``label`` in a dropdown, typing it again until the page offers it (choices that arrive
    after the typing are not filtered by it)."""
    box = page.locator(f"#{elem_id} input")
    deadline = time.time() + WAIT
    while True:
        box.click()
        box.fill("")
        box.fill(label)
        try:
            page.locator(f"#{elem_id}").get_by_role("option", name=label, exact=True).click(timeout=5000)
            return
        except Exception:  # noqa: BLE001 - not offered yet
            if time.time() > deadline:
                raise


@pytest.fixture
def studio(tmp_path):
    home = tmp_path / "ws"
    write_dataset(home, "alpha", [{"src": f"alpha-q{i}", "tgt": f"alpha-a{i}"} for i in range(25)],
                  [{"src": f"alpha-dq{i}", "tgt": "d"} for i in range(4)])
    write_dataset(home, "beta", [{"src": [f"beta-q{i}", "more?"], "tgt": [f"beta-a{i}", "yes"]} for i in range(8)],
                  [{"src": ["beta-dq", "x"], "tgt": ["beta-da", "y"]}] * 2)
    s = Studio(home, tmp_path / "studio.log")
    yield s, home
    s.close()


def test_browse_pages_then_mix_and_train_picker_offers_it(studio):
    s, home = studio
    with playwright.sync_playwright() as p:
        browser = launch_browser(p)
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        page.goto(s.url)
        info, rows = page.locator("#browse-info"), page.locator("#browse-table")

        pick(page, "browse-pick", "alpha")
        wait_text(info, "Page 1 of 3 · 25 rows in train", timeout=WAIT)
        first = wait_text(rows, "alpha-q9", timeout=WAIT)
        assert "alpha-q0" in first and "alpha-q10" not in first
        page.locator("#browse-next").click()
        wait_text(info, "Page 2 of 3", timeout=WAIT)
        second = wait_text(rows, "alpha-q19", timeout=WAIT)
        assert "alpha-q10" in second and "alpha-q9" not in second
        page.locator("#browse-next").click()
        wait_text(info, "Page 3 of 3", timeout=WAIT)
        last = wait_text(rows, "alpha-q24", timeout=WAIT)
        assert "alpha-q19" not in last
        page.locator("#browse-prev").click()
        wait_text(info, "Page 2 of 3", timeout=WAIT)
        page.locator("#browse-split").get_by_label("dev").check()
        wait_text(info, "Page 1 of 1 · 4 rows in dev", timeout=WAIT)
        wait_text(rows, "alpha-dq3", timeout=WAIT)

        pick(page, "mix-ds-0", "alpha")
        page.locator("#mix-ratio-0 input").fill("0.4")
        pick(page, "mix-ds-1", "beta")
        page.locator("#mix-ratio-1 input").fill("1.5")
        page.locator("#mix-name textarea").fill("blend")
        page.locator("#mix-seed input").fill("7")
        page.locator("#mix-btn").click()
        # 0.4 x 25 = 10 of alpha, 1.5 x 8 = 12 of beta; dev: 0.4 x 4 = 2, then all 2 of beta
        wait_text(page.locator("#dataset-mix-msg"), "Mixed blend: 22 training and 4 dev records", timeout=WAIT)
        wait_text(page.locator("#dataset-list"), "blend 22 4 paddlenlp mix: alpha×0.4 + beta×1.5", timeout=WAIT)
        meta = json.loads((home / "datasets" / "blend" / "meta.json").read_text(encoding="utf-8"))
        assert [(q["dataset"], q["ratio"], q["train_taken"], q["dev_taken"]) for q in meta["mix"]["parts"]] == [
            ("alpha", 0.4, 10, 2), ("beta", 1.5, 12, 2)]
        train = [json.loads(x) for x in (home / "datasets" / "blend" / "train.json").read_text().splitlines()]
        assert sum(r["src"][0].startswith("alpha") for r in train) == 10 and len(train) == 22

        # the language switch translates the page line, the table's columns and the mix message
        page.get_by_label("中文").check()
        wait_text(info, "第 1 页，共 1 页 · dev 中共 4 行", timeout=WAIT)
        wait_text(rows, "提问（src）", timeout=WAIT)
        wait_text(page.locator("#dataset-mix-msg"), "已混合生成 blend：训练记录 22 条，验证记录 4 条", timeout=WAIT)

        # the new dataset is offered at once in the browser and, on its tab, in the Train form
        pick(page, "browse-pick", "blend")
        wait_text(rows, "beta-dq", timeout=WAIT)  # the split chosen (dev) stays, the page starts at 1
        page.locator("#tab-train-button").click()
        pick(page, "cfg-data-dataset_name_or_path", "blend")
        assert page.locator("#cfg-data-dataset_name_or_path input").input_value() == "blend"
        browser.close()
