"""Experiment tracking (training.report_to): a demo run that reports to VisualDL writes the same losses
VisualDL's own reader reads back as the studio's metrics.jsonl holds, and the same metrics.jsonl as a run
without a tracker; the VisualDL board answers on loopback only and is gone after stop (or when the
process that started it dies); a tracker whose package is missing, or online wandb, is refused."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from core.train import config, tracking
from tests.test_runs import cli, small_config, wait_for, ws  # noqa: F401 - ws is a fixture

pytestmark = pytest.mark.slow
STEPS = 4


def _http(url: str, headers: dict | None = None, timeout: float = 3.0):
    """(status, body) of a GET on loopback, round any proxy; (None, error) when nothing answers."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError as e:
        return None, repr(e)


def _train(ws, path: Path, report_to: str) -> Path:
    cfg = small_config(ws, path, max_steps=STEPS, save_strategy="no", warmup_steps=0, report_to=report_to)
    r = cli("train", str(cfg), "--json", home=ws)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["status"]["state"] == "succeeded", out["status"]
    return Path(out["dir"])


def _losses(d: Path) -> dict[int, float]:
    recs = [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return {r["step"]: r["loss"] for r in recs if "loss" in r and "eval_loss" not in r}


@pytest.fixture(scope="module")
def vdl_run(ws, tmp_path_factory):
    return _train(ws, tmp_path_factory.mktemp("trk") / "vdl.json", "visualdl")


def test_visualdl_scalars_equal_the_studio_metrics(vdl_run, ws, tmp_path):
    d = vdl_run
    flat = json.loads((d / "config.json").read_text())
    assert flat["report_to"] == "visualdl" and Path(flat["logging_dir"]) == d / "output" / "vdl"
    folder = tracking.log_dir(d)
    assert folder == d / "output" / "vdl" and tracking.has_logs(folder)
    from visualdl import LogReader

    reader = LogReader(file_path=str(next(folder.rglob("vdlrecords.*"))))
    got = {rec.id: rec.value for rec in reader.get_data("scalar", "train/loss")}
    want = _losses(d)
    assert sorted(got) == sorted(want) == list(range(1, STEPS + 1))
    for step, loss in want.items():  # VisualDL keeps float32
        assert got[step] == pytest.approx(loss, rel=1e-6), (step, got[step], loss)


def test_the_studio_metrics_are_the_same_without_a_tracker(vdl_run, ws, tmp_path):
    """metrics.jsonl (the studio's callback) is the same with or without a tracker: same lines, same losses."""
    d, want = vdl_run, _losses(vdl_run)
    plain = _train(ws, tmp_path / "plain.json", "none")
    assert json.loads((plain / "config.json").read_text())["report_to"] == "none"
    assert not (plain / "output" / "vdl").exists()
    assert _losses(plain) == want
    def shape(run):
        return [sorted(json.loads(line)) for line in (run / "metrics.jsonl").read_text().splitlines()]

    assert shape(plain) == shape(d)


def test_the_board_answers_on_loopback_and_is_gone_after_stop(vdl_run, ws, monkeypatch):
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(ws))
    run_id = vdl_run.name
    link = tracking.tracking_link(run_id)
    assert link["tracker"] == "visualdl" and link["url"] is None and link["can_start"] and link["has_logs"]
    rec = tracking.start_board(run_id)
    try:
        assert rec["url"].startswith("http://127.0.0.1:")
        assert tracking.start_board(run_id)["pid"] == rec["pid"]  # found, not started twice
        assert tracking.tracking_link(run_id)["url"] == rec["url"]
        assert _http(f"http://127.0.0.1:{rec['port']}/alive")[0] in (200, 204)
        status, page = _http(rec["url"] + "/index", {"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"})
        assert status == 200 and b"<html" in page.lower()
        status, body = _http(f"http://127.0.0.1:{rec['port']}/app/api/scalar/list?run={rec['logdir']}&tag=train/loss")
        steps = [row[1] for row in json.loads(body)["data"]]
        assert status == 200 and steps == list(range(1, STEPS + 1))
        listening = [c.laddr for c in psutil.Process(rec["pid"]).net_connections("inet") if c.status == "LISTEN"]
        assert listening and all(a.ip == "127.0.0.1" for a in listening), listening
    finally:
        assert tracking.stop_board(run_id)
    assert not tracking.jobs.alive(rec["pid"], rec["pid_start"])
    assert _http(f"http://127.0.0.1:{rec['port']}/alive")[0] is None
    assert tracking.board(run_id) is None and tracking.tracking_link(run_id)["url"] is None


