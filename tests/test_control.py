"""Steering a running two-rank run (core.train.control, `paddle-studio runs control`): save now
writes a complete checkpoint within two steps; lr=X shows in the metrics from the next logged step;
stop-and-save ends the run as "stopped (saved at step N)" with a complete checkpoint at N that
resume starts from; evaluate now adds an evaluation at its step; stop-after-eval ends the run
(saved) at the next evaluation; every request is in the run's control history with the step it took effect."""

import json
import os
import subprocess
import sys
import time

import pytest

from core.train import control, runs
from tests.test_runs import ROOT, processes_of, small_config, wait_for, ws  # noqa: F401 - ws is a fixture
from tests.test_train_faults import start

pytestmark = pytest.mark.slow


def cli(*args, ws):
    return subprocess.run([sys.executable, "-m", "core.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PADDLE_STUDIO_HOME": str(ws)})


def metrics(d):
    f = d / "metrics.jsonl"
    return [json.loads(x) for x in f.read_text().splitlines() if x.strip()] if f.is_file() else []


def last_step(d):
    return max([r["step"] for r in metrics(d) if "loss" in r] or [0])


def applied(d, req_id):
    return next((r for r in control.history(d) if r["id"] == req_id and "applied_step" in r), None)


def test_save_lr_and_stop_and_save_on_two_ranks(ws, tmp_path, monkeypatch):
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(ws))
    cfg = small_config(ws, tmp_path / "ctl.json", max_steps=400, save_steps=1000, save_strategy="steps",
                       logging_steps=1, lr_scheduler_type="linear", warmup_steps=0, learning_rate=3e-4,
                       evaluation_strategy="steps", eval_steps=1000)  # a dev split, evaluated only on request
    run_id = start(ws, cfg, {}, "--nproc", "2")
    d = runs.run_dir(run_id)
    wait_for(lambda: last_step(d) >= 3, 180, 0.2)
    assert cli("runs", "control", run_id, "lr=abc", ws=ws).returncode == 2  # refused with the reason
    # save now: a complete checkpoint within 2 steps of the step the request was accepted at
    r = cli("runs", "control", run_id, "save", "--json", ws=ws)
    assert r.returncode == 0, r.stderr
    save = json.loads(r.stdout)["request"]
    done = wait_for(lambda: applied(d, save["id"]), 60, 0.1)
    ck = d / "output" / f"checkpoint-{done['applied_step']}"
    wait_for(lambda: (ck / "studio_checkpoint.json").is_file(), 60, 0.1)
    acc = next(h for h in control.history(d) if h["id"] == save["id"])
    # accepted for 2 steps after the step whose end read it: a step logs after its control check, so the
    # first step logged after the request may be the one whose check it just missed (+1)
    assert done["applied_step"] - acc["at_step"] == 0 and acc["at_step"] <= 3 + min(
        x["step"] for x in metrics(d) if "loss" in x and x.get("time", 0) >= save["time"]), acc
    # lr=1e-5: the schedule keeps its shape around the new peak from the next step
    lr = runs.control_run(run_id, "lr=1e-5")
    at = wait_for(lambda: applied(d, lr["id"]), 60, 0.1)["applied_step"]
    wait_for(lambda: last_step(d) >= at + 2, 60, 0.1)
    logged = {x["step"]: x["lr"] for x in metrics(d) if "lr" in x}
    before, after = logged[at - 1], logged[at + 1]
    assert before > 1e-4 and after < 1.1e-5, (before, after)  # 3e-4 x (1 - s/400) before, 1e-5 x (...) after
    _monitor_samples(d)  # what the run costs, sampled by its supervisor meanwhile
    # stop and save: the run ends "stopped", with the checkpoint of the step it stopped at
    stop = runs.control_run(run_id, "stop-and-save")
    wait_for(lambda: runs.status(run_id)["state"] not in runs.ACTIVE, 120, 0.2)
    st = runs.status(run_id)
    n = wait_for(lambda: applied(d, stop["id"]), 10, 0.1)["applied_step"]
    assert st["state"] == "stopped" and f"stopped and saved at step {n}" in st["reason"], st
    assert runs.last_checkpoint(d).name == f"checkpoint-{n}" and n < 400
    assert "ccache" not in (d / "log" / "workerlog.0").read_text(errors="replace")  # paddle's build warnings filtered
    wait_for(lambda: not processes_of(d), 20, 0.2)
    from core.train import monitor

    assert monitor.read(d)  # the samples are still there after the run
    hist = json.loads(cli("runs", "control", run_id, "history", "--json", ws=ws).stdout)["control"]
    assert [h["action"] for h in hist] == ["save", "lr", "stop-and-save"] and all("applied_step" in h for h in hist)
    r = cli("runs", "control", run_id, "save", ws=ws)
    assert r.returncode == 2 and "only a running run" in r.stderr
    # resume starts at the stop step, and the earlier stop does not end it again
    runs.resume(run_id)
    wait_for(lambda: [x for x in metrics(d) if x.get("event") == "train_begin"][-1]["step"] == n
             and last_step(d) > n + 2, 180, 0.2)
    assert runs.status(run_id)["state"] == "running"
    # evaluate now: an eval loss at the step it was applied (none is scheduled before step 1000)
    ev = runs.control_run(run_id, "eval")
    at = wait_for(lambda: applied(d, ev["id"]), 60, 0.1)["applied_step"]
    wait_for(lambda: [x for x in metrics(d) if "eval_loss" in x], 60, 0.1)
    assert [x["step"] for x in metrics(d) if "eval_loss" in x] == [at]
    # stop after the next evaluation (here the one asked for next): evaluated, saved, stopped there
    after = runs.control_run(run_id, "stop-after-eval")
    wait_for(lambda: control.history(d)[-1].get("at_step"), 30, 0.1)  # accepted before the evaluation is asked
    ev2 = runs.control_run(run_id, "eval")
    wait_for(lambda: runs.status(run_id)["state"] not in runs.ACTIVE, 120, 0.2)
    m = wait_for(lambda: applied(d, after["id"]), 10, 0.1)["applied_step"]
    assert applied(d, ev2["id"])["applied_step"] == m
    assert [x["step"] for x in metrics(d) if "eval_loss" in x] == [at, m] and last_step(d) == m
    st = runs.status(run_id)
    assert st["state"] == "stopped" and f"stopped and saved at step {m}" in st["reason"], st
    assert runs.last_checkpoint(d).name == f"checkpoint-{m}"
    wait_for(lambda: not processes_of(d), 30, 0.2)


