"""A run never hangs silently: a collator that raises (it runs in a DataLoader thread) fails the run
with its error, a run that stops making progress is failed by the supervisor's watchdog; either way
no process of the run is left. Faults are injected into the rank processes only, through a
sitecustomize on PYTHONPATH that patches PaddleNLP's collator (the studio's code is untouched)."""

import json
import os
import re
import subprocess
import sys
import time

import pytest

from core.train import checkpoints, runs
from tests.test_runs import ROOT, processes_of, small_config, wait_for, ws  # noqa: F401 - ws is a fixture

pytestmark = pytest.mark.slow

FAULTS = {
    "raise": "raise ValueError('injected collator fault')",
    "hang": "time.sleep(10_000)",
}


def inject(tmp_path, fault: str) -> dict:
    d = tmp_path / f"inject-{fault}"
    d.mkdir()
    (d / "sitecustomize.py").write_text(
        "import sys, time\n"
        "if sys.argv and sys.argv[0].endswith('entry.py'):\n"
        "    from paddlenlp.data import DataCollatorForSeq2Seq\n"
        "    def broken(self, features, return_tensors=None):\n"
        f"        {FAULTS[fault]}\n"
        "    DataCollatorForSeq2Seq.__call__ = broken\n")
    return {"PYTHONPATH": os.pathsep.join([str(d), str(ROOT)])}


def start(ws, cfg, env, *extra):
    r = subprocess.run([sys.executable, "-m", "core.cli", "train", str(cfg), "--detach", "--json", *extra],
                       cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PADDLE_STUDIO_HOME": str(ws), **env})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["run_id"]



def resume_to_the_end(run_id: str, done, steps: int, timeout: float) -> None:
    """Resume: the run succeeds, trains to ``steps``, and began again where the complete checkpoint ``done`` was."""
    d = runs.run_dir(run_id)
    runs.resume(run_id)
    wait_for(lambda: runs.status(run_id)["state"] == "succeeded", timeout, 0.5)
    recs = [json.loads(l) for l in (d / "metrics.jsonl").read_text().splitlines()]
    assert max(r["step"] for r in recs if "loss" in r) == steps
    begins = [r for r in recs if r.get("event") == "train_begin"]
    assert begins[-1]["step"] == int(done.name.split("-")[1])

def test_collator_error_fails_the_run_with_its_message(ws, tmp_path, monkeypatch):
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(ws))
    run_id = start(ws, small_config(ws, tmp_path / "c.json", max_steps=20), inject(tmp_path, "raise"))
    t0 = time.time()
    wait_for(lambda: runs.status(run_id)["state"] == "failed", 60, 0.2)
    took = time.time() - t0
    st = runs.status(run_id)
    assert st["reason"] == "rank 0: the data collator failed: ValueError: injected collator fault", st
    assert took < 30, took
    wait_for(lambda: not processes_of(runs.run_dir(run_id)), 10)
    log = (runs.run_dir(run_id) / "log" / "workerlog.0").read_text()
    assert "the data collator failed" in log and "Traceback" in log


def test_a_run_without_progress_is_failed_by_the_watchdog(ws, tmp_path, monkeypatch):
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(ws))
    run_id = start(ws, small_config(ws, tmp_path / "h.json", max_steps=20), inject(tmp_path, "hang"),
                   "--stall-timeout", "8")
    d = runs.run_dir(run_id)
    assert json.loads((d / "studio.json").read_text())["parallel"]["stall_timeout"] == 8
    wait_for(lambda: runs.status(run_id)["state"] == "failed", 90, 0.2)
    st = runs.status(run_id)
    assert st["reason"].startswith("no progress for ") and "stall_timeout is 8 s" in st["reason"], st
    wait_for(lambda: not processes_of(d), 10)
    assert "loss" not in (d / "metrics.jsonl").read_text() if (d / "metrics.jsonl").is_file() else True


