"""The first minute on a fresh clone: `make run` → the page answers → the demo workspace is ready.

A copy of the checkout (the files git tracks or would add: what a clone holds, plus uncommitted
edits) is made in a temp folder and `make run` is started in it with the environment already
installed (this checkout's .venv: `make setup` is what the README's install step times, not this).
Two cases, each its own workspace:

- warm: the tests' demo cache (.cache/demo-ws, what `make test` leaves) is there, so the demo
  parts are copied from it;
- cold (--cold): no cache anywhere, so the demo is built from nothing (minutes on 2 cores).

For each it prints when the page first answered and when the demo dataset and model were ready,
in seconds after `make run` started, and the same for the way `make run` worked before (build the
demo, then start the studio): the ratio is what a newcomer no longer waits at a terminal.

Usage: python bench/fresh_start.py [--cold] [--port 7999]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"


def clone_tree(dst: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)


def demo_ready(home: Path) -> bool:
    code = ("import json,sys; from core import demo; "
            "sys.exit(0 if all(demo.status().values()) else 1)")
    env = {**os.environ, "PADDLE_STUDIO_HOME": str(home)}
    return subprocess.run([str(VENV / "bin" / "python"), "-c", code], cwd=ROOT, env=env).returncode == 0


def answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=1)
        return True
    except OSError:
        return False


def make_run(tree: Path, home: Path, cache: Path, port: int, timeout: float) -> dict:
    env = {**os.environ, "PADDLE_STUDIO_HOME": str(home), "PADDLE_STUDIO_DEMO_CACHE": str(cache)}
    t0 = time.time()
    # the environment is installed: `-o` keeps make from reinstalling it into the copy
    proc = subprocess.Popen(["make", "-s", "-o", str(VENV / ".installed"), "run", f"VENV={VENV}", f"PORT={port}"],
                            cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    page = ready = None
    try:
        while time.time() - t0 < timeout and (page is None or ready is None):
            if proc.poll() is not None:
                raise RuntimeError(f"make run exited with {proc.returncode}")
            if page is None and answers(url):
                page = time.time() - t0
            if ready is None and demo_ready(home):
                ready = time.time() - t0
            time.sleep(0.25)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
    return {"page_s": page, "demo_ready_s": ready}


def before(home: Path, cache: Path, port: int) -> dict:
    """The old `make run`: `paddle-studio demo init` (copying from the cache where it can), then the studio."""
    env = {**os.environ, "PADDLE_STUDIO_HOME": str(home), "PADDLE_STUDIO_DEMO_CACHE": str(cache)}
    t0 = time.time()
    subprocess.run([str(VENV / "bin" / "paddle-studio"), "demo", "init"], env=env, check=True, capture_output=True)
    ready = time.time() - t0
    proc = subprocess.Popen([str(VENV / "bin" / "paddle-studio"), "ui", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        while not answers(f"http://127.0.0.1:{port}/"):
            time.sleep(0.25)
        return {"page_s": time.time() - t0, "demo_ready_s": ready}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)


def fmt(v):
    return "never" if v is None else f"{v:.3g} s"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cold", action="store_true", help="also time a first run without any demo cache (minutes)")
    ap.add_argument("--port", type=int, default=7999)
    a = ap.parse_args()
    cache = ROOT / ".cache" / "demo-ws"
    if not all((cache / p).exists() for p in ("datasets/demo/meta.json", "models/demo-base/studio_model.json")):
        print("building the tests' demo cache first (make test would)...", flush=True)
        subprocess.run([str(VENV / "bin" / "python"), "-m", "core.cli", "demo", "init"], cwd=ROOT, check=True,
                       env={**os.environ, "PADDLE_STUDIO_HOME": str(cache)}, capture_output=True)
    cases = [("warm (demo cache from make test)", cache, cache)]
    tmp = Path(tempfile.mkdtemp(prefix="fresh-start-"))
    if a.cold:
        # each its own empty cache: the first build would fill a shared one for the second
        cases.append(("cold (no cache)", tmp / "cache-now", tmp / "cache-before"))
    out = {}
    try:
        tree = tmp / "clone"
        clone_tree(tree)
        for i, (name, c_now, c_before) in enumerate(cases):
            now = make_run(tree, tmp / f"ws-now-{i}", c_now, a.port, timeout=900)
            old = before(tmp / f"ws-before-{i}", c_before, a.port + 1)
            out[name] = {"now": now, "before": old}
            ratio = old["page_s"] / now["page_s"] if now["page_s"] else float("nan")
            print(f"{name}: page answers {fmt(now['page_s'])} (before: {fmt(old['page_s'])}, {ratio:.3g}× sooner); "
                  f"demo ready {fmt(now['demo_ready_s'])} (before: {fmt(old['demo_ready_s'])})", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
