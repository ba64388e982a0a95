"""Will it fit? core.train.estimate: a guess from the model's shape and the config, calibrated by
the workspace's own finished runs (their supervisor's peak PSS per rank and their steps/s); the
Train tab's check shows it and warns when it exceeds the free memory."""

import json
from collections import namedtuple

from core.train import config, estimate


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
    ws = tmp_path / "ws"
    (ws / "models").mkdir(parents=True)
    (ws / "datasets").mkdir()
    (ws / "models" / "demo-base").symlink_to(demo_home / "models" / "demo-base")
    (ws / "datasets" / "demo").symlink_to(demo_home / "datasets" / "demo")
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(ws))
    cfg = config.load_preset("demo-lora", ws)
    cfg.training.max_steps = 200
    shape = estimate.model_shape(cfg.model.model_name_or_path)
    assert shape["parameters"] == json.loads((demo_home / "models" / "demo-base" / "studio_model.json").read_text())["parameters"]
    g = estimate.guess(cfg, shape, 1)
    raw = estimate.estimate(cfg)
    assert raw["calibrated_runs"] == 0 and abs(raw["per_process_mib"] - g["mib"]) < 1e-6  # the guess stands
    # two earlier runs measured 1.5x and 2.5x the guess, at 0.5x and 1.5x its step time: medians 2.0 and 1.0
    _past_run(ws, "r1", cfg, 1.5 * g["mib"], 1 / (0.5 * g["step_s"]))
    _past_run(ws, "r2", cfg, 2.5 * g["mib"], 1 / (1.5 * g["step_s"]))
    e = estimate.estimate(cfg)
    assert e["calibrated_runs"] == 2
    assert abs(e["per_process_mib"] - 2.0 * g["mib"]) < 1e-3 and e["steps"] == 200
    assert abs(e["seconds"] - 200 * g["step_s"]) < 1e-6
    cfg.parallel.nproc = 2
    assert abs(estimate.estimate(cfg)["total_mib"] - 2 * e["per_process_mib"]) < 1e-3
    # the Train tab's check: the estimate, and a warning when it exceeds the free memory
    from studio.tabs.train import check_markdown

    assert "calibrated by 2 earlier run(s)" in check_markdown(cfg, "en")
    import psutil

    vm = namedtuple("vm", "available total")
    monkeypatch.setattr(psutil, "virtual_memory", lambda: vm(100 * (1 << 20), 1 << 34))
    assert not estimate.estimate(cfg)["fits_memory"]
    assert "exceeds the free memory" in check_markdown(cfg, "en") and "超过当前可用内存" in check_markdown(cfg, "zh")
