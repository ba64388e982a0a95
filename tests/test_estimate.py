"""Will it fit? core.train.estimate: a guess from the model's shape and the config, calibrated by
the workspace's own finished runs (their supervisor's peak PSS per rank and their steps/s); the
Train tab's check shows it and warns when it exceeds the free memory."""

import json
from collections import namedtuple

from core.train import config, estimate
from tests.conftest import link_demo


def _past_run(ws, name, cfg, peak_mib, steps_per_sec):
    d = ws / "runs" / name
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps(cfg.to_paddlenlp()))
    (d / "studio.json").write_text(json.dumps({"run_id": name, "parallel": {"nproc": 1}, "history": []}))
    (d / "resources.jsonl").write_text(json.dumps({"time": 1.0, "procs": [
        {"pid": 1, "role": "rank 0", "cpu": 90.0, "rss_mib": peak_mib * 1.5, "pss_mib": peak_mib}],
        "run_cpu": 90.0, "run_pss_mib": peak_mib, "run_rss_sum_mib": peak_mib * 1.5, "machine": {}}) + "\n")
    (d / "metrics.jsonl").write_text(json.dumps({"step": 10, "loss": 1.0, "steps_per_sec": steps_per_sec}) + "\n")


def test_calibrated_by_past_runs_and_warned_when_it_does_not_fit(demo_home, tmp_path, monkeypatch):
    ws = link_demo(tmp_path / "ws", demo_home)
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(ws))
    cfg = config.load_preset("demo-lora", ws)
    cfg.training.max_steps = 200
    shape = estimate.model_shape(cfg.model.model_name_or_path)
    assert shape["parameters"] == json.loads((demo_home / "models" / "demo-base" / "studio_model.json").read_text())["parameters"]
    assert estimate.seq_lengths(cfg, compute=False)["source"] == "unmeasured"  # nothing measured it yet
    assert estimate.seq_lengths(cfg)["source"] == "dataset"  # measured now, and kept in the workspace
    g = estimate.guess(cfg, shape, 1)
    assert g["lengths_from"] == "dataset"
    raw = estimate.estimate(cfg)
    assert raw["calibrated_runs"] == 0 and abs(raw["per_process_mib"] - g["mib"]) < 1e-6  # the guess stands
    # two earlier runs measured 1.5x and 2.5x the guess, at 0.5x and 1.5x its step time: medians 2.0 and 1.0
    _past_run(ws, "r1", cfg, 1.5 * g["mib"], 1 / (0.5 * g["step_s"]))
    _past_run(ws, "r2", cfg, 2.5 * g["mib"], 1 / (1.5 * g["step_s"]))
    # a prefix-tuning run 10x off: another method's costs, left out while runs of this one are there
    other = config.load_preset("demo-lora", ws)
    other.method.method = "prefix"
    gp = estimate.guess(other, shape, 1)
    _past_run(ws, "r3", other, 10 * gp["mib"], 1 / (10 * gp["step_s"]))
    assert estimate.calibration(other)["runs"] == 1 and abs(estimate.calibration(other)["mem"] - 10) < 1e-6
    e = estimate.estimate(cfg)
    assert e["calibrated_runs"] == 2
    assert abs(e["per_process_mib"] - 2.0 * g["mib"]) < 1e-3 and e["steps"] == 200
    assert abs(e["seconds"] - 200 * g["step_s"]) < 1e-6
    cfg.parallel.nproc = 2  # two local ranks split the pages they share (PSS): each holds half of them
    e2 = estimate.estimate(cfg)
    assert abs(e2["total_mib"] - 2 * e2["per_process_mib"]) < 1e-3
    assert abs(e2["per_process_mib"] - (e["per_process_mib"] - 2.0 * estimate.SHARED_MIB / 2)) < 1e-3
    # the Train tab's check: the estimate, and a warning when it exceeds the free memory
    from studio.tabs.train import check_markdown

    assert "calibrated by 2 earlier run(s)" in check_markdown(cfg, "en")
    import psutil

    vm = namedtuple("vm", "available total")
    monkeypatch.setattr(psutil, "virtual_memory", lambda: vm(100 * (1 << 20), 1 << 34))
    assert not estimate.estimate(cfg)["fits_memory"]
    assert "exceeds the free memory" in check_markdown(cfg, "en") and "超过当前可用内存" in check_markdown(cfg, "zh")


