"""A corpus of upstream-shaped PaddleNLP argument files (tests/upstream_configs/, written from the
keys PaddleNLP documents for llm/run_finetune.py, run_pretrain.py, alignment/dpo and
run_quantization.py, for LLaMA, Qwen2 and ChatGLM2, and copied from upstream's own llm/config files
for the other entries, see SOURCES) and the verdict the studio must give each: accepted by the
upstream-strict parser (then only machine-specific refusals: hub ids, the missing ./data folder,
GPU-only switches on this CPU), or one precise refusal naming what is wrong."""

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
# run_dpo.py's and run_kto.py's files (stage1, flash attention and flash_mask, bf16, tensor parallel 8 on one process)
GPU_PREFERENCE = (GPU_SFT - {("needs_gpu", "parallel.sharding")}) | {("needs_gpu", "training.flash_mask"),
                                                                   ("needs_gpu", "training.use_flash_attention")}
# file -> ("accept", the check's (code, field) pairs on a CPU machine) | ("refuse", [(code, field, detail)])
EXPECT = {
    **{f"{fam}_sft": ("accept", GPU_SFT) for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_lora": ("accept", GPU_LORA) for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_ptq": ("refuse", [("other_entry", "", "quantization")]) for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_gptq": ("refuse", [("other_entry", "", "quantization")]) for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_dpo": ("accept", GPU_PREFERENCE) for fam in ("llama", "qwen2", "chatglm2")},  # the dpo method
    **{f"{fam}_qlora": ("accept", HUB_AND_DATA | {("needs_gpu", "method.weight_quantize_algo"), ("needs_gpu", "training.bf16")})
       for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_prefix": ("accept", HUB_AND_DATA | {("needs_gpu", "training.bf16")}) for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_vera": ("accept", HUB_AND_DATA) for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_lokr": ("accept", HUB_AND_DATA) for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_reft": ("accept", HUB_AND_DATA | {("needs_gpu", "training.bf16")}) for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_pretrain": ("refuse", [("other_entry", "", "pretrain")]) for fam in ("llama", "qwen2", "chatglm2")},
    # ChatGLM-6B v1's own files (llm/config/chatglm, SOURCES): fp16 and tensor parallel 4 are this machine's refusals
    "chatglm_sft": ("accept", HUB_AND_DATA | {("needs_gpu", "training.fp16"), ("needs_gpu", "parallel.tensor_parallel_degree"),
                                              ("degrees_do_not_divide", "parallel.tensor_parallel_degree")}),
    "chatglm_lora": ("accept", HUB_AND_DATA | {("needs_gpu", "training.fp16")}),
    "chatglm_prefix": ("accept", HUB_AND_DATA | {("needs_gpu", "training.fp16")}),  # P-Tuning v2 (pt_argument.json)
    "chatglm_ptq": ("refuse", [("other_entry", "", "quantization")]),
    "chatglm_gptq": ("refuse", [("other_entry", "", "quantization")]),
    # the other entries' files, from upstream's llm/config (SOURCES): each named for its script
    "llama_kto": ("accept", GPU_PREFERENCE),  # run_kto.py's keys (told by the file name): the kto method
    "llama_kto_lora": ("accept", GPU_PREFERENCE),
    "llama_flashmask_dpo": ("accept", GPU_SFT | {("needs_gpu", "training.flash_mask"),  # DPO with no beta
                                                 ("needs_gpu", "training.use_flash_attention")}),
    "llama_ppo": ("refuse", [("other_entry", "", "ppo")]),
    "llama_grpo": ("refuse", [("other_entry", "", "grpo")]),
    "qwen_grpo": ("refuse", [("other_entry", "", "grpo")]),
    "llama_rm": ("refuse", [("other_entry", "", "reward")]),
    "llama_rm_flashmask": ("refuse", [("other_entry", "", "reward_flashmask")]),
    "qwen_emb": ("refuse", [("other_entry", "", "embedding")]),
    "llama_fp8_ptq": ("refuse", [("other_entry", "", "quantization")]),
    "typo_keys": ("refuse", [("unknown_key", "lora_rnak", "lora_rank"), ("unknown_key", "learnign_rate", "learning_rate")]),
    # values upstream's parser stops on ("fast" for a number, 2 for a switch, 10.5 for an integer)
    "wrong_types": ("refuse", [("bad_type", "learning_rate", None), ("bad_type", "lora", None),
                               ("bad_type", "max_steps", None)]),
    # values upstream's parser converts ("3e-4", "yes", "10", ["cosine"], 1): read as it reads them
    "loose_values": ("accept", HUB_AND_DATA | {("needs_gpu", "training.bf16"),
                                               ("sharding_shards_nothing", "parallel.sharding_parallel_degree")}),
    # what upstream reads in a way nobody means: a key prefix argparse expands, [] for a switch, 5 for a path
    "key_prefix": ("refuse", [("abbreviated_key", "learning_rat", "learning_rate")]),
    "odd_values": ("refuse", [("reads_as", "logging_dir", None), ("reads_as", "lora", None)]),
    "bad_choices": ("refuse", [("bad_choice", "evaluation_strategy", None), ("bad_choice", "fp16_opt_level", None),
                               ("bad_choice", "lr_scheduler_type", None)]),
    "top_level_array": ("refuse", [("not_an_object", "", None)]),
    "not_json": ("refuse", [("bad_json", "", None)]),
}


def verdict(path: Path):
    try:
        cfg = config.load_run_file(path)
    except config.FileProblems as e:
        return "refuse", sorted((p["code"], p["field"], p["params"].get("entry") or p["params"].get("suggestion")
                                 or p["params"].get("full")) for p in e.problems), [p["message"] for p in e.problems]
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
    assert "expected an integer, got 10.5" in msgs and "expected true or false, got 2" in msgs
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
    d, found = upstream.read(json.loads((CORPUS / f"{name}.json").read_text()), name=f"{name}.json")
    assert not found  # the values as upstream's parser reads them ("10" is 10)
    told = (upstream.entry_of(d, f"{name}.json") or ("",))[0]
    cfg = config.RunConfig.from_paddlenlp(d, entry=told)
    out = cfg.to_paddlenlp()
    extra = set(out) - set(d)
    # the keys that say which script a file is for, at run_dpo.py's / run_kto.py's defaults
    told_by = {"dpo": ("beta", "loss_type"), "kto": ("beta", "desirable_weight", "undesirable_weight")}.get(told, ())
    table = upstream.KTO_ARGUMENT_KEYS if told == "kto" else upstream.DPO_ARGUMENT_KEYS
    own_defaults = {k for k in told_by if out.get(k) == table[k][2]}
    assert extra <= {"report_to", "disable_tqdm", "do_train"} | own_defaults, extra
    for k, v in d.items():
        assert out[k] == v, (k, out[k], v)
    flipped = {**d, "do_eval": False}
    assert config.RunConfig.from_paddlenlp(flipped).to_paddlenlp()["do_eval"] is False
    bare = config.RunConfig.from_paddlenlp({"model_name_or_path": "m", "dataset_name_or_path": "d"})
    assert bare.training.evaluation_strategy == upstream.default("evaluation_strategy")
    assert bare.training.learning_rate == upstream.default("learning_rate")
    assert bare.method.num_prefix_tokens == upstream.default("num_prefix_tokens")


@pytest.mark.parametrize("name", [f"{fam}_{kind}" for fam in ("llama", "qwen2", "chatglm2", "chatglm") for kind in ("ptq", "gptq")])
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
        assert any("piecewise alpha search is not done" in n for n in notes) == bool(d.get("smooth_piecewise_search"))
    assert plan["name"] == Path(d["output_dir"]).name


def test_entry_is_told_by_its_own_keys_only():
    assert upstream.entry_of({"loss_type": "ce", "model_name_or_path": "m"}) is None  # not a DPO loss
    assert upstream.entry_of({"loss_type": "sigmoid"})[0] == "dpo"
    assert upstream.entry_of({"split": "949,50,1", "dataset_name_or_path": "d"}) is None
    assert upstream.entry_of({"split": "949,50,1", "input_dir": "d"})[2] == ["input_dir", "split"]
    assert upstream.entry_of({"do_ptq": False, "reft": False}) is None  # switched off: still fine-tuning


# Where the other entries' corpus files come from: PaddlePaddle/PaddleNLP, path and commit. Copied as
# they are, except llama_fp8_ptq: that commit's file is a later shape ("quant_type": "W8A8" with
# "use_fp8": "WA"); 3.0.0b4's QuantArgument names FP8 in quant_type (a8w8_fp8), as written here.
SOURCES = {
    "llama_kto": ("llm/config/llama/kto_argument.json", "863ff0b3aea6bb43dcd86918507e36e0e24a1ad0"),
    "llama_kto_lora": ("llm/config/llama/kto_lora_argument.json", "e0064ad939f222fe4cbb86e79dbff59760d2314c"),
    "llama_flashmask_dpo": ("llm/config/llama/flashmask/dpo.json", "e31a5dcd8881bddb2cb71a6d066d2a8c8484cf48"),
    "llama_ppo": ("llm/config/llama/ppo_argument.json", "aa4ae1a17b673454013c07b69cd2b214fabf19ec"),
    "llama_grpo": ("llm/config/llama/grpo_argument.json", "3995eb8793e1d908e681cfff909003b16db3bc25"),
    "qwen_grpo": ("llm/config/qwen/grpo_argument.json", "01ed9dfd5ea9d66f83cf2c817df2c7b692e23d63"),
    "llama_rm": ("llm/config/llama/rm_argument.json", "c9e1488476ca76a170ef6f09aaf1495f4fc7ac67"),
    "llama_rm_flashmask": ("llm/config/llama/rm_flashmask_argument.json", "2214f6cf2fc33e2773f3a11939ce3e321d7f4bb3"),
    "qwen_emb": ("llm/config/qwen/emb_argument.json", "0a618b0dceb3b8a33117ff4fd9436cf560164694"),
    "llama_fp8_ptq": ("llm/config/llama/fp8_ptq_argument.json", "174eda68aec674d585251947d929bd0d28643f7d"),
    "chatglm_sft": ("llm/config/chatglm/sft_argument.json", "a1261548959098a55ed32f42fc5499ec4c237050"),
    "chatglm_lora": ("llm/config/chatglm/lora_argument.json", "689f231bab980dac2280f097beb37574e0c2261d"),
    "chatglm_prefix": ("llm/config/chatglm/pt_argument.json", "34d04687275b373328d8f3433429881b4c7c3f3c"),
    "chatglm_ptq": ("llm/config/chatglm/ptq_argument.json", "9e267e6eceec248729f4587c74b64dfdf7348d0f"),
    "chatglm_gptq": ("llm/config/chatglm/gptq_argument.json", "a1261548959098a55ed32f42fc5499ec4c237050"),
}
# the entry each corpus file is for (None: llm/run_finetune.py's own)
ENTRY = {
    **{f"{fam}_{kind}": None for fam in ("llama", "qwen2", "chatglm2")
       for kind in ("sft", "lora", "qlora", "prefix", "vera", "lokr", "reft")},
    **{f"{fam}_{kind}": "quantization" for fam in ("llama", "qwen2", "chatglm2") for kind in ("ptq", "gptq")},
    **{f"{fam}_dpo": "dpo" for fam in ("llama", "qwen2", "chatglm2")},
    **{f"{fam}_pretrain": "pretrain" for fam in ("llama", "qwen2", "chatglm2")},
    "llama_kto": "kto", "llama_kto_lora": "kto", "llama_flashmask_dpo": "dpo", "llama_ppo": "ppo",
    "llama_grpo": "grpo", "qwen_grpo": "grpo", "llama_rm": "reward", "llama_rm_flashmask": "reward_flashmask",
    "qwen_emb": "embedding", "llama_fp8_ptq": "quantization",
    "chatglm_sft": None, "chatglm_lora": None, "chatglm_prefix": None, "chatglm_ptq": "quantization", "chatglm_gptq": "quantization",
    **{n: None for n in ("typo_keys", "wrong_types", "loose_values", "key_prefix", "odd_values", "bad_choices")},
}


def test_every_upstream_file_shape_is_named_for_its_entry():
    """Each file of the corpus, by its keys and (where upstream's scripts read the same keys) its
    name: KTO files are not DPO's, a DPO file without beta and GRPO files are not reward models',
    PPO / reward / embedding files are named for their scripts, FP8 files are quantization's."""
    files = {p.stem: json.loads(p.read_text()) for p in CORPUS.glob("*.json") if p.stem in ENTRY}
    assert set(files) == set(ENTRY)
    named = {stem: (upstream.entry_of(d, f"{stem}.json") or (None,))[0] for stem, d in files.items()}
    assert named == ENTRY
    assert set(SOURCES) <= set(ENTRY)


def test_the_file_name_tells_only_where_the_keys_cannot():
    kto = json.loads((CORPUS / "llama_kto.json").read_text())  # keys run_dpo.py reads too
    assert upstream.entry_of(kto, "kto_argument.json")[0] == "kto"
    assert upstream.entry_of(kto, "kto_lora_argument.json")[0] == "kto"
    assert upstream.entry_of(kto)[0] == "dpo" and upstream.entry_of(kto, "dpo.json")[0] == "dpo"
    assert upstream.entry_of(kto, "rm_flashmask_argument.json")[0] == "reward_flashmask"
    assert upstream.entry_of({**kto, "desirable_weight": 1.0})[0] == "kto"  # a key only KTO reads
    assert upstream.entry_of({**kto, "loss_type": "ipo"}, "kto_argument.json")[0] == "dpo"  # one only DPO reads
    assert upstream.entry_of({"loss_type": "sequence-wise", "model_name_or_path": "m"})[0] == "reward"
    assert upstream.entry_of({"max_query_len": 512, "dataset_name_or_path": "d"})[0] == "embedding"
    assert upstream.entry_of({"actor_model_name_or_path": "m", "rl_algorithm": "grpo"})[0] == "grpo"
    assert upstream.entry_of({"actor_model_name_or_path": "m"})[0] == "ppo"
    # a switch as upstream reads it: "false" and 0 are off
    assert upstream.entry_of({"do_ptq": "false", "dataset_name_or_path": "d"}) is None
    assert upstream.entry_of({"do_ptq": 0, "dataset_name_or_path": "d"}) is None
    assert upstream.entry_of({"do_ptq": "true"})[0] == "quantization"
    # the same keys: the kto method from a KTO-named file, the dpo method from any other name
    assert config.load_run_file(CORPUS / "llama_kto.json").method.method == "kto"
    assert config.load_run_file(CORPUS / "llama_dpo.json").method.method == "dpo"
    for name, script in (("llama_ppo", "run_ppo.py"), ("llama_rm", "rm/run_reward.py"),
                         ("qwen_emb", "llm/run_embedding.py"), ("llama_grpo", "GRPO")):
        _, _, msgs = verdict(CORPUS / f"{name}.json")
        assert script in msgs[0] and "the studio does not" in msgs[0], msgs


def test_an_fp8_file_is_refused_for_fp8_not_for_its_abs_max():
    """Upstream's FP8 files use abs_max for weights and cache KV: a value upstream accepts. What
    the studio lacks is FP8 itself, and the refusal says so."""
    from core.quant import pipeline

    plan = pipeline.plan_from_paddlenlp(CORPUS / "llama_fp8_ptq.json")
    assert {(p["code"], p["field"]) for p in plan["problems"]} == {
        ("not_in_engine", "quant_type"), ("hub_id", "model_name_or_path"), ("path_missing", "dataset_name_or_path")}
    assert "no FP8" in next(p["message"] for p in plan["problems"] if p["field"] == "quant_type")
    _, _, msgs = verdict(CORPUS / "llama_fp8_ptq.json")
    assert "the studio does not run FP8 quantization" in msgs[0]


# llm/alignment/dpo/dpo_argument.py of PaddleNLP 9f438b8a020692b76ea61b1a2369f0153c3cf619 (the shape
# of 3.0.0b4: DPOTrainingArguments under @llmmetaclass, no normalize_logps, no
# use_attn_mask_startend_row_indices), not in the wheel: the fields each of its classes declares.
RUN_DPO_FILE_KEYS = {
    "DPOTrainingArguments": ["unified_checkpoint", "unified_checkpoint_config", "autotuner_benchmark", "benchmark"],
    "DPOConfig": ["beta", "simpo_gamma", "label_smoothing", "loss_type", "pref_loss_ratio", "sft_loss_ratio",
                  "dpop_lambda", "ref_model_update_steps", "reference_free", "lora"],
    "DPODataArgument": ["train_dataset_path", "dev_dataset_path", "max_seq_len", "max_prompt_len",
                        "greedy_zero_padding", "lazy"],
    "DPOModelArgument": ["model_name_or_path", "tokenizer_name_or_path", "flash_mask", "weight_quantize_algo",
                         "fuse_attention_qkv", "fuse_attention_ffn", "lora_rank", "lora_path", "rslora",
                         "lora_plus_scale", "lora_alpha", "rslora_plus", "use_quick_lora"],
}


def test_the_dpo_table_is_what_run_dpos_parser_accepts():
    """run_dpo.py's keys: the wheel's TrainingArguments under its @llmmetaclass (built here as
    dpo_argument.py builds DPOTrainingArguments) plus the fields dpo_argument.py declares."""
    import dataclasses
    from typing import Optional

    from paddlenlp.trainer import TrainingArguments
    from paddlenlp.transformers.configuration_utils import llmmetaclass

    @dataclasses.dataclass
    @llmmetaclass
    class MetaTrainingArguments(TrainingArguments):
        unified_checkpoint: bool = True
        unified_checkpoint_config: Optional[str] = ""
        autotuner_benchmark: bool = False
        benchmark: bool = False

    accepted = {f.name for f in dataclasses.fields(MetaTrainingArguments) if f.init}
    accepted |= {k for keys in RUN_DPO_FILE_KEYS.values() for k in keys}
    t = upstream.dpo_table()
    assert set(t) == accepted, (sorted(set(t) - accepted), sorted(accepted - set(t)))
    for key in ("tensor_parallel_output", "use_fused_rope", "recompute_use_reentrant", "virtual_pp_degree",
                "fuse_attention_qkv", "use_quick_lora"):
        assert key in t, key
    assert "normalize_logps" not in t and "use_attn_mask_startend_row_indices" not in t
    assert t["use_fused_rope"]["type"] == "bool" and t["virtual_pp_degree"]["type"] == "int"
    assert t["unified_checkpoint"]["default"] is True  # DPOTrainingArguments' own default wins
    assert upstream.problems({"normalize_logps": True, "beta": 0.1})[0]["code"] == "unknown_key"
    assert upstream.problems({"use_fused_rope": True, "tensor_parallel_output": False, "beta": 0.1}) == []


# llm/alignment/kto/kto_argument.py of PaddleNLP ef2ffc3daa22f1c25d8df3948ebfe37f4b8e23b0, not in the
# wheel: the fields each of its classes declares (KTOTrainingArguments: @llmmetaclass, as DPO's).
RUN_KTO_FILE_KEYS = {
    "KTOTrainingArguments": ["unified_checkpoint", "unified_checkpoint_config", "autotuner_benchmark", "benchmark"],
    "KTOConfig": ["beta", "desirable_weight", "undesirable_weight", "lora"],
    "KTODataArgument": ["train_dataset_path", "dev_dataset_path", "max_seq_len", "max_prompt_len", "greedy_zero_padding"],
    "KTOModelArgument": ["model_name_or_path", "tokenizer_name_or_path", "flash_mask", "weight_quantize_algo",
                         "fuse_attention_qkv", "fuse_attention_ffn", "lora_rank", "lora_path", "rslora",
                         "lora_plus_scale", "lora_alpha", "rslora_plus", "use_quick_lora"],
}


def test_the_kto_table_is_what_run_ktos_parser_accepts():
    """run_kto.py's keys: the wheel's TrainingArguments under @llmmetaclass plus the fields
    kto_argument.py declares, and "lazy" (upstream's own kto_argument.json has it; argparse expands
    it to lazy_data_processing); none of DPO's own keys."""
    import dataclasses

    from paddlenlp.trainer import TrainingArguments
    from paddlenlp.transformers.configuration_utils import llmmetaclass

    @dataclasses.dataclass
    @llmmetaclass
    class MetaTrainingArguments(TrainingArguments):
        unified_checkpoint: bool = True

    accepted = {f.name for f in dataclasses.fields(MetaTrainingArguments) if f.init}
    accepted |= {k for keys in RUN_KTO_FILE_KEYS.values() for k in keys} | {"lazy"}
    t = upstream.kto_table()
    assert set(t) == accepted, (sorted(set(t) - accepted), sorted(accepted - set(t)))
    assert {k: list(v) for k, v in upstream.KTO_CLASSES.items()} == RUN_KTO_FILE_KEYS
    assert not {"loss_type", "simpo_gamma", "sft_loss_ratio", "reference_free"} & set(t)
    assert t["unified_checkpoint"]["default"] is True and t["desirable_weight"]["type"] == "float"
    assert t["lazy"]["type"] == "bool" and "lazy_data_processing" in t["lazy"]["owner"]


# Item by item, what upstream's PdArgumentParser (3.0.0b4, run_finetune.py's classes) makes of a JSON
# value, and what the studio does: accept with the same value, or refuse ("reads_as" /
# "abbreviated_key": upstream takes it, as `taken`; "bad_type" / "unknown_key": upstream stops).
PARSER_CASES = [
    ("max_steps", "3", "accept", 3),
    ("max_steps", [3], "accept", 3),
    ("learning_rate", "3e-4", "accept", 3e-4),
    ("learning_rate", 1, "accept", 1.0),
    ("lora", 1, "accept", True),
    ("lora", 0, "accept", False),
    ("lora", "true", "accept", True),
    ("lora", "False", "accept", False),
    ("lora", "yes", "accept", True),
    ("lr_scheduler_type", ["cosine"], "accept", "cosine"),
    ("report_to", "visualdl", "accept", ["visualdl"]),
    ("learning_rat", 1e-4, "abbreviated_key", ("learning_rate", 1e-4)),
    ("lora_ran", 4, "abbreviated_key", ("lora_rank", 4)),
    ("lora", [], "reads_as", True),
    ("logging_dir", 5, "reads_as", "5"),
    ("max_steps", 3.0, "bad_type", None),
    ("max_steps", True, "bad_type", None),
    ("lora", 2, "bad_type", None),
    ("lr_scheduler_type", ["cosine", "linear"], "bad_type", None),
    ("lr_scheduler_type", [], "bad_type", None),
    ("evaluation_strategy", "sometimes", "bad_choice", None),
    ("lor", True, "unknown_key", None),  # ambiguous prefix: argparse stops
]


@pytest.fixture(scope="module")
def upstream_parse():
    """Parse a dict as upstream's run_finetune.py parses its JSON file: the value of a key, or None
    where the parser stops."""
    import contextlib
    import io
    import tempfile

    from paddlenlp.trainer import PdArgumentParser
    from paddlenlp.trl import DataConfig, ModelConfig, SFTConfig

    parser = PdArgumentParser((ModelConfig, DataConfig, SFTConfig))
    with tempfile.TemporaryDirectory() as tmp:
        def parse(extra: dict, key: str):
            path = Path(tmp) / "args.json"
            path.write_text(json.dumps({"model_name_or_path": "m", "dataset_name_or_path": "d", "device": "cpu",
                                        "output_dir": str(Path(tmp) / "out"), **extra}))
            try:
                with contextlib.redirect_stderr(io.StringIO()):
                    parsed = parser.parse_json_file(str(path))
            except (SystemExit, ValueError):
                return None
            value = next(getattr(o, key) for o in parsed if hasattr(o, key))
            return getattr(value, "value", value)  # an enum: its value

        yield parse


@pytest.mark.parametrize("key,value,verdict_,want", PARSER_CASES, ids=[f"{k}={v!r}" for k, v, *_ in PARSER_CASES])
def test_values_are_read_as_upstreams_parser_reads_them(upstream_parse, key, value, verdict_, want):
    out, found = upstream.read({"model_name_or_path": "m", key: value})
    codes = [(p["code"], p["field"]) for p in found]
    if verdict_ == "accept":
        assert upstream_parse({key: value}, key) == want
        assert codes == [] and upstream_parse({key: out[key]}, key) == want  # what the studio holds means the same
        assert upstream.problems({key: out[key]}) == []  # and is written in the plain form
        assert [p["code"] for p in upstream.problems({key: value})] == ([] if out[key] is value else ["reads_as"])
    elif verdict_ == "abbreviated_key":
        full, taken = want
        assert upstream_parse({key: value}, full) == taken
        assert codes == [("abbreviated_key", key)]
        assert upstream.message(found[0]) == (f"upstream's parser takes this as {full!r} (argparse expands a unique "
                                              f"prefix of an argument name); write {full!r}")
    elif verdict_ == "reads_as":
        assert upstream_parse({key: value}, key) == want
        assert codes == [("reads_as", key)]
        taken = json.dumps(want)
        assert upstream.message(found[0]) == f"upstream's parser takes this as {taken}; write {taken}"
    else:
        assert upstream_parse({key: value}, key.replace("lor", "lora") if key == "lor" else key) is None
        assert codes == [(verdict_, key)]


def test_a_warmup_ratio_outside_0_1_is_refused_as_upstream_refuses_it(upstream_parse):
    for bad in (-0.5, 1.5):
        assert upstream_parse({"warmup_ratio": bad}, "warmup_ratio") is None  # "warmup_ratio must lie in range [0,1]"
        d, found = upstream.read({"model_name_or_path": "m", "dataset_name_or_path": "d", "warmup_ratio": bad})
        assert found == []  # a number: the parser takes it; TrainingArguments then stops, and so does the check
        probs = config.check(config.RunConfig.from_paddlenlp(d), has_gpu=False)
        assert "extra.warmup_ratio" in {p["field"] for p in probs}


def test_a_file_with_values_upstream_converts_loads_with_its_values():
    cfg = config.load_run_file(CORPUS / "loose_values.json")
    assert (cfg.training.learning_rate, cfg.training.max_steps, cfg.method.method) == (3e-4, 10, "lora")
    out = cfg.to_paddlenlp()
    assert (out["learning_rate"], out["max_steps"], out["lora"], out["lr_scheduler_type"], out["do_eval"]) == \
        (3e-4, 10, True, "cosine", True)
    assert upstream.problems(out) == []
