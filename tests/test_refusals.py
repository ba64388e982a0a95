"""Issue 30, hostile pass: bad configs refused by the config check before a launch, and messages that
say what a path, a file or a number really is (file, line, field, what was expected). Cheap: no
training, no model load."""

import json
import os
from pathlib import Path

import pytest

from core.train import config
from core.train.config import RunConfig
from studio import locales

GOOD = json.dumps({"src": "question", "tgt": "answer"})


def _model(tmp_path: Path, text: str = '{"model_type": "llama"}') -> Path:
    d = tmp_path / "model"
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(text, encoding="utf-8")
    return d


def _dataset(tmp_path: Path, lines: list[str], name: str = "ds") -> Path:
    d = tmp_path / name
    d.mkdir(parents=True)
    (d / "train.json").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    (d / "dev.json").write_text("", encoding="utf-8")
    return d


def _cfg(tmp_path, records: int = 1500, **training) -> RunConfig:
    cfg = RunConfig()
    cfg.model.model_name_or_path = str(_model(tmp_path))
    cfg.data.dataset_name_or_path = str(_dataset(tmp_path, [json.dumps({"src": f"q{i}", "tgt": "a"})
                                                            for i in range(records)]))
    cfg.data.src_length, cfg.data.max_length = 64, 128
    cfg.method.method = "lora"
    for k, v in training.items():
        setattr(cfg.training, k, v)
    return cfg


def _problems(cfg, **kw) -> dict:
    return {p["field"]: p for p in config.check(cfg, has_gpu=kw.pop("has_gpu", False))}


def _texts(p: dict) -> tuple[str, str]:
    """The English message (the CLI's) and the Chinese one (the studio's) of a check problem."""
    zh = locales.t(f"check.{p['code']}", "zh", field=p["field"], **p["params"])
    return config.check_message(p), zh


def test_a_sane_config_has_no_problem(tmp_path):
    assert config.check(_cfg(tmp_path), has_gpu=False) == []


@pytest.mark.parametrize("epochs", [float("inf"), float("nan"), -1.0, 0])
def test_non_finite_epochs_are_refused(tmp_path, epochs):
    p = _problems(_cfg(tmp_path, num_train_epochs=epochs))["training.num_train_epochs"]
    assert p["code"] == "bad_value" and "positive finite number" in config.check_message(p)


def test_absurd_step_counts_are_refused_with_the_count(tmp_path):
    """1e9 epochs of 1,500 records at batch 8: 188 billion steps (the run that was launched)."""
    p = _problems(_cfg(tmp_path, num_train_epochs=1e9))["training.num_train_epochs"]
    assert p["code"] == "too_many_steps"
    assert p["params"]["steps"] == "188,000,000,000" and p["params"]["per_epoch"] == "188"
    en, zh = _texts(p)
    assert "188,000,000,000 optimizer steps" in en and "1,500 records" in en and "10,000,000" in en
    assert "188,000,000,000 个优化步" in zh
    # the same epochs over two processes and 4 accumulated batches: fewer steps per epoch, said so
    cfg = _cfg(tmp_path / "b", num_train_epochs=1e6, gradient_accumulation_steps=4)
    cfg.parallel.nproc = 2
    assert _problems(cfg)["training.num_train_epochs"]["params"]["per_epoch"] == "23"
    assert "training.num_train_epochs" not in _problems(_cfg(tmp_path / "c", num_train_epochs=1000))
    # max_steps: a bound too, and an explicit value overrides the epochs
    assert _problems(_cfg(tmp_path / "d", max_steps=10**9))["training.max_steps"]["code"] == "bad_value"
    assert _problems(_cfg(tmp_path / "e", max_steps=100, num_train_epochs=1e9)) == {}


def test_epochs_are_bounded_without_a_dataset(tmp_path):
    cfg = RunConfig()
    cfg.training.num_train_epochs = 1e9
    assert _problems(cfg)["training.num_train_epochs"]["code"] == "too_many_steps"


