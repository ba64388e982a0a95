"""Nothing silently ignored: the LLM switches of a run reach the model config the trainer builds
(as upstream's run_finetune.py hands them over with LlmMetaConfig.set_llm_config), and the ones
that cannot work on this machine are refused by the check with the reason measured here."""

import json

import pytest

from core.train import config

SWITCHES = {"use_flash_attention": True, "use_fused_rms_norm": True, "use_fused_rope": True, "fuse_attention_qkv": True,
            "fuse_attention_ffn": True, "recompute_granularity": "core_attn", "tensor_parallel_output": False,
            "sequence_parallel": True, "use_fast_layer_norm": True}


def test_switches_reach_the_model_config(demo_home):
    from paddlenlp.transformers import AutoConfig

    from core.train import entry

    cfg = config.load_preset("demo-lora", demo_home)
    cfg.training.use_flash_attention = True  # a form field; the others are upstream keys kept in extra
    cfg.extra.update({k: v for k, v in SWITCHES.items() if k != "use_flash_attention"})
    flat = {**cfg.to_paddlenlp(output_dir="/tmp/x"), "max_length": 77}
    model_args, data_args, training_args = entry.split_args(flat)
    model_config = AutoConfig.from_pretrained(str(demo_home / "models" / "demo-base"))
    before = {k: getattr(model_config, k, None) for k in SWITCHES}
    assert before != SWITCHES  # the model's own defaults differ: the test can fail
    entry.configure_model(model_config, model_args, data_args, training_args)
    assert {k: getattr(model_config, k) for k in SWITCHES} == SWITCHES
    assert model_config.seq_length == 77


def check_codes(cfg, has_gpu=False):
    return {(p["code"], p["field"]): config.check_message(p) for p in config.check(cfg, has_gpu=has_gpu)}


def test_switches_that_do_nothing_on_cpu_are_refused_with_the_reason(demo_home):
    cfg = config.load_preset("demo-lora", demo_home)
    cfg.training.use_flash_attention = True
    cfg.extra.update({k: True for k in config.CPU_REFUSED} | {"device": "gpu"})
    got = check_codes(cfg)
    for key, (why, _) in config.CPU_REFUSED.items():
        assert got[("cpu_refused", f"extra.{key}")] == f"{key} does not work on this machine (no GPU): {why}"
    assert "fused_ln" in got[("cpu_refused", "extra.use_fused_rms_norm")]
    assert "'Fleet' object has no attribute '_hcg'" in got[("cpu_refused", "extra.sequence_parallel")]
    assert "is_gpu_place" in got[("needs_gpu", "training.use_flash_attention")]
    assert "'gpu'" in got[("device_not_here", "extra.device")]
    # on a GPU machine they are left to PaddleNLP
    assert not [k for k in check_codes(cfg, has_gpu=True) if k[0] in ("cpu_refused", "device_not_here")]
    cfg.extra = {"device": "cpu", "unified_checkpoint": True, "recompute_granularity": "core_attn"}  # these work here
    cfg.training.use_flash_attention = False
    assert check_codes(cfg) == {}


def test_constant_schedule_with_warmup_is_refused_and_the_other_schedules_are_offered(demo_home):
    cfg = config.load_preset("demo-lora", demo_home)
    cfg.training.lr_scheduler_type = "constant"
    cfg.training.warmup_steps = 10
    assert ("warmup_ignored", "training.warmup_steps") in check_codes(cfg)
    cfg.training.lr_scheduler_type = "constant_with_warmup"
    assert check_codes(cfg) == {}
    choices = config.TrainingSection.__dataclass_fields__["lr_scheduler_type"].metadata["choices"]
    assert {"constant_with_warmup", "polynomial"} <= set(choices)


@pytest.mark.parametrize("method", ["lora", "vera", "lokr"])
def test_fused_layers_are_refused_for_adapters_that_would_miss_them(demo_home, method):
    cfg = config.load_preset("demo-lora", demo_home)
    cfg.method.method = method
    cfg.extra["fuse_attention_qkv"] = True
    msg = check_codes(cfg)[("fused_layout_with_adapter", "extra.fuse_attention_qkv")]
    assert "q, k, v" in msg and "load the base model unfused" in msg
    cfg.method.method = "sft"  # full fine-tuning trains the fused layer itself
    assert check_codes(cfg) == {}


def test_cli_train_of_a_refused_config_exits_2_with_json_and_each_field_once(demo_home, tmp_path):
    import subprocess
    import sys

    from tests.conftest import ROOT

    f = tmp_path / "bad.json"
    f.write_text(json.dumps({"model_name_or_path": str(tmp_path / "nope"), "dataset_name_or_path": str(tmp_path / "no"),
                             "lora": True}))
    r = subprocess.run([sys.executable, "-m", "core.cli", "train", str(f), "--json"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120, env={**__import__("os").environ, "PADDLE_STUDIO_HOME": str(tmp_path / "ws")})
    assert r.returncode == 2, (r.returncode, r.stderr)
    out = json.loads(r.stdout)
    assert not out["ok"] and {p["field"] for p in out["problems"]} == {"model.model_name_or_path",
                                                                       "data.dataset_name_or_path"}
    lines = [x for x in r.stderr.splitlines() if x.startswith("paddle-studio:")]
    assert lines and all(x.count("model_name_or_path") + x.count("dataset_name_or_path") == 1 for x in lines), lines
