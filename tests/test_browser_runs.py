"""Runs tab in headless chromium, on real runs of the demo model:

- Start in the Train tab -> the Runs tab shows the run, its loss curve grows, it succeeds,
  and after a page reload it is still listed with its curve;
- the studio is killed during a run and started again: the run is still running, with its
  live log and a growing curve; Stop from the page ends every process of it; two runs
  compared side by side show both curves and their config difference.
"""

import json
import os
import signal
import time

import psutil
import pytest

from tests.browser import Studio, launch_browser, plotly_charts, wait_text

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


def plotted(page, elem: str = "run-plot") -> dict:
    """{trace name: number of points} of the Plotly figure as rendered in the page."""
    return page.evaluate(
        f"""() => {{ const el = document.querySelector("#{elem} .js-plotly-plot");
                    const out = {{}};
                    for (const tr of (el && el.data) || []) out[tr.name] = (tr.x || []).length;
                    return out; }}"""
    )


def chart_widths(page) -> list:
    """[(width Plotly laid the chart out at, width of its box)] of the Runs tab's two charts."""
    return page.evaluate(
        """() => ['run-plot', 'run-speed'].map(id => { const el = document.querySelector(`#${id} .js-plotly-plot`);
                   return el && el._fullLayout ? [el._fullLayout.width, el.getBoundingClientRect().width] : null; })"""
    )


def charts_fit(page) -> bool:
    got = chart_widths(page)
    return all(w and abs(w[0] - w[1]) <= 2 for w in got)


def loss_points(page, series: str = "loss") -> int:
    return plotted(page).get(series, 0)


def wait_until(pred, timeout: float, step: float = 0.2):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError("timed out")


def start_from_train_tab(page, steps: int, eval_steps: int, name: str, save_steps: int | None = None,
                         report_to: str | None = None) -> str:
    page.get_by_role("tab", name="Train").click()
    wait_text(page.locator("#train-check"), "No problems", 30)
    page.locator("#train-name textarea, #train-name input").first.fill(name)
    if report_to:
        pick(page, "cfg-training-report_to", report_to)
    set_number(page, "cfg-training-max_steps", steps)
    set_number(page, "cfg-training-eval_steps", eval_steps)
    set_number(page, "cfg-training-save_steps", save_steps or eval_steps)
    page.get_by_role("button", name="Start", exact=True).click()
    msg = wait_text(page.locator("#train-start-msg"), f"-{name} is running", 30)  # run ids end in the name
    return msg.split("Run ", 1)[1].split(" ", 1)[0]


def pick(page, elem_id: str, value: str) -> None:
    box = page.locator(f"#{elem_id} input")
    box.click()
    box.fill(value)
    page.get_by_role("option", name=value, exact=True).click()


def runs_last(d) -> str:
    from core.train import runs

    ck = runs.last_checkpoint(d)
    return ck.name if ck else ""


def run_processes(run_dir) -> list:
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(str(run_dir) in a for a in (p.info["cmdline"] or [])):
                out.append(p)
        except psutil.Error:
            continue
    return out