def test_lengths_come_from_the_dataset_and_a_dry_run_of_the_config_calibrates_it_alone(demo_home, tmp_path, monkeypatch):
    ws = link_demo(tmp_path / "ws", demo_home)
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(ws))
    cfg = config.load_preset("demo-lora", ws)
    cfg.data.max_length, cfg.data.src_length = 512, 256
    from core.data import datasets

    st = datasets.token_stats(ws / "datasets" / "demo" / "train.json", cfg.model.model_name_or_path, 256, 512)
    lens = estimate.seq_lengths(cfg)
    # the demo's records are far shorter than max_length: the guess pads to them, not to 512
    assert lens["source"] == "dataset" and lens["peak"] < 512
    assert st["total"]["max"] <= lens["peak"] <= st["total"]["max"] * 1.1 + 1
    assert st["total"]["mean"] <= lens["batch_mean"] <= lens["peak"]
    cfg.training.per_device_train_batch_size = 1
    one = estimate.seq_lengths(cfg)["batch_mean"]
    assert abs(one - st["total"]["mean"]) <= st["total"]["max"] / 64 + 1  # a batch of one pads to nothing
    cfg.data.zero_padding = True
    assert estimate.seq_lengths(cfg)["peak"] == 512  # packed sequences fill max_length
    cfg.data.zero_padding = False
    cfg.training.per_device_train_batch_size = 8
    shape = estimate.model_shape(cfg.model.model_name_or_path)
    # DPO with LoRA trains the adapter (and holds no frozen copy); full DPO trains everything
    cfg.method.method, cfg.method.dpo_lora = "dpo", True
    assert estimate.trainable("dpo", shape, cfg.method) < shape["parameters"] / 3
    cfg.method.dpo_lora = False
    assert estimate.trainable("dpo", shape, cfg.method) == shape["parameters"]
    cfg.method.method = "lora"
    # sharding stage 1 over 2 processes halves the optimizer's moments of a full fine-tune
    sft = config.load_preset("demo-lora", ws)
    sft.method.method = "sft"
    plain = estimate.guess(sft, shape, 2)["mib"]
    sft.parallel.sharding, sft.parallel.sharding_parallel_degree = "stage1", 2
    assert abs((plain - estimate.guess(sft, shape, 2)["mib"]) - shape["parameters"] * 4 / estimate.MIB) < 1e-6
    # a finished dry run of this config: its own ratios, not the median of other runs
    g = estimate.guess(cfg, shape, 1)
    _past_run(ws, "r1", cfg, 3.0 * g["mib"], 1 / (3.0 * g["step_s"]))
    _past_run(ws, "dry", cfg, 1.2 * g["mib"], 1 / (0.8 * g["step_s"]))
    meta = json.loads((ws / "runs" / "dry" / "studio.json").read_text())
    (ws / "runs" / "dry" / "studio.json").write_text(json.dumps({**meta, "dry_run_of": estimate.fingerprint(cfg)}))
    (ws / "runs" / "dry" / "output").mkdir()
    (ws / "runs" / "dry" / "status.json").write_text(json.dumps({"state": "succeeded"}))
    cfg.training.max_steps = 100
    e = estimate.estimate(cfg)
    assert e["dry_run"] == "dry" and abs(e["per_process_mib"] - 1.2 * g["mib"]) < 1e-3
    assert abs(e["seconds"] - 100 * 0.8 * g["step_s"]) < 1e-6
    cfg.training.per_device_train_batch_size = 4  # another config: the dry run no longer speaks for it
    assert estimate.estimate(cfg)["dry_run"] is None


def test_config_check_dry_run_trains_the_config_briefly_and_calibrates_by_it(demo_home, tmp_path):
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    ws = link_demo(tmp_path / "ws", demo_home)
    env = {**os.environ, "PADDLE_STUDIO_HOME": str(ws), "PADDLE_STUDIO_VERIFY": "0"}
    r = subprocess.run([sys.executable, "-m", "core.cli", "config", "check", "demo-lora", "--dry-run", "--steps", "6",
                        "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    est = json.loads(r.stdout)["estimate"]
    run = ws / "runs" / est["dry_run"]
    meta = json.loads((run / "studio.json").read_text())
    assert meta["dry_run_of"] == estimate.fingerprint(config.load_preset("demo-lora", ws)) and meta["dry_run_steps"] == 6
    steps = [m["step"] for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in m]
    assert max(steps) == 6 and not list((run / "output").glob("checkpoint-*"))  # trained, saved no checkpoint
    m = estimate.measured(run)
    # calibrated by the dry run alone: memory is what it measured (the same lengths), time its step time x 300 steps
    assert abs(est["per_process_mib"] - m["peak_mib"]) < 0.5
    assert abs(est["seconds"] - m["step_s"] * est["steps"]) < 0.01 * est["seconds"]