def test_more_epochs_on_a_run_bounded_by_max_steps_adds_an_epochs_worth_of_steps(workspace_home, monkeypatch):
    """Continue with "more epochs: 1" on a run whose max_steps bounds it adds the steps one epoch
    takes (what training counted: 4 here), not max_steps / num_train_epochs (150 before)."""
    from core import workspace
    from core.train import checkpoints

    d = workspace.runs_dir() / "r1"
    (d / "output" / "checkpoint-8").mkdir(parents=True)
    (d / "studio.json").write_text(json.dumps({"history": []}))
    (d / "status.json").write_text(json.dumps({"state": "succeeded"}))
    (d / "config.json").write_text(json.dumps({"max_steps": 150, "num_train_epochs": 1}))
    (d / "metrics.jsonl").write_text("\n".join(json.dumps({"step": s, "epoch": s / 4, "loss": 1.0}) for s in range(1, 9)) + "\n")
    (d / "output" / "checkpoint-8" / "model_state.pdparams").write_bytes(b"x" * 16)
    checkpoints.mark_complete(d / "output" / "checkpoint-8", 8)
    started = []
    monkeypatch.setattr(runs, "start", lambda run_id, resume=False: started.append((run_id, resume)) or {"state": "queued"})
    runs.continue_run("r1", epochs=1)
    assert json.loads((d / "config.json").read_text())["max_steps"] == 154 and started == [("r1", True)]
    runs.continue_run("r1", epochs=2.5)
    assert json.loads((d / "config.json").read_text())["max_steps"] == 164
    runs.continue_run("r1", steps=6)
    assert json.loads((d / "config.json").read_text())["max_steps"] == 170