@pytest.fixture
def small_disk(tmp_path):
    """A 24 MB file system of its own (tmpfs; needs root and mount rights, else the test is skipped)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot mount a small file system here: {r.stderr.strip() or r.returncode}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_full_disk_mid_run_then_resume_from_the_last_complete_checkpoint(small_disk, demo_home, tmp_path, monkeypatch):
    """The disk fills while a checkpoint is written: the run fails with the reason while the disk
    is still full (the supervisor and the foreground `train` do not wait for room), the cut checkpoint never counts, and resume goes on from
    the newest complete one to the end."""
    home = small_disk / "ws"
    (home / "models").mkdir(parents=True)
    (home / "datasets").mkdir()
    (home / "models" / "demo-base").symlink_to(demo_home / "models" / "demo-base")
    (home / "datasets" / "demo").symlink_to(demo_home / "datasets" / "demo")
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(home))
    cfg = small_config(home, tmp_path / "disk.json", max_steps=40, save_steps=4, save_total_limit=100)
    run_id = start(home, cfg, {})
    d = runs.run_dir(run_id)
    wait_for(lambda: (d / "output" / "checkpoint-4" / "studio_checkpoint.json").is_file(), 120, 0.05)
    free = os.statvfs(small_disk)
    filler = small_disk / "filler"
    with open(filler, "wb") as f:  # leave ~64 KB: the next checkpoint cannot be written whole
        f.write(b"\0" * max(0, free.f_bavail * free.f_frsize - 64 * 1024))
    wait_for(lambda: not [p for p in processes_of(d) if "entry.py" in " ".join(p.cmdline())
                          and "paddle.distributed.launch" not in p.cmdline()], 120, 0.2)
    t_dead = time.time()
    # the disk is still full: the supervisor's last word overwrites status.json's own padded blocks
    wait_for(lambda: runs.status(run_id)["state"] == "failed", 30, 0.2)
    t_failed = time.time()
    st = runs.status(run_id)
    assert "No space left on device" in st["reason"], st
    wait_for(lambda: not processes_of(d), 15)
    assert os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize < 256 * 1024  # still full
    filler.unlink()
    done = runs.last_checkpoint(d)
    cut = [c for c in (d / "output").glob("checkpoint-*") if not (c / "studio_checkpoint.json").is_file()]
    assert done is not None and all(int(c.name.split("-")[1]) > int(done.name.split("-")[1]) for c in cut)
    lost = max(json.loads(l)["step"] for l in (d / "metrics.jsonl").read_text().splitlines() if '"loss"' in l) \
        - int(done.name.split("-")[1])
    assert 0 <= lost <= 4 + 1, lost  # at most one save interval (+ the step being saved)
    print(f"full disk: run failed {t_failed - t_dead:.1f} s after its ranks died, disk still full; steps lost {lost} (save every 4)")
    resume_to_the_end(run_id, done, 40, 180)
    with pytest.raises(ValueError, match="already trained all 40 steps"):  # nothing left to resume
        runs.resume(run_id)


def test_kill9_of_one_rank_names_it_then_resume_from_the_last_complete_checkpoint(ws, tmp_path, monkeypatch):
    """kill -9 of rank 1 of a two-rank run: the run fails saying rank 1 died without a word and
    rank 0 lost it (not "exit code 250"), no process of the run is left, and resume goes on from
    the newest complete checkpoint to the end."""
    import psutil

    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(ws))
    cfg = small_config(ws, tmp_path / "one.json", max_steps=32, save_steps=4, save_total_limit=100)
    run_id = start(ws, cfg, {}, "--nproc", "2")
    d = runs.run_dir(run_id)
    wait_for(lambda: (d / "output" / "checkpoint-4" / "studio_checkpoint.json").is_file(), 180, 0.1)
    ranks = {p.environ().get("PADDLE_TRAINER_ID"): p for p in processes_of(d)
             if "entry.py" in " ".join(p.cmdline()) and "paddle.distributed.launch" not in p.cmdline()}
    assert sorted(ranks) == ["0", "1"], ranks
    t_kill = time.time()
    os.kill(ranks["1"].pid, 9)
    wait_for(lambda: runs.status(run_id)["state"] == "failed", 120, 0.2)
    took = time.time() - t_kill
    reason = runs.status(run_id)["reason"]
    assert reason.startswith("rank 1 ended without a message (killed: kill -9, or the out-of-memory killer)"), reason
    assert "rank 0: " in reason and "exit code" not in reason, reason
    gone, left = psutil.wait_procs(list(ranks.values()), timeout=15)
    assert not left
    # the supervisor writes "failed", starts the next queued run, then exits: give it that moment
    wait_for(lambda: not processes_of(d), 15, 0.2)
    done = runs.last_checkpoint(d)
    assert done is not None
    print(f"kill -9 of rank 1: run failed {took:.1f} s later: {reason}")
    resume_to_the_end(run_id, done, 32, 240)


def test_the_studio_starts_a_queued_run_nobody_kicked_with_no_page_open(ws, tmp_path, monkeypatch):
    """A run left queued with its devices idle (its predecessor's supervisor died before starting
    it) is started by the studio's own periodic reconcile: no page, no CLI call needed."""
    from core.train import config
    from tests.browser import Studio

    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(ws))
    cfg = config.load_preset("demo-lora", ws)
    cfg.name = "nobody-kicked"
    cfg.training.max_steps = 4
    cfg.training.save_strategy = "no"
    cfg.training.evaluation_strategy = "no"
    run_id = runs.create(cfg)  # queued, and nothing will start it but a reconcile
    time.sleep(1)
    assert runs.status(run_id)["state"] == "queued"
    s = Studio(ws, tmp_path / "studio.log")
    try:
        t0 = time.time()
        wait_for(lambda: json.loads((runs.run_dir(run_id) / "status.json").read_text())["state"] != "queued", 30, 0.2)
        took = time.time() - t0
        wait_for(lambda: runs.status(run_id)["state"] == "succeeded", 180, 0.5)
    finally:
        s.close()
    print(f"queued run started by the studio's reconcile {took:.1f} s after the studio came up")
    assert took < 15, took


