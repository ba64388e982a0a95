"""Will it fit? in headless chromium (issue 34): the Train tab's dry run trains the form's config for
20 steps as a run of its own, and the estimate is then measured from it (and pads to the dataset's own
token lengths, which the run measured); a config whose estimate exceeds the free memory is not
started by the first click on Start, which says why."""

import json

import pytest

from tests.browser import studio_page, wait_text
from tests.conftest import link_demo
from tests.test_browser_runs import set_number

pytestmark = [pytest.mark.browser, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")


def test_dry_run_then_the_estimate_is_measured_and_an_unfit_start_asks_twice(tmp_path, demo_home):
    home = link_demo(tmp_path / "ws", demo_home)
    with studio_page(home, tmp_path / "studio.log", env={"PADDLE_STUDIO_VERIFY": "0"}) as (_, page):
        page.get_by_role("tab", name="Train").click()
        check = page.locator("#train-check")
        # nothing has measured the demo data's token lengths yet: the live check says so
        wait_text(check, "Batches counted at max_length", 30)
        page.locator("#train-dry-run").click()
        done = wait_text(page.locator("#train-start-msg"), "finished", 180)
        run_id = done.split("Dry run ", 1)[1].split(" ", 1)[0]
        text = wait_text(check, f"Measured by the dry run {run_id}", 20)
        assert "from the dataset's own lengths" in text, text
        meta = json.loads((home / "runs" / run_id / "studio.json").read_text())
        steps = [json.loads(x)["step"] for x in (home / "runs" / run_id / "metrics.jsonl").read_text().splitlines()
                 if "loss" in json.loads(x)]
        assert meta["dry_run_of"] and meta["dry_run_steps"] == 20 and max(steps) == 20
        # a batch no machine here holds: warned by the check, and Start asks for a second click
        set_number(page, "cfg-training-per_device_train_batch_size", 200000)
        wait_text(check, "exceeds the free memory", 30)
        page.locator("#train-start").click()
        wait_text(page.locator("#train-start-msg"), "Click Start again to start it anyway", 30)
        assert sorted(d.name for d in (home / "runs").iterdir() if d.is_dir()) == [run_id]  # nothing started
        page.get_by_label("中文").check()
        wait_text(check, "超过当前可用内存", 30)
