"""What a page left open costs: CPU seconds per minute of the studio process and of the headless
chromium (every process of the browser, the renderer most of all) in three windows:

1. idle: the page on its first tab, nothing running;
2. watched: a run training, the page on the Runs tab following it (curve, log, progress);
3. elsewhere: the same run, the page back on the first tab.

Prints each window's figures and their ratios to the idle one. Needs the demo workspace
(.cache/demo-ws, built by the tests or `paddle-studio demo init`) and Debian chromium.

    .venv/bin/python bench/watch_cost.py [--seconds 30] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser import Studio, launch_browser, wait_text  # noqa: E402
from tests.conftest import link_demo  # noqa: E402


def cpu_seconds(procs) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            continue
    return total


def browser_processes() -> list:
    """Every chromium process below this one (Playwright's driver starts the browser)."""
    return [p for p in psutil.Process().children(recursive=True) if "chrom" in (p.name() or "").lower()]


METRICS = ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration")


def kind(proc) -> str:
    """A chromium process's part: renderer (the page), gpu-process (compositing, raster), utility
    (network), or browser (the main process)."""
    try:
        for arg in proc.cmdline():
            if arg.startswith("--type="):
                return arg[len("--type="):]
    except psutil.Error:
        pass
    return "browser"


def window(studio_proc, seconds: float, cdp) -> tuple:
    """(studio, browser CPU seconds per minute, the page's main-thread seconds per minute by kind,
    the browser's CPU seconds per minute by process kind) over ``seconds``."""
    sp = psutil.Process(studio_proc.pid)
    bp = browser_processes()
    m0 = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    each0 = {p: cpu_seconds([p]) for p in bp}
    s0, t0 = cpu_seconds([sp]), time.monotonic()
    time.sleep(seconds)
    dt = time.monotonic() - t0
    m1 = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    main = {k: (m1.get(k, 0) - m0.get(k, 0)) * 60 / dt for k in METRICS}
    parts: dict = {}
    for p, c0 in each0.items():
        parts[kind(p)] = parts.get(kind(p), 0.0) + (cpu_seconds([p]) - c0) * 60 / dt
    return (cpu_seconds([sp]) - s0) * 60 / dt, sum(parts.values()), main, parts


def long_run_workspace(prefix: str) -> tuple:
    """(temp folder, workspace linked to the demo one, env with it, config of a demo LoRA run long
    enough to be watched: logs every step, never evaluates or saves)."""
    demo = ROOT / ".cache" / "demo-ws"
    if not (demo / "models" / "demo-base").is_dir():
        sys.exit("no demo workspace in .cache/demo-ws: run `make test` or "
                 "`PADDLE_STUDIO_HOME=.cache/demo-ws .venv/bin/paddle-studio demo init` first")
    from core.train import config

    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    home = link_demo(tmp / "ws", demo)
    cfg = tmp / "long.json"
    flat = config.load_preset("demo-lora", home).to_paddlenlp()
    flat.update({"max_steps": 100000, "save_steps": 100000, "eval_steps": 100000,
                 "evaluation_strategy": "no", "logging_steps": 1})
    cfg.write_text(json.dumps(flat))
    return tmp, home, {**os.environ, "PADDLE_STUDIO_HOME": str(home)}, cfg


def follow_run(page, run_id: str) -> None:
    """On the Runs tab, pick ``run_id`` (started from the CLI) as a person would."""
    page.get_by_role("tab", name="Runs", exact=True).click()
    box = page.locator("#runs-pick input")
    for _ in range(10):
        box.click()
        box.fill(run_id)
        try:
            page.get_by_role("option", name=run_id, exact=True).click(timeout=6000)
            return
        except Exception:  # noqa: BLE001 - not offered yet: the list refreshes every few seconds
            time.sleep(1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="length of each window")
    ap.add_argument("--settle", type=float, default=10.0, help="seconds to wait before each window")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of the three windows; medians are printed")
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright

    tmp, home, env, cfg = long_run_workspace("watch-cost-")

    def cli(*args, timeout=120):
        return subprocess.run([sys.executable, "-m", "core.cli", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=timeout)

    studio = Studio(home, tmp / "studio.log")
    names = ("idle page, first tab", "run watched on Runs tab", "run going, page on first tab")
    rows = {n: [] for n in names}
    run_id = None
    try:
        with sync_playwright() as p:
            browser = launch_browser(p)
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            cdp = page.context.new_cdp_session(page)
            cdp.send("Performance.enable")
            page.goto(studio.url)
            page.locator("#tab-dataset").wait_for(state="attached", timeout=60000)
            for i in range(a.repeat):
                if i:  # each round from a fresh page
                    page.reload()
                    page.locator("#tab-dataset").wait_for(state="attached", timeout=60000)
                time.sleep(a.settle)
                rows[names[0]].append(window(studio.proc, a.seconds, cdp))
                r = cli("train", str(cfg), "--name", f"watched-{i}", "--detach", "--json")
                if r.returncode:
                    sys.exit(r.stderr[-2000:])
                run_id = json.loads(r.stdout)["run_id"]
                follow_run(page, run_id)
                wait_text(page.locator("#run-status"), f"{run_id} — running", 60)
                deadline = time.time() + 120
                while not (home / "runs" / run_id / "metrics.jsonl").is_file() and time.time() < deadline:
                    time.sleep(0.5)
                time.sleep(a.settle)
                rows[names[1]].append(window(studio.proc, a.seconds, cdp))
                page.locator("#tab-dataset-button").click()
                time.sleep(a.settle)
                rows[names[2]].append(window(studio.proc, a.seconds, cdp))
                cli("runs", "stop", run_id)
                run_id = None
            browser.close()
    finally:
        if run_id:
            cli("runs", "stop", run_id)
        studio.close()

    def med(xs):
        return statistics.median(xs)

    table = []
    for n in names:
        got = rows[n]
        kinds = sorted({k for g in got for k in g[3]})
        table.append((n, med([g[0] for g in got]), med([g[1] for g in got]),
                      {k: med([g[2][k] for g in got]) for k in METRICS}, [g[1] for g in got],
                      {k: med([g[3].get(k, 0.0) for g in got]) for k in kinds}))
    idle_s, idle_b = table[0][1], table[0][2]
    print(f"CPU seconds per minute, medians of {a.repeat} x {a.seconds:.0f} s windows (60 = one core busy); "
          "page = the renderer's main thread")
    print(f"{'window':32} {'studio':>8} {'browser':>8} {'studio/idle':>12} {'browser/idle':>13} "
          f"{'page':>6} {'script':>7} {'layout':>7} {'style':>6}  browser each")
    for name, s_, b, m, each, _ in table:
        print(f"{name:32} {s_:8.3g} {b:8.3g} {s_ / max(idle_s, 1e-9):12.3g} {b / max(idle_b, 1e-9):13.3g} "
              + " ".join(f"{m[k]:{w}.3g}" for k, w in zip(METRICS, (6, 7, 7, 6)))
              + "  " + ", ".join(f"{x:.3g}" for x in each))
    print("browser CPU seconds per minute by chromium process (medians): "
          "renderer = the page, gpu-process = compositing and raster, browser = chromium's main process")
    for name, *_, parts in table:
        print(f"{name:32} " + "  ".join(f"{k} {v:.3g}" for k, v in parts.items()))
    print(f"(studio under 5 % of a core = 3 s/min; browser {table[1][2] / 60:.1%} of a core while watching)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