def test_the_board_ends_with_the_process_that_started_it(vdl_run, ws, monkeypatch):
    """The studio killed (-9): its boards end within the leash's second, no orphan left."""
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(ws))
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        rec = tracking.start_board(vdl_run.name, owner=owner.pid)
        assert _http(f"http://127.0.0.1:{rec['port']}/alive")[0] in (200, 204)
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        wait_for(lambda: not tracking.jobs.alive(rec["pid"], rec["pid_start"]), 10, 0.1)
        assert tracking.board(vdl_run.name) is None
    finally:
        owner.kill()
        tracking.stop_board(vdl_run.name)


def test_an_upstream_file_keeps_report_to_and_logs_inside_the_run():
    src = {"model_name_or_path": "m", "dataset_name_or_path": "d", "report_to": "visualdl", "logging_dir": "vdl_log"}
    cfg = config.RunConfig.from_paddlenlp(src)
    assert cfg.training.report_to == "visualdl" and "report_to" not in cfg.extra
    assert cfg.to_paddlenlp()["report_to"] == "visualdl" and cfg.to_paddlenlp()["logging_dir"] == "vdl_log"
    out = cfg.to_paddlenlp(output_dir="/r/output")
    assert (out["report_to"], out["logging_dir"]) == ("visualdl", "/r/output/vdl")
    assert config.RunConfig.from_paddlenlp({"model_name_or_path": "m"}).to_paddlenlp()["report_to"] == "none"
    assert config.RunConfig.from_paddlenlp({**src, "report_to": ["visualdl"]}).to_paddlenlp()["report_to"] == ["visualdl"]


def _tracker_codes(value, has_gpu=False):
    cfg = config.RunConfig()
    cfg.training.report_to = value
    return [(p["code"], p["params"]) for p in config.check(cfg, has_gpu=has_gpu) if p["field"] == "training.report_to"]


def test_a_missing_tracker_and_online_wandb_are_refused_with_a_reason(monkeypatch):
    from studio import locales

    assert _tracker_codes("visualdl") == [] and _tracker_codes("none") == []
    present = {"visualdl"}
    monkeypatch.setattr(tracking, "installed", lambda name: name in present)
    assert _tracker_codes("tensorboard") == [("tracker_missing", {"tracker": "tensorboard", "package": "tensorboardX"})]
    present.clear()
    assert _tracker_codes("visualdl") == [("tracker_missing", {"tracker": "visualdl", "package": "visualdl"})]
    assert _tracker_codes("comet")[0][0] == "tracker_unknown"
    present.add("wandb")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    assert [c for c, _ in _tracker_codes("wandb")] == ["wandb_online"]
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert _tracker_codes("wandb") == []
    for code in ("tracker_unknown", "tracker_missing", "wandb_online"):
        p = {"code": code, "field": "training.report_to",
             "params": {"value": "comet", "expected": "none, visualdl", "tracker": "visualdl", "package": "visualdl",
                        "mode": ""}}
        assert config.check_message(p) != code
        zh = locales.t(f"check.{code}", "zh", field=p["field"], **p["params"])
        assert zh != f"check.{code}" and "{" not in zh


def test_a_run_whose_tracker_is_missing_is_refused_before_it_starts(ws, tmp_path):
    """The real package check, through the CLI: tensorboard needs tensorboardX, which is not installed here."""
    if tracking.installed("tensorboard"):
        pytest.skip("tensorboardX is installed here")
    cfg = small_config(ws, tmp_path / "tb.json", max_steps=2, report_to="tensorboard")
    r = cli("config", "check", str(cfg), "--json", home=ws, timeout=120)
    assert r.returncode != 0 and "tensorboardX" in (r.stdout + r.stderr)
    assert not (ws / "runs").exists() or not any("tb" in p.name for p in (ws / "runs").iterdir())
