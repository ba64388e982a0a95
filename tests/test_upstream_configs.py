"""A corpus of upstream-shaped PaddleNLP argument files (tests/upstream_configs/, written from the
keys PaddleNLP documents for llm/run_finetune.py, run_pretrain.py, alignment/dpo and
run_quantization.py, for LLaMA, Qwen2 and ChatGLM2) and the verdict the studio must give each:
accepted by the upstream-strict parser (then only machine-specific refusals: hub ids, the missing
./data folder, GPU-only switches on this CPU), or one precise refusal naming what is wrong."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.train import config, upstream

CORPUS = Path(__file__).resolve().parent / "upstream_configs"
ROOT = CORPUS.parents[1]

HUB_AND_DATA = {("hub_id", "model.model_name_or_path"), ("path_missing", "data.dataset_name_or_path")}
# stage1 trains on CPU, but on this one process it would shard nothing; stage2 needs a GPU
GPU_LORA = HUB_AND_DATA | {("sharding_shards_nothing", "parallel.sharding_parallel_degree"), ("needs_gpu", "training.bf16")}
GPU_SFT = GPU_LORA | {("needs_gpu", "parallel.sharding"), ("needs_gpu", "parallel.tensor_parallel_degree"),
                      ("degrees_do_not_divide", "parallel.tensor_parallel_degree")}
# file -> ("accept", the check's (code, field) pairs on a CPU machine) | ("refuse", [(code, field, detail)])
EXPECT = {
    **{f"{fam}_sft": ("accept", GPU_SFT) for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_lora": ("accept", GPU_LORA) for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_ptq": ("refuse", [("other_entry", "", "quantization")]) for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_gptq": ("refuse", [("other_entry", "", "quantization")]) for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_dpo": ("accept", (GPU_SFT - {("needs_gpu", "parallel.sharding")}) |  # stage1
                      {("needs_gpu", "training.flash_mask"), ("needs_gpu", "training.use_flash_attention")})
       for fam in ("llama", "qwen2", "chatglm2")},  # run_dpo.py's keys: the dpo method
    **{f"{fam}_qlora": ("accept", HUB_AND_DATA | {("needs_gpu", "method.weight_quantize_algo"), ("needs_gpu", "training.bf16")})
       for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_prefix": ("accept", HUB_AND_DATA | {("needs_gpu", "training.bf16")}) for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_vera": ("accept", HUB_AND_DATA) for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_lokr": ("accept", HUB_AND_DATA) for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_reft": ("accept", HUB_AND_DATA | {("needs_gpu", "training.bf16")}) for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_pretrain": ("refuse", [("other_entry", "", "pretrain")]) for fam in ("llama", "qwen2", "chatglm2")},
    "typo_keys": ("refuse", [("unknown_key", "lora_rnak", "lora_rank"), ("unknown_key", "learnign_rate", "learning_rate")]),
    "wrong_types": ("refuse", [("bad_type", "learning_rate", None), ("bad_type", "lora", None),
                               ("bad_type", "max_steps", None)]),
    "bad_choices": ("refuse", [("bad_choice", "evaluation_strategy", None), ("bad_choice", "fp16_opt_level", None),
                               ("bad_choice", "lr_scheduler_type", None)]),
    "top_level_array": ("refuse", [("not_an_object", "", None)]),
    "not_json": ("refuse", [("bad_json", "", None)]),
}


def verdict(path: Path):
    try:
        cfg = config.load_run_file(path)
    except config.FileProblems as e:
        return "refuse", sorted((p["code"], p["field"], p["params"].get("entry") or p["params"].get("suggestion"))
                                for p in e.problems), [p["message"] for p in e.problems]
    probs = config.check(cfg, has_gpu=False)
    return "accept", {(p["code"], p["field"]) for p in probs}, [config.check_message(p) for p in probs]


def test_the_corpus_is_all_here():
    assert sorted(p.stem for p in CORPUS.glob("*.json")) == sorted(EXPECT)


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_verdict(name):
    kind, found, messages = verdict(CORPUS / f"{name}.json")
    want_kind, want = EXPECT[name]
    assert kind == want_kind, (kind, found, messages)
    assert found == (sorted(want) if kind == "refuse" else want), messages
    assert all(m and "Traceback" not in m for m in messages)


def test_messages_name_the_key_the_suggestion_and_the_entry():
    _, _, msgs = verdict(CORPUS / "typo_keys.json")
    assert "not an argument of llm/run_finetune.py; did you mean 'lora_rank'?" in msgs
    _, _, msgs = verdict(CORPUS / "wrong_types.json")
    assert "expected an integer, got '10'" in msgs
    _, _, msgs = verdict(CORPUS / "bad_choices.json")
    assert "'cosin' is not one of linear, cosine, constant, constant_with_warmup, polynomial" in msgs
    _, _, msgs = verdict(CORPUS / "llama_ptq.json")
    assert "llm/run_quantization.py" in msgs[0] and "do_ptq" in msgs[0] and "paddle-studio quantize" in msgs[0]
    _, _, msgs = verdict(CORPUS / "not_json.json")
    assert "line 2, column" in msgs[0]
    _, _, msgs = verdict(CORPUS / "llama_lora.json")
    assert any("meta-llama/Meta-Llama-3-8B is a model hub id" in m for m in msgs)


def test_the_table_is_read_from_the_installed_paddlenlp():
    """Not a hand list: every key of the wheel's ModelConfig / DataConfig / SFTConfig is known, with
    the enum choices the wheel defines."""
    import dataclasses

    from paddlenlp.trl import DataConfig, ModelConfig, SFTConfig

    t = upstream.table()
    for cls in (ModelConfig, DataConfig, SFTConfig):
        for f in dataclasses.fields(cls):
            if f.init:
                assert f.name in t, f.name
    assert t["evaluation_strategy"]["choices"] == ["no", "steps", "epoch"]
    assert t["device"]["choices"] == ["cpu", "gpu", "xpu", "npu"]


def test_cli_check_exits_1_with_every_problem_and_no_traceback(tmp_path):
    r = subprocess.run([sys.executable, "-m", "core.cli", "config", "check", str(CORPUS / "typo_keys.json"), "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    out = json.loads(r.stdout)
    assert not out["ok"] and [p["field"] for p in out["problems"]] == ["lora_rnak", "learnign_rate"]


@pytest.mark.parametrize("peft", ["lora_config.json", "prefix_config.json", "vera_config.json", "lokr_config.json"])
def test_an_adapter_trained_upstream_names_its_base(tmp_path, peft):
    from core.models import loading

    (tmp_path / peft).write_text(json.dumps({"base_model_name_or_path": "/models/llama-base", "r": 8}))
    assert loading.base_of(tmp_path) == "/models/llama-base"
    (tmp_path / "studio_model.json").write_text(json.dumps({"base": "/models/studio-base"}))
    assert loading.base_of(tmp_path) == "/models/studio-base"  # what studio training recorded wins


def test_a_run_config_says_which_device_it_is_for(workspace_home, demo_home):
    """Upstream defaults device to gpu and stops on a CPU machine: the studio writes it."""
    from core.train import runs

    (workspace_home / "models").mkdir(parents=True)
    (workspace_home / "datasets").mkdir()
    (workspace_home / "models" / "demo-base").symlink_to(demo_home / "models" / "demo-base")
    (workspace_home / "datasets" / "demo").symlink_to(demo_home / "datasets" / "demo")
    run_id = runs.create(config.load_preset("demo-lora", workspace_home))
    flat = json.loads((runs.run_dir(run_id) / "config.json").read_text())
    from core import system

    assert flat["device"] == ("gpu" if system.gpus() else "cpu")
    assert upstream.problems(flat) == []  # what the studio writes passes the upstream-strict check


@pytest.mark.slow
def test_a_studio_written_config_trains_under_an_upstream_style_entry(workspace_home, demo_home, tmp_path):
    """config.json of a studio run, unchanged, through tests/upstream_finetune.py (only the
    paddlenlp wheel: strict PdArgumentParser, load_dataset("json"), SFTTrainer): 5 steps train.
    The dataset is imported by the studio, so its train.json has one shape (the demo's mixes)."""
    from core.data import datasets
    from core.train import runs

    (workspace_home / "models").mkdir(parents=True)
    (workspace_home / "models" / "demo-base").symlink_to(demo_home / "models" / "demo-base")
    datasets.import_dataset(demo_home / "datasets" / "demo", "demo")
    cfg = config.load_preset("demo-lora", workspace_home)
    cfg.training.max_steps = 5
    cfg.training.evaluation_strategy = "no"
    cfg.training.save_strategy = "no"
    run_id = runs.create(cfg)
    path = runs.run_dir(run_id) / "config.json"
    written = path.read_text()
    r = subprocess.run([sys.executable, str(ROOT / "tests" / "upstream_finetune.py"), str(path)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["steps"] == 5 and len(out["losses"]) == 5 and all(x == x and x > 0 for x in out["losses"]), out
    assert path.read_text() == written  # unchanged
    # and upstream's parser refuses a key it does not know, as the studio's check does
    bad = tmp_path / "typo.json"
    bad.write_text(json.dumps({**json.loads(written), "lora_rnak": 8}))
    r = subprocess.run([sys.executable, str(ROOT / "tests" / "upstream_finetune.py"), str(bad)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode != 0 and "lora_rnak" in r.stderr


@pytest.mark.parametrize("name", sorted(n for n, (kind, _) in EXPECT.items() if kind == "accept"))
def test_round_trip_is_lossless(name):
    """Read then written back: exactly the file's keys and values, plus only the keys the studio
    always writes; an explicit do_eval: false stays false; left-out keys mean upstream's defaults."""
    d = json.loads((CORPUS / f"{name}.json").read_text())
    cfg = config.RunConfig.from_paddlenlp(d)
    out = cfg.to_paddlenlp()
    extra = set(out) - set(d)
    assert extra <= {"report_to", "disable_tqdm", "do_train"}, extra
    for k, v in d.items():
        assert out[k] == v, (k, out[k], v)
    flipped = {**d, "do_eval": False}
    assert config.RunConfig.from_paddlenlp(flipped).to_paddlenlp()["do_eval"] is False
    bare = config.RunConfig.from_paddlenlp({"model_name_or_path": "m", "dataset_name_or_path": "d"})
    assert bare.training.evaluation_strategy == upstream.default("evaluation_strategy")
    assert bare.training.learning_rate == upstream.default("learning_rate")
    assert bare.method.num_prefix_tokens == upstream.default("num_prefix_tokens")


@pytest.mark.parametrize("name", [f"{fam}_{kind}" for fam in ("llama", "qwen2", "chatglm2") for kind in ("ptq", "gptq")])
def test_quantization_configs_become_quantize_plans(name):
    """Quantization files are not refused: they are read as Quantize jobs with the preset upstream's
    keys mean; on this machine only the hub id and the missing ./data stop them."""
    from core.quant import pipeline, presets

    plan = pipeline.plan_from_paddlenlp(CORPUS / f"{name}.json")
    assert {(p["code"], p["field"]) for p in plan["problems"]} == {("hub_id", "model_name_or_path"),
                                                                   ("path_missing", "dataset_name_or_path")}
    d = json.loads((CORPUS / f"{name}.json").read_text())
    preset, notes, problems = presets.from_paddlenlp(d)
    assert not problems
    if name.endswith("gptq"):
        assert (preset["algorithm"], preset["method"], preset["calib_steps"]) == ("weight_only_int4", "gptq", d["gptq_step"])
    else:
        assert (preset["algorithm"], preset["method"], preset["calib_steps"]) == ("a8w8", "ptq", d["ptq_step"])
        assert preset["smooth"] == bool(d.get("smooth")) and preset["shift"] == bool(d.get("shift"))
        assert any("piecewise alpha search is not done" in n for n in notes)
    assert plan["name"] == Path(d["output_dir"]).name


def test_entry_is_told_by_its_own_keys_only():
    assert upstream.entry_of({"loss_type": "ce", "model_name_or_path": "m"}) is None  # not a DPO loss
    assert upstream.entry_of({"loss_type": "sigmoid"})[0] == "dpo"
    assert upstream.entry_of({"split": "949,50,1", "dataset_name_or_path": "d"}) is None
    assert upstream.entry_of({"split": "949,50,1", "input_dir": "d"})[2] == ["input_dir", "split"]
    assert upstream.entry_of({"do_ptq": False, "reft": False}) is None  # switched off: still fine-tuning