def test_resume_refuses_cut_checkpoints_and_finished_runs(ws, tmp_path, monkeypatch):
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(ws))
    run_id = start(ws, small_config(ws, tmp_path / "r.json", max_steps=8, save_steps=4), {})
    wait_for(lambda: runs.status(run_id)["state"] == "succeeded", 180, 0.3)
    d = runs.run_dir(run_id)
    assert [c.name for c in checkpoints.checkpoints(d / "output")] == ["checkpoint-4", "checkpoint-8"]
    with pytest.raises(ValueError, match="already trained all 8 steps"):
        runs.resume(run_id)
    # a save cut short: a file of another size than the marker says
    state = next((d / "output" / "checkpoint-8").glob("*.pdparams"))
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
    assert runs.last_checkpoint(d).name == "checkpoint-4"
    for c in ("checkpoint-4", "checkpoint-8"):
        (d / "output" / c / "studio_checkpoint.json").unlink()
    with pytest.raises(ValueError, match="no complete checkpoint to resume from .checkpoint-4, checkpoint-8 did not"):
        runs.resume(run_id)


def test_read_only_or_full_workspace_and_busy_port_are_one_line_messages(small_disk, demo_home, tmp_path):
    """`data import`, `train`, `merge`, `quantize`, `models import` and `serve --ready-file` on a
    read-only workspace (before any model is loaded), `data import` on a full one, `ui` on a busy
    port: exit 2 and one line naming the problem, no traceback, nothing half-written."""
    import socket

    home = small_disk / "ws"
    (home / "models").mkdir(parents=True)
    (home / "models" / "demo-base").symlink_to(demo_home / "models" / "demo-base")
    (home / "datasets").mkdir()
    (home / "datasets" / "demo").symlink_to(demo_home / "datasets" / "demo")
    cfg = small_config(home, tmp_path / "ro.json", max_steps=4)
    data = demo_home / "datasets" / "demo" / "dev.json"
    env = {**os.environ, "PADDLE_STUDIO_HOME": str(home)}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "core.cli", *args], cwd=ROOT, capture_output=True, text=True,
                              env=env, timeout=120)

    assert subprocess.run(["mount", "-o", "remount,ro", str(small_disk)]).returncode == 0
    try:
        base = str(home / "models" / "demo-base")
        for args in (("data", "import", str(data), "--name", "d1"), ("train", str(cfg), "--detach"),
                     # these used to load the model for 11-16 s first, or print a traceback (quantize)
                     ("merge", "--adapter", base, "--out", str(home / "models" / "m1")),
                     ("quantize", "--model", base, "--preset", "wint8", "--out", str(home / "models" / "q1")),
                     ("models", "import", base, "--name", "again"),
                     ("serve", "--model", base, "--port", "0", "--ready-file", str(home / "ready.json"))):
            t0 = time.monotonic()
            r = cli(*args)
            took = time.monotonic() - t0
            assert r.returncode == 2 and "Traceback" not in r.stderr, (args, r.stderr)
            assert "read-only file system" in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
            assert took < 5 or args[0] in ("data", "train"), (args, took)  # was 11-16 s: a model load first
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_disk)])
    free = os.statvfs(small_disk)
    (small_disk / "filler").write_bytes(b"\0" * (free.f_bavail * free.f_frsize))
    r = cli("data", "import", str(data), "--name", "d2")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "disk is full" in r.stderr, r.stderr
    assert not [p for p in (home / "datasets").iterdir() if p.name not in ("demo",)], list((home / "datasets").iterdir())
    (small_disk / "filler").unlink()

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        r = cli("ui", "--port", str(s.getsockname()[1]))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "already in use" in r.stderr, r.stderr