def test_start_follow_succeed_and_reload(home, tmp_path):
    s = Studio(home, tmp_path / "studio.log", env={"PADDLE_STUDIO_VERIFY": "1"})
    try:
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport={"width": 1280, "height": 1600})
            page.goto(s.url)
            run_id = start_from_train_tab(page, 40, 20, "ui-run", report_to="visualdl")
            # Start switches to the Runs tab and selects the new run
            wait_text(page.locator("#run-status"), run_id, 20)
            first = wait_until(lambda: loss_points(page), 60)
            wait_until(lambda: loss_points(page) > first, 60)  # the curve grows while it trains
            # the charts fit their boxes (a chart drawn in a box with no width got Plotly's 700 px
            # and kept it: its right part cut off)
            wait_until(lambda: charts_fit(page), 10)
            wait_text(page.locator("#run-status"), "succeeded", 180)
            # then the round trip: the saved adapter, reloaded in a fresh process, gives training's loss
            verdict = wait_text(page.locator("#run-verify"), "verified: reloaded in a fresh process", 120)
            assert "step 40, output" in verdict, verdict
            assert loss_points(page) == 40 and loss_points(page, "eval_loss") == 2
            assert "100%" in page.locator("#run-progress").inner_text()
            assert "loss" in page.locator("#run-log pre").inner_text()
            # the run also logged to VisualDL (report_to from the form): its board, started from the
            # page on loopback, serves the same 40 losses the studio's own curve shows
            page.locator("#run-board-start").click()
            link = page.locator("#run-board-link").first
            link.wait_for(timeout=30000)
            url = link.get_attribute("href")
            assert url.startswith("http://127.0.0.1:")
            import urllib.request

            from core.train import tracking

            logdir = tracking.log_dir(home / "runs" / run_id)
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            body = json.loads(opener.open(f"{url}/api/scalar/list?run={logdir}&tag=train/loss", timeout=10).read())
            steps = [row[1] for row in body["data"]]
            assert steps == list(range(1, 41)), steps
            page.locator("#run-board-stop").click()
            wait_text(page.locator("#run-action-msg"), "start its board here", 20)
            # the charts were redrawn several times while it trained (each redraw mounts a new
            # chart): the dropped ones are purged, not kept alive by their window listeners
            alive, shown = plotly_charts(page)
            assert shown >= 2 and alive == shown, (alive, shown)
            # after a reload the run is listed, selected and drawn, from its files alone
            page.reload()
            page.get_by_role("tab", name="Runs").click()
            wait_text(page.locator("#runs-list"), f"{run_id} succeeded lora 40/40", 20)
            wait_text(page.locator("#run-status"), "succeeded", 20)
            wait_until(lambda: loss_points(page) == 40, 20)
            # drawn during the reload: 700 px in a 598 px box before the page fitted its charts
            wait_until(lambda: charts_fit(page), 10)
            wait_text(page.locator("#run-verify"), "verified", 20)  # the verdict is in the run's files
            page.get_by_label("中文").check()
            wait_text(page.locator("#run-verify"), "已验证：在新进程中重新加载", 20)
            page.get_by_label("English").check()
            wait_text(page.locator("#run-verify"), "verified", 20)
            if os.environ.get("STUDIO_SCREENSHOTS"):
                page.screenshot(path="assets/runs-tab.png", full_page=True)
            browser.close()
        recs = [json.loads(l) for l in (home / "runs" / run_id / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in recs if "loss" in r] == list(range(1, 41))
    finally:
        s.close()


def test_studio_restart_reattaches_then_stop_and_compare(home, tmp_path):
    s = Studio(home, tmp_path / "studio1.log")
    try:
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport={"width": 1280, "height": 1600})
            page.goto(s.url)
            short = start_from_train_tab(page, 6, 6, "short")
            wait_text(page.locator("#run-status"), "succeeded", 120)
            long = start_from_train_tab(page, 2000, 1000, "long", save_steps=5)
            wait_text(page.locator("#run-status"), long, 20)
            wait_until(lambda: loss_points(page) >= 2, 90)
            browser.close()
    finally:
        os.kill(s.proc.pid, signal.SIGKILL)  # the studio dies without any chance to clean up
        s.proc.wait(10)
        s.log.close()
    d = home / "runs" / long
    assert json.loads((d / "status.json").read_text())["state"] == "running"
    assert run_processes(d), "the run must outlive the studio"

    s = Studio(home, tmp_path / "studio2.log")
    try:
        with playwright.sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport={"width": 1280, "height": 1600})
            page.goto(s.url)
            page.get_by_role("tab", name="Runs").click()
            wait_text(page.locator("#runs-list"), f"{long} running", 20)
            # newest run selected (once seen to take over 20 s under the full suite's load)
            wait_text(page.locator("#run-status"), f"{long} — running", 60)
            n = wait_until(lambda: loss_points(page), 30)
            wait_until(lambda: loss_points(page) > n, 60)  # still live after the restart
            assert "loss" in page.locator("#run-log pre").inner_text()
            # compare with the short run: two loss curves and the config difference
            pick(page, "runs-compare", short)
            wait_text(page.locator("#run-diff"), "max_steps 2000 6", 20)
            wait_until(lambda: sum(1 for k, v in plotted(page).items() if k.endswith(": loss") and v) >= 2, 20)
            # Stop from the page: every process of the run is gone within 10 s
            t0 = time.time()
            page.locator("#run-stop").click()
            try:
                wait_until(lambda: not run_processes(d), 10, 0.1)
            except AssertionError:
                raise AssertionError(f"still alive 10 s after Stop: {[' '.join(p.cmdline())[:200] for p in run_processes(d)]}")
            assert time.time() - t0 < 10
            wait_text(page.locator("#run-status"), "stopped", 20)
            assert page.locator("#run-resume").is_enabled()
            # Resume with another process count (data parallel: the checkpoint loads on 2 processes)
            # it saved every 5 steps: a checkpoint to resume from
            assert any((d / "output").glob("checkpoint-*/studio_checkpoint.json"))
            set_number(page, "run-resume-nproc", 2)
            page.locator("#run-resume").click()
            wait_text(page.locator("#run-action-msg"), "is now running", 20)
            meta = json.loads((d / "studio.json").read_text())
            assert meta["parallel"]["nproc"] == 2 and meta["history"][-1]["nproc"] == {"from": 1, "to": 2}
            wait_until(lambda: len([p for p in run_processes(d) if "entry.py" in " ".join(p.cmdline())]) >= 3, 90)  # launcher + 2 ranks
            # what the run costs, sampled by its supervisor: memory as PSS, CPU, the machine's load
            wait_text(page.locator("#run-status"), "MiB PSS now", 60)
            # ... drawn beside the loss: one point a sample (the run's PSS sum and CPU), from resources.jsonl
            from core.train import monitor

            wait_until(lambda: plotted(page, "run-resources").get("memory PSS (MiB)", 0) >= 2, 60)
            drawn = plotted(page, "run-resources")
            assert drawn["CPU %"] == drawn["memory PSS (MiB)"] <= len([r for r in monitor.read(d) if r.get("procs")])
            # the header: the machine's load at a glance, on every tab
            load = page.locator("#machine-load")
            assert "machine: CPU" in load.inner_text() and "GiB free disk" in load.inner_text()
            assert abs(float(load.get_attribute("data-mem-total-mib")) - psutil.virtual_memory().total / 2**20) < 1
            # steer it from the page: a checkpoint now, then stop and save; both ranks act on the same step
            from core.train import control

            page.locator("#run-ctl-save").click()
            wait_text(page.locator("#run-action-msg"), "Requested save", 20)
            saved = wait_until(lambda: next((h for h in control.history(d) if h["action"] == "save" and "applied_step" in h),
                                            None), 120)
            wait_until(lambda: (d / "output" / f"checkpoint-{saved['applied_step']}" / "studio_checkpoint.json").is_file(), 60)
            page.locator("#run-ctl-stop-and-save").click()
            wait_until(lambda: not run_processes(d), 120, 0.2)
            wait_text(page.locator("#run-status"), "stopped", 30)
            at = next(h for h in control.history(d) if h["action"] == "stop-and-save")["applied_step"]
            assert runs_last(d) == f"checkpoint-{at}"
            browser.close()
        st = json.loads((d / "status.json").read_text())
        assert st["state"] == "stopped" and "saved at step" in st["reason"], st
    finally:
        s.close()
