"""What an open page costs, this checkout against another one, measured at the same time: two
studios (one per checkout, sharing one workspace), each with its own headless chromium, both pages
on the Runs tab following the SAME training run. Prints, per 30 s window and as medians, the CPU
seconds per minute of each browser (all its processes), each studio process and each page's main
thread, and the ratio this/other.

`watch_cost.py` readings drift by ±0.5 CPU-s/min between sittings (the run's speed, the machine), more
than most single changes are worth; here both versions see the same run in the same seconds, so
the ratio holds still. Make the other checkout with `git worktree add /tmp/before HEAD~1` (it uses
this checkout's .venv and .cache/demo-ws).

    .venv/bin/python bench/watch_ab.py /tmp/before [--windows 8] [--seconds 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser import free_port, launch_browser, wait_text  # noqa: E402
from watch_cost import follow_run, long_run_workspace  # noqa: E402 - bench/ is this script's folder


def tree_cpu(root: psutil.Process) -> float:
    total = 0.0
    for p in [root, *root.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            continue
    return total


def own_cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def browser_roots() -> list:
    """The main process of every chromium started below this one."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if "chrom" in p.name().lower() and "chrom" not in p.parent().name().lower():
                out.append(p)
        except psutil.Error:
            continue
    return out


def start_studio(checkout: Path, env: dict, log: Path) -> tuple:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "core.cli", "ui", "--port", str(port)], cwd=checkout, env=env,
                            stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.time() + 90
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the studio of {checkout} exited: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(url, timeout=1)
            return proc, url
        except OSError:
            time.sleep(0.2)
    sys.exit(f"the studio of {checkout} did not answer in 90 s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("other", type=Path, help="the other checkout (a git worktree)")
    ap.add_argument("--windows", type=int, default=8, help="30 s windows while the run is watched")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--settle", type=float, default=10.0)
    a = ap.parse_args()
    if not (a.other / "studio" / "app.py").is_file():
        sys.exit(f"{a.other} is not a checkout of this project")
    from playwright.sync_api import sync_playwright

    tmp, home, env, cfg = long_run_workspace("watch-ab-")
    names = ("this", "other")
    studios = [start_studio(ROOT, env, tmp / "this.log"), start_studio(a.other.resolve(), env, tmp / "other.log")]
    rows: dict = {"idle": [], "watched": []}
    run_id = None
    try:
        with sync_playwright() as p:
            sides = []
            for proc, url in studios:
                before = {b.pid for b in browser_roots()}
                browser = launch_browser(p)
                page = browser.new_page(viewport={"width": 1280, "height": 1400})
                cdp = page.context.new_cdp_session(page)
                cdp.send("Performance.enable")
                page.goto(url)
                page.locator("#tab-dataset").wait_for(state="attached", timeout=60000)
                root = next(b for b in browser_roots() if b.pid not in before)
                sides.append((psutil.Process(proc.pid), page, cdp, root))

            def task_s(cdp) -> float:
                return next(m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]
                            if m["name"] == "TaskDuration")

            def measure(label: str, n: int):
                for w in range(n):
                    c0 = [(tree_cpu(root), own_cpu(sp), task_s(cdp)) for sp, _, cdp, root in sides]
                    t0 = time.monotonic()
                    time.sleep(a.seconds)
                    dt = time.monotonic() - t0
                    row = [((tree_cpu(root) - b0) * 60 / dt, (own_cpu(sp) - s0) * 60 / dt, (task_s(cdp) - m0) * 60 / dt)
                           for (sp, _, cdp, root), (b0, s0, m0) in zip(sides, c0)]
                    rows[label].append(row)
                    print(f"{label:8} {w}  " + "  |  ".join(
                        f"{n_}: browser {b:.3g} studio {s:.3g} page {m:.3g}" for n_, (b, s, m) in zip(names, row)),
                        flush=True)

            time.sleep(a.settle)
            measure("idle", 2)
            r = subprocess.run([sys.executable, "-m", "core.cli", "train", str(cfg), "--name", "watched", "--detach",
                                "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
            if r.returncode:
                sys.exit(r.stderr[-2000:])
            run_id = json.loads(r.stdout)["run_id"]
            for _, page, _, _ in sides:
                follow_run(page, run_id)
            for _, page, _, _ in sides:
                wait_text(page.locator("#run-status"), f"{run_id} — running", 60)
            deadline = time.time() + 120
            while not (home / "runs" / run_id / "metrics.jsonl").is_file() and time.time() < deadline:
                time.sleep(0.5)
            time.sleep(a.settle)
            measure("watched", a.windows)
    finally:
        if run_id:
            subprocess.run([sys.executable, "-m", "core.cli", "runs", "stop", run_id], cwd=ROOT, env=env,
                           capture_output=True, timeout=120)
        for proc, _ in studios:
            proc.terminate()
    print("CPU seconds per minute (60 = one core busy), medians; this/other: median of the per-window ratios")
    for label, got in rows.items():
        for k, what in enumerate(("browser", "studio", "page")):
            mine, theirs = (statistics.median(r[i][k] for r in got) for i in (0, 1))
            ratio = statistics.median(r[0][k] / max(r[1][k], 1e-9) for r in got)
            print(f"{label:8} {what:8} this {mine:6.3g}  other {theirs:6.3g}  this/other {ratio:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