def test_kill9_of_the_supervisor_stops_the_run_it_watched(ws, tmp_path, monkeypatch):
    """kill -9 of a 2-rank run's supervisor: its ranks see it gone and end within seconds with
    nobody reading the status (the launcher follows them); the next read fails the run saying why.
    Before, the run trained on unwatched to "succeeded" (no stall watchdog, no queue, no reason)."""
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(ws))
    cfg = small_config(ws, tmp_path / "sup.json", max_steps=400)
    run_id = start(ws, cfg, {}, "--nproc", "2")
    d = runs.run_dir(run_id)
    wait_for(lambda: (json.loads((d / "progress.rank1.json").read_text()) if (d / "progress.rank1.json").is_file()
                      else {}).get("step", 0) >= 2, 180, 0.2)
    st = runs.status(run_id)
    t0 = time.time()
    os.kill(st["supervisor_pid"], 9)
    wait_for(lambda: not processes_of(d), 10, 0.2)  # no status read in between: the ranks' own leash
    gone = time.time() - t0
    st = runs.status(run_id)
    assert st["state"] == "failed", st
    # whichever rank sees it first says so; the launcher then ends the other (its SIGTERM note is left out)
    assert "supervisor vanished" in st["reason"] and re.search(r"rank [01]: stopped because", st["reason"]), st["reason"]
    print(f"supervisor killed: every process of the run gone {gone:.2f} s later")


def test_a_learning_rate_that_freezes_the_loss_fails_the_run_saying_so(ws, tmp_path, monkeypatch):
    """learning_rate 1e10: the loss jumps to ln(vocabulary) and stays there to 6 digits. The run
    fails at the 8th frozen log with the reason, instead of training on to "succeeded"."""
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(ws))
    cfg = small_config(ws, tmp_path / "lr.json", max_steps=60, learning_rate=1e10, logging_steps=1, save_steps=1000)
    run_id = start(ws, cfg, {})
    wait_for(lambda: runs.status(run_id)["state"] not in ("queued", "running"), 180, 0.5)
    st = runs.status(run_id)
    assert st["state"] == "failed", st
    assert "stopped learning" in st["reason"] and "1e+10" in st["reason"], st["reason"]
    losses = [json.loads(l)["loss"] for l in (runs.run_dir(run_id) / "metrics.jsonl").read_text().splitlines()
              if '"loss"' in l]
    assert len(losses) < 20, len(losses)  # it stopped early, not at step 60


def test_check_loss_tells_nan_frozen_and_never_moved_from_a_learning_loss():
    from core.train.entry import LossProblem, check_loss

    learning = [(i, 3.0 - 0.01 * i + (0.003 if i % 2 else 0), 1e-4) for i in range(1, 40)]
    for k in range(1, len(learning) + 1):
        check_loss(learning[:k])
    check_loss(learning, final=True)
    with pytest.raises(LossProblem, match="became nan at step 3"):
        check_loss([(1, 2.0, 1e-4), (2, 1.9, 1e-4), (3, float("nan"), 1e-4)])
    frozen = [(1, 2.5, 1e9), (2, 2.2, 2e9)] + [(i, 6.542472 + 1e-7 * (i % 2), 3e9) for i in range(3, 11)]
    check_loss(frozen[:-1])
    with pytest.raises(LossProblem, match=r"stayed at 6.542 for 8 logged steps \(3-10\)"):
        check_loss(frozen)
    still = [(i, 0.6931472, 1e-6) for i in range(1, 9)]
    check_loss(still)  # not yet: a loss that never moved is only judged at the end
    with pytest.raises(LossProblem, match="never moved in 8 steps"):
        check_loss(still, final=True)
    check_loss([(i + 100, v, r) for i, v, r in still], final=True, resumed=True)  # its earlier losses are elsewhere
    # converged, not frozen: DPO's hinge loss (and a saturated sigmoid) logs exactly 0.0 once every pair is won
    converged = [(1, 0.69, 1e-4), (2, 0.3, 1e-4), (3, 0.05, 1e-4)] + [(i, 0.0, 1e-4) for i in range(4, 20)]
    for k in range(1, len(converged) + 1):
        check_loss(converged[:k])
    check_loss(converged, final=True)
    # settling at a low plateau after falling is not "stopped learning" either: only a freeze above a lower past
    plateau = [(1, 2.0, 1e-4), (2, 1.2, 1e-4)] + [(i, 0.4, 1e-4) for i in range(3, 12)]
    check_loss(plateau)