@pytest.mark.parametrize("seed, ok", [(-1, False), (2**32, False), (2**63, False), (0, True), (2**32 - 1, True)])
def test_seed_range_is_what_numpy_takes(tmp_path, seed, ok):
    p = _problems(_cfg(tmp_path, seed=seed)).get("training.seed")
    assert (p is None) == ok
    if p:
        assert "from 0 to 4294967295" in config.check_message(p)


def test_negative_warmup_and_a_warmup_ratio_outside_0_1_are_refused(tmp_path):
    assert _problems(_cfg(tmp_path, warmup_steps=-5))["training.warmup_steps"]["code"] == "bad_value"
    for bad in (-0.5, 1.5, float("nan")):
        cfg = _cfg(tmp_path / str(bad), warmup_steps=0)
        cfg.extra["warmup_ratio"] = bad
        p = _problems(cfg)["extra.warmup_ratio"]
        assert "[0,1]" in config.check_message(p)
    cfg = _cfg(tmp_path / "fine")
    cfg.extra["warmup_ratio"] = 0.1
    assert "extra.warmup_ratio" not in _problems(cfg)


@pytest.mark.parametrize("content, why", [("\n\n  \n\n", "only blank lines: 4"), ("", "empty (0 bytes)"),
                                          ('{"foo": 1}\n', "no line is a valid record")])
def test_a_dataset_without_records_is_refused_with_its_file(tmp_path, content, why):
    cfg = _cfg(tmp_path)
    train = Path(cfg.data.dataset_name_or_path) / "train.json"
    train.write_text(content)
    p = _problems(cfg)["data.dataset_name_or_path"]
    assert p["code"] == "no_train_records" and p["params"]["path"] == str(train)
    en, zh = _texts(p)
    assert why in en and "num_samples=0" in en and str(train) in zh


def test_more_processes_than_cores_or_gpus_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "cpu_cores", lambda: 2)
    cfg = _cfg(tmp_path)
    cfg.parallel.nproc = 64
    p = _problems(cfg)["parallel.nproc"]
    assert p["code"] == "nproc_over_cores" and p["params"] == {"nproc": 64, "cores": 2}
    assert "64 processes on a machine with 2 CPU cores" in config.check_message(p)
    cfg.parallel.nproc = 2
    assert "parallel.nproc" not in _problems(cfg)
    monkeypatch.setattr(config, "gpu_count", lambda: 1)
    cfg.parallel.devices = "0,1"
    p = _problems(cfg, has_gpu=True)["parallel.devices"]
    assert p["code"] == "ranks_over_gpus" and p["params"] == {"ranks": 2, "gpus": 1}


def test_model_config_that_is_not_json_is_named_with_line_and_column(tmp_path):
    cfg = _cfg(tmp_path)
    _model(tmp_path, '{"model_type": "llama",\n  "hidden_size": 128,,\n}')
    probs = config.check(cfg, has_gpu=False)
    assert [p["code"] for p in probs] == ["model_config_not_json"]
    en, zh = _texts(probs[0])
    assert f"{tmp_path / 'model' / 'config.json'} is not valid JSON: line 2, column 22" in en
    assert "第 2 行第 22 列" in zh


@pytest.mark.timeout(20)
def test_odd_paths_as_the_dataset_or_model_folder_say_what_they_are(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    for name, kind in (("loop", "a loop of symbolic links"), ("fifo", "a FIFO (named pipe)"),
                       ("zero", "a device file")):
        cfg = RunConfig()
        cfg.model.model_name_or_path = cfg.data.dataset_name_or_path = str(tmp_path / name)
        probs = _problems(cfg)
        for fld in ("model.model_name_or_path", "data.dataset_name_or_path"):
            assert probs[fld]["code"] == "not_a_folder"
            assert f"is {kind}, not a folder" in config.check_message(probs[fld])
