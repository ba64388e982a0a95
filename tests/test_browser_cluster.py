"""A 2-node run from the page, in headless chromium: node 1 is a real sshd on a loopback port with a
workspace of its own (tests/sshnode.py). The node is added and tested in the Cluster tab, chosen
in the Train tab, checked (preflight) and started there; the Runs tab shows both machines; the
losses equal a 2-process one-machine run with the same seed; Stop ends every process on both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import ROOT, link_demo
from sshnode import SshNode, available
from tests.browser import Studio, launch_browser, wait_text
from tests.test_browser_runs import run_processes, set_number, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(available() is not None, reason=str(available()))]
playwright = pytest.importorskip("playwright.sync_api")

STEPS = 24


def losses(home, run_id: str) -> list[float]:
    lines = (home / "runs" / run_id / "metrics.jsonl").read_text().splitlines()
    return [json.loads(x)["loss"] for x in lines if '"loss"' in x]


def fill(page, elem_id: str, value: str) -> None:
    page.locator(f"#{elem_id} textarea, #{elem_id} input").first.fill(value)


def test_two_node_run_from_the_page(tmp_path, demo_home, monkeypatch):
    from core.train import config

    head = link_demo(tmp_path / "head", demo_home)
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(head))
    node = link_demo(tmp_path / "node", demo_home)
    # the reference: the same preset and seed with the page's step counts, 2 processes on this one
    # machine (the CLI); the learning-rate schedule follows max_steps, so it is the same too
    cfg = config.load_preset("demo-lora")
    cfg.training.max_steps = cfg.training.eval_steps = cfg.training.save_steps = STEPS
    (tmp_path / "ref.json").write_text(json.dumps(cfg.to_paddlenlp(output_dir=str(tmp_path / "unused"))))
    ref = subprocess.run([sys.executable, "-m", "core.cli", "train", str(tmp_path / "ref.json"), "--name", "ref",
                          "--nproc", "2", "--json"], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PADDLE_STUDIO_HOME": str(head)}, timeout=600)
    assert ref.returncode == 0, ref.stderr[-2000:]
    with SshNode(tmp_path / "ssh") as sshd:
        s = Studio(head, tmp_path / "studio.log")
        try:
            with playwright.sync_playwright() as p:
                browser = launch_browser(p)
                page = browser.new_page(viewport={"width": 1280, "height": 1600})
                page.goto(s.url)
                # Cluster tab: add node 1 and test it
                page.get_by_role("tab", name="Cluster").click()
                wait_text(page.locator("#cluster-box"), "No nodes yet", 20)
                fill(page, "cluster-name", "n1")
                fill(page, "cluster-host", "127.0.0.1")
                set_number(page, "cluster-port", sshd.port)
                fill(page, "cluster-user", sshd.user)
                fill(page, "cluster-key", str(sshd.key))
                fill(page, "cluster-home", str(node))
                page.locator("#cluster-save").click()
                wait_text(page.locator("#cluster-msg"), "Saved n1", 20)
                wait_text(page.locator("#cluster-box"), f"127.0.0.1:{sshd.port}", 10)
                page.locator("#cluster-test").click()
                wait_text(page.locator("#cluster-msg"), "n1 reachable", 30)
                if os.environ.get("STUDIO_SCREENSHOTS"):
                    page.screenshot(path=str(ROOT / "assets" / "cluster-tab.png"), full_page=True)
                # Train tab: the node is offered at once; check it, then start
                page.get_by_role("tab", name="Train").click()
                wait_text(page.locator("#train-check"), "No problems", 30)
                fill(page, "train-name", "two-nodes")
                set_number(page, "cfg-training-max_steps", STEPS)
                set_number(page, "cfg-training-eval_steps", STEPS)
                set_number(page, "cfg-training-save_steps", STEPS)
                box = page.locator("#cfg-parallel-nodes input")
                box.click()
                page.get_by_role("option", name="n1", exact=True).click()
                page.keyboard.press("Escape")
                page.locator("#train-preflight").click()
                wait_text(page.locator("#train-start-msg"), "All 1 node(s) ready", 60)
                page.get_by_role("button", name="Start", exact=True).click()
                msg = wait_text(page.locator("#train-start-msg"), "-two-nodes is running", 60)
                run_id = msg.split("Run ", 1)[1].split(" ", 1)[0]
                # Runs tab: both machines, each with its step
                wait_text(page.locator("#run-status"), run_id, 20)
                wait_text(page.locator("#run-nodes"), "head (this machine)", 30)
                wait_text(page.locator("#run-nodes"), f"n1 ({sshd.user}@127.0.0.1:{sshd.port})", 30)
                wait_text(page.locator("#run-status"), "succeeded", 240)
                rows = page.locator("#run-nodes-table tbody tr").all_inner_texts()
                assert len(rows) == 2 and all("succeeded" in r and str(STEPS) in r for r in rows), rows
                # node 1's own log, fetched over SSH on demand
                page.locator("#run-node-pick input").click()
                page.get_by_role("option", name="n1", exact=True).click()
                page.locator("#run-node-log").click()
                wait_text(page.locator("#run-node-log-text"), "loss", 30)
                # a second run, stopped from the page mid-training: nothing left on either machine
                page.get_by_role("tab", name="Train").click()
                set_number(page, "cfg-training-max_steps", 400)
                fill(page, "train-name", "two-stop")
                page.get_by_role("button", name="Start", exact=True).click()
                msg = wait_text(page.locator("#train-start-msg"), "-two-stop is running", 60)
                stop_id = msg.split("Run ", 1)[1].split(" ", 1)[0]
                wait_text(page.locator("#run-status"), stop_id, 20)
                wait_until(lambda: (node / "node-runs" / stop_id / "progress.rank1.json").exists(), 120)
                page.locator("#run-doctor").click()  # "Why is it stuck?" on a healthy run: both answer
                wait_text(page.locator("#run-doctor-out"), "rank 1 (n1):", 30)
                page.locator("#run-stop").click()
                wait_text(page.locator("#run-status"), "stopped", 40)
                wait_until(lambda: not run_processes(head / "runs" / stop_id)
                           and not run_processes(node / "node-runs" / stop_id), 20)
                # 中文: the Cluster tab and the node strip follow the language
                page.get_by_label("中文").check()
                page.get_by_role("tab", name="集群").click()
                wait_text(page.locator("#cluster-intro"), "本机是主节点", 20)
                wait_text(page.locator("#cluster-box"), "n1", 10)
                if os.environ.get("STUDIO_SCREENSHOTS"):
                    page.screenshot(path=str(ROOT / "assets" / "cluster-tab-zh.png"), full_page=True)
                browser.close()
        finally:
            s.close()
    # the page's run trained as one 2-process run on one machine does (same seed, same data order)
    ref_id = json.loads(ref.stdout)["run_id"]
    got, want = losses(head, run_id), losses(head, ref_id)
    assert len(got) == STEPS
    assert max(abs(a - b) for a, b in zip(got, want)) < 1e-6, (got, want)
