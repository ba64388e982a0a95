"""RunConfig <-> PaddleNLP JSON, every problem at once, every preset loads and checks."""

import json

import pytest

from core.train import config
from core.train.config import RunConfig


def test_round_trip_keeps_unknown_keys_and_method_flags():
    flat = {
        "model_name_or_path": "m", "dataset_name_or_path": "d", "lora": True, "lora_rank": 4, "rslora": True,
        "src_length": 64, "max_length": 96, "learning_rate": 0.001, "max_steps": 10, "tensor_parallel_degree": 1,
        "some_future_key": {"x": [1, 2]}, "unified_checkpoint": True,
    }
    cfg = RunConfig.from_paddlenlp(flat, name="r")
    assert cfg.method.method == "lora" and cfg.method.lora_rank == 4 and cfg.method.rslora
    assert cfg.extra == {"some_future_key": {"x": [1, 2]}} and cfg.training.unified_checkpoint is True
    out = cfg.to_paddlenlp(output_dir="/o")
    for k, v in flat.items():
        assert out[k] == v, k
    # lossless: the file's keys plus what the studio always writes; nothing else equal to upstream's default
    assert set(out) == set(flat) | {"output_dir", "logging_dir", "report_to", "disable_tqdm", "do_train"}, set(out) - set(flat)
    assert out["output_dir"] == "/o"
    cfg.method.method = "prefix"  # a change shows up even where the file had no key for it
    assert cfg.to_paddlenlp()["prefix_tuning"] is True and cfg.to_paddlenlp()["lora"] is False
    cfg.method.method = "lora"
    again = RunConfig.from_paddlenlp(out)
    assert again.to_paddlenlp(output_dir="/o") == out
    for method, key in (("prefix", "prefix_tuning"), ("vera", "vera"), ("lokr", "lokr")):
        c = RunConfig()
        c.method.method = method
        d = c.to_paddlenlp()
        assert d[key] is True and d["lora"] is False
        assert RunConfig.from_paddlenlp(d).method.method == method


def test_check_reports_every_problem_at_once(tmp_path):
    cfg = RunConfig()
    cfg.model.model_name_or_path = str(tmp_path / "nope")
    cfg.data.dataset_name_or_path = str(tmp_path / "missing")
    cfg.data.src_length, cfg.data.max_length = 128, 64
    cfg.method.method = "prefix"
    cfg.parallel.pipeline_parallel_degree = 2
    cfg.parallel.nproc = 2
    cfg.training.flash_mask = True
    cfg.training.fp16_opt_level = "O2"
    cfg.training.use_flash_attention = True
    codes = {(p["code"], p["field"]) for p in config.check(cfg, has_gpu=False)}
    assert codes == {
        ("path_missing", "model.model_name_or_path"),
        ("path_missing", "data.dataset_name_or_path"),
        ("max_length_le_src", "data.max_length"),
        ("prefix_with_pipeline", "method.method"),
        ("flash_mask_needs_zero_padding", "training.flash_mask"),
        ("opt_level_needs_amp", "training.fp16_opt_level"),
        ("needs_gpu", "training.use_flash_attention"),
        ("needs_gpu", "training.flash_mask"),
        ("pipeline_needs_pipe_model", "parallel.pipeline_parallel_degree"),  # the entry builds no pipeline model
    }
    vera = RunConfig()
    vera.method.method = "vera"
    vera.parallel.tensor_parallel_degree = 2
    vera.parallel.nproc = 2
    vera.method.weight_quantize_algo = "nf4"
    codes = {p["code"] for p in config.check(vera, has_gpu=False)}
    assert {"tp_with_vera_lokr", "needs_gpu", "required"} <= codes
    # the same on a GPU machine: the GPU-only complaints go away, the rest stay
    codes_gpu = {p["code"] for p in config.check(vera, has_gpu=True)}
    assert "needs_gpu" not in codes_gpu and "tp_with_vera_lokr" in codes_gpu
    for p in config.check(cfg, has_gpu=False):
        assert config.check_message(p) != p["code"]


def test_every_check_code_is_translated():
    from studio import locales

    for code in config.MESSAGES:
        for lang in locales.LANGS:
            assert locales.TEXT[f"check.{code}"][lang]


def test_every_field_has_help_in_both_languages():
    from dataclasses import fields

    from studio.locales import FIELD_HELP_ZH

    for sec in RunConfig.SECTIONS:
        for f in fields(getattr(RunConfig(), sec)):
            assert f.metadata.get("help"), f.name
            assert FIELD_HELP_ZH.get(f.name), f.name


@pytest.mark.parametrize("preset", [p["name"] for p in config.list_presets()])
def test_every_preset_loads_and_checks(preset, demo_home):
    cfg = config.load_preset(preset, demo_home)
    problems = config.check(cfg, has_gpu=False)
    assert cfg.to_paddlenlp()["model_name_or_path"].startswith(str(demo_home))
    info = next(p for p in config.list_presets() if p["name"] == preset)
    assert info["command"].startswith("paddle-studio train") and info["description"]
    if preset.startswith("demo-"):
        assert problems == [], problems
    else:  # real-model presets: only "put your model there" and GPU-only complaints on this machine
        assert problems and {p["code"] for p in problems} <= {"path_missing", "needs_gpu", "devices_on_cpu", "degrees_do_not_divide"}
        assert {p["code"] for p in config.check(cfg, has_gpu=True)} <= {"path_missing"}


def test_method_templates_and_families_are_valid_json():
    for f in (config.PRESETS_DIR / "methods").glob("*.json"):
        d = json.loads(f.read_text())
        assert d["description"] and isinstance(d["config"], dict)
    for f in (config.PRESETS_DIR / "models").glob("*.json"):
        d = json.loads(f.read_text())
        assert d["model_types"] and d["target_modules"]
