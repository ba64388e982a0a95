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


def test_a_preference_dataset_too_small_to_train_dpo_on_is_refused(tmp_path):
    """One kept pair made a 1-step DPO run; fewer pairs than MIN_DPO_PAIRS, or than one optimizer
    step takes (batch x processes x accumulation), are refused with the count (en and zh)."""
    from studio.locales import t

    pair = {"src": ["q"], "tgt": [], "response": ["good", "bad"], "sort": [1, 0]}
    ds = tmp_path / "prefs"
    ds.mkdir()
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama"}))
    cfg = RunConfig()
    cfg.model.model_name_or_path, cfg.data.dataset_name_or_path = str(model), str(ds)
    cfg.method.method, cfg.training.per_device_train_batch_size = "dpo", 1

    def too_few(n):
        (ds / "train.json").write_text("".join(json.dumps(pair) + "\n" for _ in range(n)))
        return [p for p in config.check(cfg, has_gpu=False) if p["code"] == "dpo_too_few_pairs"]

    [p] = too_few(1)
    assert p["field"] == "data.dataset_name_or_path" and (p["params"]["n"], p["params"]["need"]) == (1, config.MIN_DPO_PAIRS)
    assert "holds 1 preference pair(s)" in config.check_message(p)
    assert "只有 1 条偏好对" in t("check.dpo_too_few_pairs", "zh", **p["params"])
    assert too_few(config.MIN_DPO_PAIRS) == []
    cfg.training.per_device_train_batch_size, cfg.training.gradient_accumulation_steps = 4, 3  # a step takes 12
    [p] = too_few(10)
    assert (p["params"]["n"], p["params"]["need"]) == (10, 12) and too_few(12) == []
    cfg.method.method = "lora"  # not DPO: preference_needs_dpo says what is wrong instead
    assert too_few(1) == []


def test_each_method_field_names_the_methods_that_read_it():
    """config.FIELD_METHODS: what the Train form shows per method (and which fields it sends)."""
    from dataclasses import fields

    names = {f.name for f in fields(config.MethodSection)}
    assert set(config.FIELD_METHODS) <= names and set(config.METHOD_SWITCHES) <= names
    for x in [o.partition("+")[0] for owners in config.FIELD_METHODS.values() for o in owners]:
        assert x in config.METHODS, x
    read = lambda **kw: {n for n in names if config.reads(config.MethodSection(**kw), n)}  # noqa: E731
    assert read(method="lora") == {"method", "lora_rank", "rslora", "lora_plus_scale", "pissa", "use_mora",
                                   "lora_use_mixer", "neftune"}
    assert read(method="prefix", neftune=True) == {"method", "num_prefix_tokens", "neftune", "neftune_noise_alpha"}
    assert read(method="dpo") == {"method", "lora_rank", *config.DPO_KEYS}
    assert "lora_rank" not in read(method="dpo", dpo_lora=False)
    assert read(method="kto", kto_lora=False) == {"method", *config.KTO_KEYS}
    # a LoRA switch read into DPO's fields (a run_dpo.py file) is refused, not dropped
    cfg = RunConfig()
    cfg.method.method, cfg.method.rslora = "dpo", True
    assert ("unapplied_key", "method.rslora") in {(p["code"], p["field"]) for p in config.check(cfg, has_gpu=False)}
