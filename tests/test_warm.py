"""Warm spares (core.train.warm): a single-process run handed to a rank that has already imported
paddle and paddlenlp trains like a cold one, logs where a cold one does, is stopped the same way,
and a spare whose owner is gone ends itself. Real processes throughout."""

import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from core.train import config, runs, warm
from tests.conftest import link_demo
from tests.test_runs import processes_of, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def home(demo_home, tmp_path, monkeypatch):
    h = link_demo(tmp_path / "ws", demo_home)
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(h))
    monkeypatch.delenv("PADDLE_STUDIO_WARM", raising=False)
    return h


def ready_spare(owner: int):
    s = warm.keep_spare(owner)
    assert s is not None
    wait_for(lambda: (s / "ready").exists(), 120, 0.1)
    return s


def make_run(home, name, steps):
    cfg = config.load_preset("demo-lora", home)
    cfg.name = name
    cfg.training.max_steps = steps
    cfg.training.evaluation_strategy = "no"
    cfg.training.save_strategy = "no"
    return runs.create(cfg)


def first_loss(d):
    m = d / "metrics.jsonl"
    return m.is_file() and any("loss" in json.loads(x) for x in m.read_text().splitlines())


def test_a_warm_run_trains_logs_and_stops_like_a_cold_one(home):
    s = ready_spare(os.getpid())
    assert warm.keep_spare(os.getpid()) is None  # one unclaimed spare is enough
    run_id = make_run(home, "warm", 12)
    d = runs.run_dir(run_id)
    t0 = time.time()
    st = runs.start(run_id)
    assert st["warm"] is True and st["supervisor_pid"] == json.loads((s / "spare.json").read_text())["pid"]
    wait_for(lambda: first_loss(d), 60, 0.02)
    took = time.time() - t0
    # found by the run's folder like a cold run's processes: the supervisor and the rank
    names = sorted(" ".join(p.cmdline()) for p in processes_of(d))
    assert len(names) == 2 and "core.train.runs supervise" in names[0] and "entry.py" in names[1], names
    wait_for(lambda: runs.status(run_id)["state"] not in ("queued", "running"), 120, 0.2)
    st = runs.status(run_id)
    assert st["state"] == "succeeded", st
    # the rank's output went to the run's log (PaddleNLP's own lines), the adapter was saved
    log = (d / "log" / "workerlog.0").read_text()
    assert "resume_from_checkpoint" in log or "max_steps" in log, log[-2000:]
    assert (d / "output" / "lora_config.json").is_file()
    phases = [json.loads(x)["phase"] for x in (d / "startup.jsonl").read_text().splitlines()]
    assert phases == ["process", "imports", "tokenizer", "data", "model", "trainer"]
    wait_for(lambda: not s.exists() and not processes_of(d), 15, 0.2)  # the spare's folder went with it
    print(f"warm start -> first loss point {took:.2f} s")

    # a second spare, a longer run, Stop: nothing of the run or the spare is left
    s2 = ready_spare(os.getpid())
    run_id = make_run(home, "warm-stop", 2000)
    d = runs.run_dir(run_id)
    assert runs.start(run_id)["warm"] is True
    wait_for(lambda: first_loss(d), 60, 0.05)
    procs = processes_of(d) + processes_of(s2)
    runs.stop(run_id)
    wait_for(lambda: runs.status(run_id)["state"] == "stopped", 30, 0.2)
    gone, left = psutil.wait_procs(procs, timeout=15)
    assert not left, left
    assert not processes_of(d)


def test_without_a_spare_a_single_process_starts_cold_without_the_launcher(home, monkeypatch):
    monkeypatch.setenv("PADDLE_STUDIO_WARM", "0")
    run_id = make_run(home, "cold", 4)
    st = runs.start(run_id)
    assert st["warm"] is False
    wait_for(lambda: runs.status(run_id)["state"] not in ("queued", "running"), 120, 0.2)
    d = runs.run_dir(run_id)
    assert runs.status(run_id)["state"] == "succeeded", runs.status(run_id)
    assert "paddle.distributed.launch" not in (d / "command.txt").read_text()
    assert (d / "log" / "workerlog.0").stat().st_size > 0 and not (d / "launcher.log").exists()


def test_a_spare_ends_when_its_owner_is_gone(home):
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        s = ready_spare(owner.pid)
        procs = processes_of(s)
        assert len(procs) == 2  # the spare supervisor and its warm rank
    finally:
        owner.kill()
        owner.wait()
    gone, left = psutil.wait_procs(procs, timeout=15)
    assert not left, left
    wait_for(lambda: not s.exists(), 10, 0.1)
    run_id = make_run(home, "after", 2)
    assert runs.start(run_id)["warm"] is False  # nothing left to claim
    wait_for(lambda: runs.status(run_id)["state"] not in ("queued", "running"), 120, 0.2)


def test_a_spare_does_not_inherit_the_studios_login_secret(home, monkeypatch):
    """The spare supervisor and its warm rank run with a run's environment less $PADDLE_STUDIO_AUTH."""
    from pathlib import Path

    from core import jobs

    monkeypatch.setenv("PADDLE_STUDIO_AUTH", "admin:secret")
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        s = warm.keep_spare(owner.pid)
        info = wait_for(lambda: (jobs.read_json(s / "spare.json", {}) or {}).get("child") and jobs.read_json(s / "spare.json"),
                        60, 0.05)
        for pid in (info["pid"], info["child"]):
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            assert f"PADDLE_STUDIO_HOME={home}".encode() in env  # the rest is inherited
            assert not [e for e in env if e.startswith(b"PADDLE_STUDIO_AUTH=")], pid
    finally:
        owner.kill()
        owner.wait()
    wait_for(lambda: not s.exists(), 30, 0.1)
