"""The first minute of a new user: `paddle-studio ui --demo` (what `make run` starts) on a workspace
without the demo. The page answers at once, says the demo is being built, and every tab offers the
demo dataset and model when the job is done, without a reload."""

from __future__ import annotations

import pytest

from tests.browser import Studio, launch_browser, wait_text
from tests.test_browser_runs import pick

pytestmark = [pytest.mark.browser, pytest.mark.slow]
playwright = pytest.importorskip("playwright.sync_api")


def test_make_run_on_a_new_workspace_builds_the_demo_as_a_job_the_page_follows(demo_home, tmp_path):
    home = tmp_path / "ws"
    s = Studio(home, tmp_path / "studio.log", args=("--demo",), env={"PADDLE_STUDIO_DEMO_CACHE": str(demo_home)})
    try:
        print(f"\npage answered {s.answered_s:.2f} s after the studio started")
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport={"width": 1280, "height": 1200})
            page.goto(s.url)
            banner = page.locator("#demo-banner")
            text = wait_text(banner, "demo workspace", 30)
            assert "Building the demo workspace" in text or "is ready" in text
            # on a tab with live views of its own, the pickers (and this banner) ride on its tick
            page.get_by_role("tab", name="Runs", exact=True).click()
            page.wait_for_function("() => window.__studioLive === 'tab-runs'", timeout=30000)
            wait_text(banner, "is ready", 120)  # copied from the cache the tests built: seconds
            assert (home / "models" / "demo-base" / "studio_model.json").is_file()
            page.get_by_role("tab", name="Train", exact=True).click()
            wait_text(page.locator("#train-check"), "No problems", 30)
            page.get_by_role("tab", name="Quantize", exact=True).click()
            pick(page, "quant-model", "models/demo-base (base)")
            page.get_by_role("tab", name="Jobs", exact=True).click()
            wait_text(page.locator("#jobs-table"), "succeeded", 30)
            page.reload()  # after a reload the page knows the build is over
            page.locator("#studio-tabs").wait_for()
            page.wait_for_timeout(3000)
            assert not banner.is_visible() or "Building" not in banner.inner_text()
            browser.close()
    finally:
        s.close()