def _monitor_samples(d):
    """resources.jsonl of the running 2-rank run: every rank and the launcher with CPU and PSS, the
    machine's CPU, memory and free disk; the run's PSS within 10 % of /proc/PID/smaps_rollup read now."""
    from core.train import monitor

    n0 = len(monitor.read(d))
    recs = wait_for(lambda: (lambda r: r if len(r) >= n0 + 2 else None)(monitor.read(d)), 60, 0.5)
    last = recs[-1]
    roles = sorted(p["role"] for p in last["procs"])
    assert roles.count("launcher") == 1 and {"rank 0", "rank 1"} <= set(roles), roles
    assert all(p["pss_mib"] > 50 and p["pss_mib"] <= p["rss_mib"] for p in last["procs"] if p["role"].startswith("rank"))
    m = last["machine"]
    assert 0 <= m["cpu"] <= 100 and m["mem_total_mib"] > m["mem_available_mib"] > 0 and m["disk_free_mib"] > 0
    # PSS (shared pages counted once) against the kernel's own sums, read now for the same processes
    direct = sum(monitor.smaps_pss_mib(p["pid"]) or 0 for p in last["procs"])
    assert abs(direct - last["run_pss_mib"]) <= 0.10 * direct, (direct, last["run_pss_mib"])
    assert last["run_pss_mib"] < last["run_rss_sum_mib"]  # RSS sums count the ranks' shared libraries twice
    s = monitor.summary(d)
    print(f"\nmonitor: {s['samples']} samples, peak PSS {s['peak_pss_mib']:.0f} MiB (RSS sum "
          f"{last['run_rss_sum_mib']:.0f} MiB), mean CPU {s['mean_cpu']:.0f} %")


def test_early_stopping_ends_a_two_rank_run_whose_eval_loss_stops_improving(ws, tmp_path, monkeypatch):
    """Patience 2: with a learning rate too small to move the model, the eval loss never improves, so
    the run ends (succeeded, its model saved) at its third evaluation instead of training 400 steps."""
    from core.train import config

    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(ws))
    cfg = config.load_preset("demo-lora", ws)
    cfg.name = "early"
    cfg.training.max_steps = 400
    cfg.training.learning_rate = 1e-12
    cfg.training.evaluation_strategy = "steps"
    cfg.training.eval_steps = 2
    cfg.training.save_strategy = "no"
    cfg.parallel.nproc = 2
    cfg.parallel.early_stopping_patience = 2
    off = config.load_preset("demo-lora", ws)
    off.parallel.early_stopping_patience = 2
    off.training.evaluation_strategy = "no"
    assert [p["code"] for p in config.check(off, has_gpu=False)] == ["early_stopping_needs_eval"]
    assert not config.check(cfg, has_gpu=False)
    run_id = runs.create(cfg)
    runs.start(run_id)
    d = runs.run_dir(run_id)
    wait_for(lambda: runs.status(run_id)["state"] not in runs.ACTIVE, 300, 0.5)
    assert runs.status(run_id)["state"] == "succeeded", runs.status(run_id)
    evals = [r for r in metrics(d) if "eval_loss" in r]
    assert [r["step"] for r in evals] == [2, 4, 6] and last_step(d) == 6, evals
    stop = control.history(d)
    assert any(r.get("action") == "early-stopping" and r["applied_step"] == 6 for r in stop), stop
    assert (d / "output" / "studio_model.json").is_file()  # the model was saved as at a normal end


def test_steering_a_run_over_several_machines_is_refused(workspace_home):
    """The control file is read in each machine's run folder: other nodes would never see a request."""
    from core import workspace

    d = workspace.runs_dir() / "mn"
    d.mkdir(parents=True)
    (d / "studio.json").write_text(json.dumps({"parallel": {"nproc": 1, "nnodes": 2}, "nodes": [{"name": "n1"}]}))
    (d / "status.json").write_text(json.dumps({"state": "running"}))
    with pytest.raises(control.ControlError, match="spans several machines") as e:
        runs.control_run("mn", "save")
    assert e.value.code == "multi_node" and not (d / control.REQUESTS).exists()
