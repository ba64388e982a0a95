"""What PaddleNLP's own entry scripts accept: every argument key, its type and choices, read from
the installed paddlenlp's argument dataclasses; and which upstream entry a config file is for.

``read(d)`` reads a PaddleNLP argument JSON the way upstream's ``PdArgumentParser.parse_json_file``
does (3.0.0b4: every JSON value becomes command-line words, ``str(v)``, and argparse converts
them): ``"max_steps": "3"`` is 3, ``"lora": 1`` / ``"true"`` is true, ``["cosine"]`` is "cosine".
It refuses what upstream refuses (unknown keys, with a "did you mean"; values argparse cannot
convert; a list with several values for one) and, with "upstream's parser takes this as …; write
…", what upstream would read in a way nobody means (a unique key prefix that argparse expands, a
number where a text goes, ``[]`` for a switch); values outside their choices too. Every problem at
once, never a traceback.

Reading the dataclasses needs ``import paddlenlp`` (seconds, hundreds of MB): the tables are built
once per paddlenlp version in a subprocess and cached as JSON, so the studio process never
imports paddlenlp for them.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# The fine-tuning entry (llm/run_finetune.py, paddlenlp 3.0.0b4) parses these dataclasses. The
# first three ship in the paddlenlp wheel and are read from it; the last two live in the
# repository's llm/utils/argument.py, which the wheel does not ship, so their keys are listed here.
FINETUNE_CLASSES = ("paddlenlp.trl:ModelConfig", "paddlenlp.trl:DataConfig", "paddlenlp.trl:SFTConfig")
LLM_UTILS_KEYS = {
    "GenerateArgument": {"top_k": ("int", False), "top_p": ("float", False)},
    "ReftArgument": {"layers": ("str", False), "position": ("str", False), "intervention_type": ("str", False),
                     "rank": ("int", False), "act_fn": ("str", True), "add_bias": ("bool", False),
                     "dropout": ("float", False)},
}
# llm/run_quantization.py parses the same classes plus llm/utils/argument.py's QuantArgument (not in
# the wheel either): its keys, types and the choices its help text names.
QUANT_ARGUMENT_KEYS = {
    "quant_type": ("str", False), "fp8_type": ("list", False), "skip_list_names": ("list", False),
    "weight_quant_method": ("str", False), "act_quant_method": ("str", False), "cachekv_quant_method": ("str", False),
    "search_alpha_min": ("float", False), "search_alpha_max": ("float", False), "search_scale_min": ("float", False),
    "search_scale_max": ("float", False), "do_qat": ("bool", False), "do_ptq": ("bool", False), "ptq_step": ("int", False),
    "shift": ("bool", False), "shift_all_linears": ("bool", False), "shift_sampler": ("str", False),
    "shift_step": ("int", False), "smooth": ("bool", False), "smooth_all_linears": ("bool", False),
    "smooth_sampler": ("str", False), "smooth_step": ("int", False), "smooth_piecewise_search": ("bool", False),
    "smooth_k_piece": ("int", False), "smooth_search_piece": ("bool", False), "do_gptq": ("bool", False),
    "gptq_step": ("int", False), "do_awq": ("bool", False), "auto_clip": ("bool", False), "awq_step": ("int", False),
    "autoclip_step": ("int", False), "load_quant_model": ("bool", False), "do_quant_debug": ("bool", False),
    "test_sample": ("str", True),
}
QUANT_CHOICES = {
    "quant_type": ["weight_only_int8", "weight_only_int4", "a8w8", "a8w8c8", "a8w8_fp8", "a8w8c8_fp8"],
    # abs_max too: upstream's FP8 files use it for weights and cache KV (its FP8 observers); the
    # studio's Quantize engine has no FP8, and says so (core/quant/presets.py)
    "weight_quant_method": ["abs_max_channel_wise", "groupwise", "abs_max"], "act_quant_method": ["abs_max", "avg"],
    "cachekv_quant_method": ["abs_max_headwise", "avg_headwise", "abs_max"], "shift_sampler": ["ema", "none"],
    "smooth_sampler": ["multi_step", "none"],
}
QUANTIZATION_SCRIPT = "llm/run_quantization.py"
FINETUNE_SCRIPT = "llm/run_finetune.py"

# llm/alignment/dpo/run_dpo.py parses (DPOModelArgument, DPODataArgument, DPOTrainingArguments,
# DPOConfig) from its llm/alignment/dpo/dpo_argument.py, which the wheel does not ship (the 3.0.0b4
# shape: PaddleNLP commit 9f438b8a020692b76ea61b1a2369f0153c3cf619). DPOTrainingArguments is the
# wheel's TrainingArguments under @llmmetaclass (which adds LlmMetaConfig's switches as fields):
# both are read from the wheel (build_tables); only the fields the file itself declares are listed
# here, key -> (type, None allowed, default). tests/test_upstream_configs.py checks them against a key
# list taken from that file and against the wheel's parser.
DPO_SCRIPT = "llm/alignment/dpo/run_dpo.py"
DPO_CLASSES = {
    "DPOTrainingArguments": {
        "unified_checkpoint": ("bool", False, True), "unified_checkpoint_config": ("str", True, ""),
        "autotuner_benchmark": ("bool", False, False), "benchmark": ("bool", False, False),
    },
    "DPOConfig": {
        "beta": ("float", False, 0.1), "simpo_gamma": ("float", False, 0.5), "label_smoothing": ("float", False, 0.0),
        "loss_type": ("str", False, "sigmoid"), "pref_loss_ratio": ("float", False, 1.0),
        "sft_loss_ratio": ("float", False, 0.0), "dpop_lambda": ("float", False, 50),
        "ref_model_update_steps": ("int", False, -1), "reference_free": ("bool", False, False),
        "lora": ("bool", False, False),
    },
    "DPODataArgument": {
        "train_dataset_path": ("str", False, "./data/train.jsonl"),
        "dev_dataset_path": ("str", False, "./data/dev.jsonl"),
        "max_seq_len": ("int", False, 4096), "max_prompt_len": ("int", False, 2048),
        "greedy_zero_padding": ("bool", False, False), "lazy": ("bool", False, False),
    },
    "DPOModelArgument": {
        "model_name_or_path": ("str", True, None), "tokenizer_name_or_path": ("str", True, None),
        "flash_mask": ("bool", False, False), "weight_quantize_algo": ("str", True, None),
        "fuse_attention_qkv": ("bool", True, None), "fuse_attention_ffn": ("bool", True, None),
        "lora_rank": ("int", False, 8), "lora_path": ("str", True, None), "rslora": ("bool", False, False),
        "lora_plus_scale": ("float", False, 1.0), "lora_alpha": ("int", False, -1),
        "rslora_plus": ("bool", False, False),
        "use_quick_lora": ("bool", False, True),
    },
}
# run_dpo.py's own keys -> (type, None allowed, default): what a key a file leaves out means
DPO_ARGUMENT_KEYS = {k: v for fields_ in DPO_CLASSES.values() for k, v in fields_.items()}
# run_dpo.py's losses; "orpo" is its alias for "or" with sft_loss_ratio 1 (core.train.dpo.dpo_config)
DPO_LOSSES = ("sigmoid", "hinge", "ipo", "kto_pair", "sppo_hard", "nca_pair", "dpop", "or", "simpo", "orpo")
DPO_CHOICES = {"loss_type": list(DPO_LOSSES)}

# llm/alignment/kto/run_kto.py parses (KTOModelArgument, KTODataArgument, KTOTrainingArguments,
# KTOConfig) from its llm/alignment/kto/kto_argument.py, which the wheel does not ship either (read at
# PaddleNLP commit ef2ffc3daa22f1c25d8df3948ebfe37f4b8e23b0; its trainer, criterion and data pieces are
# the wheel's paddlenlp.trl.KTOTrainer, KTOCriterion, preprocess_preference_data). KTOTrainingArguments
# is the wheel's TrainingArguments under @llmmetaclass, as DPO's; the fields the file declares:
KTO_SCRIPT = "llm/alignment/kto/run_kto.py"
KTO_CLASSES = {
    "KTOTrainingArguments": {
        "unified_checkpoint": ("bool", False, True), "unified_checkpoint_config": ("str", True, ""),
        "autotuner_benchmark": ("bool", False, False), "benchmark": ("bool", False, False),
    },
    "KTOConfig": {
        "beta": ("float", False, 0.1), "desirable_weight": ("float", False, 1.0),
        "undesirable_weight": ("float", False, 1.0), "lora": ("bool", False, False),
    },
    "KTODataArgument": {
        "train_dataset_path": ("str", False, "./data/train.jsonl"),
        "dev_dataset_path": ("str", False, "./data/dev.jsonl"),
        "max_seq_len": ("int", False, 4096), "max_prompt_len": ("int", False, 2048),
        "greedy_zero_padding": ("bool", False, False),
    },
    "KTOModelArgument": {
        "model_name_or_path": ("str", True, None), "tokenizer_name_or_path": ("str", True, None),
        "flash_mask": ("bool", False, False), "weight_quantize_algo": ("str", True, None),
        "fuse_attention_qkv": ("bool", True, None), "fuse_attention_ffn": ("bool", True, None),
        "lora_rank": ("int", False, 8), "lora_path": ("str", True, None), "rslora": ("bool", False, False),
        "lora_plus_scale": ("float", False, 1.0), "lora_alpha": ("int", False, -1),
        "rslora_plus": ("bool", False, False), "use_quick_lora": ("bool", False, True),
    },
}
KTO_ARGUMENT_KEYS = {k: v for fields_ in KTO_CLASSES.values() for k, v in fields_.items()}
# Upstream's own llm/config/llama/kto_argument.json (and kto_lora_argument.json) carry "lazy": false,
# copied from DPO's files; KTODataArgument has no such field, so argparse expands the prefix to
# TrainingArguments' lazy_data_processing, a switch paddlenlp 3.0.0b4 declares and never reads.
# Accepted as that (refusing upstream's own example file for a no-op would help nobody); any other
# abbreviation is still refused.
KTO_PREFIX_KEYS = {"lazy": "lazy_data_processing"}

# Keys the studio adds to the configs it saves (launch settings); never passed to PaddleNLP.
STUDIO_KEYS = {"studio_parallel": "dict", "studio_method": "str"}
# str-typed upstream fields whose help text lists the accepted values
STR_CHOICES = {
    "lr_scheduler_type": ("paddlenlp.trainer.trainer_utils", "SchedulerType"),
    "optim": ("paddlenlp.trainer.training_args", "OptimizerNames"),
}
FIXED_CHOICES = {"fp16_opt_level": ["O0", "O1", "O2"], "device": ["cpu", "gpu", "xpu", "npu"]}

# Which upstream entry a config is for (entry_of). Each entry's script and what the studio does
# with its files; the keys that tell are below, in the order entry_of tries them.
SCRIPTS = {  # entry -> (what its files are, the script that runs them)
    "quantization": ("quantization (PTQ / GPTQ / AWQ / QAT)", "llm/run_quantization.py"),
    "pretrain": ("pretraining", "llm/run_pretrain.py"),
    "grpo": ("GRPO", "llm/alignment/ppo/run_ppo.py (rl_algorithm grpo)"),
    "ppo": ("PPO", "llm/alignment/ppo/run_ppo.py"),
    "reward": ("reward-model", "llm/alignment/rm/run_reward.py"),
    "reward_flashmask": ("reward-model", "llm/alignment/rm/flashmask/run_reward.py"),
    "embedding": ("embedding-model", "llm/run_embedding.py"),
    "kto": ("KTO", "llm/alignment/kto/run_kto.py"),
    "dpo": ("DPO / SimPO / ORPO", "llm/alignment/dpo/run_dpo.py"),
}
WHAT_TO_DO = {
    "quantization": "the studio runs it as a Quantize job: `paddle-studio train FILE` or "
                    "`paddle-studio quantize --config FILE` (or pick a preset in the Quantize tab)",
    "quantization_fp8": "the studio does not run FP8 quantization: its Quantize engine does a8w8, weight_only_int8 "
                        "and weight_only_int4 (no FP8 kernels or observers); run this file with upstream's "
                        "llm/run_quantization.py on an FP8-capable GPU",
    "pretrain": "the studio trains on its own dataset folders: import raw text with `paddle-studio data import` "
                "and use the pretrain method",
    "ppo": "the studio does not run PPO: it trains an actor, a critic and a reward model together and generates "
           "answers inside every step; the studio trains from fixed datasets (fine-tuning, DPO, KTO)",
    "grpo": "the studio does not run GRPO: it samples several answers per prompt inside every step and scores them "
            "with a reward model or reward server; the studio trains from fixed datasets (fine-tuning, DPO, KTO)",
    "reward": "the studio does not train reward models (a scoring head and its own trainer); its trainings make "
              "generation models (fine-tuning, DPO, KTO)",
    "embedding": "the studio does not train embedding models (query/passage vectors with a contrastive loss and "
                 "their own data format); its trainings make generation models (fine-tuning, DPO, KTO)",
    "kto": "the studio trains it with the kto method (`paddle-studio train FILE` reads run_kto.py's keys)",
    "dpo": "the studio trains it with the dpo method (`paddle-studio train FILE` reads run_dpo.py's keys)",
}
WHAT_TO_DO["reward_flashmask"] = WHAT_TO_DO["reward"]

QUANT_SWITCHES = ("do_ptq", "do_gptq", "do_awq", "do_qat")  # tell by being set to a true value
PRETRAIN_KEYS = ("input_dir", "split")
RL_KEYS = ("actor_model_name_or_path", "reward_model_name_or_path", "rl_algorithm", "critic_learning_rate", "kl_coeff",
           "kl_loss_coeff", "ptx_datasets", "rollout_n", "use_rm_server", "reward_server",
           "per_device_prompt_batch_size", "update_iters")
REWARD_KEYS = ("normalize_score_during_training", "normalizer_type", "normalizer_momentum", "regularization",
               "train_datasets", "eval_datasets")
REWARD_LOSSES = ("sequence-wise", "token-wise")
EMBEDDING_KEYS = ("max_query_len", "max_passage_len", "group_size", "query_template", "passage_template",
                  "embedding_temperature", "embedding_negatives_cross_device", "embedding_matryoshka_dims",
                  "inf_cl_head_dim")
KTO_KEYS = ("desirable_weight", "undesirable_weight")
# keys of DPOConfig that run_kto.py's KTOConfig lacks (beta they share); normalize_logps: later DPO files
DPO_OWN_KEYS = ("simpo_gamma", "label_smoothing", "pref_loss_ratio", "sft_loss_ratio", "dpop_lambda",
                "ref_model_update_steps", "reference_free", "normalize_logps")
# loss_type is also run_reward.py's and run_embedding.py's key; only these values of it are DPO's
# read alike by run_dpo.py, run_kto.py and rm/flashmask/run_reward.py: where a file has only these
# (and beta), upstream's file name tells (kto_argument.json, rm_flashmask_argument.json), else DPO
PREFERENCE_KEYS = ("train_dataset_path", "dev_dataset_path", "max_seq_len", "max_prompt_len")
NAME_TELLS = {"kto": "kto", "rm": "reward_flashmask", "prm": "reward_flashmask", "reward": "reward_flashmask"}

MESSAGES = {
    "not_an_object": "the file must hold one JSON object of PaddleNLP arguments, got {got}",
    "other_entry": "this is a {what} file for {script} (told by {keys}), not for llm/run_finetune.py; {todo}",
    "unknown_key": "not an argument of {script}{hint}",
    "abbreviated_key": "upstream's parser takes this as {full!r} (argparse expands a unique prefix of an argument "
                       "name); write {full!r}",
    "reads_as": "upstream's parser takes this as {taken}; write {taken}",
    "bad_type": "expected {expected}, got {value!r}",
    "bad_choice": "{value!r} is not one of {choices}",
}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "paddle-studio"


def paddlenlp_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("paddlenlp")
    except metadata.PackageNotFoundError:
        return "none"


def _type_name(tp) -> tuple[str | None, bool, list | None]:
    """(json type, None allowed, enum choices) of a dataclass field's annotation."""
    import enum
    import typing

    optional = False
    origin = typing.get_origin(tp)
    if origin is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        optional = len(args) < len(typing.get_args(tp))
        tp = args[0] if len(args) == 1 else None
        origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "str", optional, [e.value for e in tp]
    if origin in (list, tuple) or tp in (list, tuple):
        return "list", optional, None
    if origin is dict or tp is dict:
        return "dict", optional, None
    names = {bool: "bool", int: "int", float: "float", str: "str"}
    return names.get(tp), optional, None


def _default_of(f) -> dict:
    """{"default": value} when the field's default can be written as JSON, else {}."""
    import dataclasses
    import enum

    v = f.default
    if v is dataclasses.MISSING:
        if f.default_factory is dataclasses.MISSING:
            return {}
        v = f.default_factory()
    if isinstance(v, enum.Enum):
        v = v.value
    try:
        json.dumps(v)
    except (TypeError, ValueError):
        return {}
    return {"default": v}


def default(key: str):
    """Upstream's default of ``key`` (KeyError when it has none that JSON can hold)."""
    return table()[key]["default"]


def _with_choices(table: dict) -> dict:
    """``table`` with the choices upstream's help texts name (imports paddlenlp for the enums)."""
    import importlib

    for key, (mod, name) in STR_CHOICES.items():
        if key in table:
            table[key]["choices"] = [e.value for e in getattr(importlib.import_module(mod), name)]
    for key, choices in FIXED_CHOICES.items():
        if key in table:
            table[key]["choices"] = choices
    return table


def _field_spec(f, owner: str) -> dict:
    tp, optional, choices = _type_name(f.type)
    optional = optional or f.default is None  # `x: str = None` takes null upstream
    return {"type": tp, "optional": optional, "choices": choices, "owner": owner, **_default_of(f)}


def build_table() -> dict:
    """key -> {"type", "optional", "choices", "owner"} of llm/run_finetune.py, from the installed
    paddlenlp (imports it)."""
    import dataclasses
    import importlib

    table: dict[str, dict] = {}
    for spec in FINETUNE_CLASSES:
        mod, name = spec.split(":")
        cls = getattr(importlib.import_module(mod), name)
        for f in dataclasses.fields(cls):
            if f.init:
                table.setdefault(f.name, _field_spec(f, name))
    _with_choices(table)
    for owner, keys in LLM_UTILS_KEYS.items():
        for key, (tp, optional) in keys.items():
            table.setdefault(key, {"type": tp, "optional": optional, "choices": None, "owner": owner})
    return table


def build_dpo_table(classes: dict = DPO_CLASSES, choices: dict = DPO_CHOICES) -> dict:
    """The keys llm/alignment/dpo/run_dpo.py accepts: the wheel's TrainingArguments fields, the
    switches @llmmetaclass adds from the wheel's LlmMetaConfig, and DPO_CLASSES (imports paddlenlp).
    With KTO_CLASSES: run_kto.py's, built the same way."""
    import dataclasses

    from paddlenlp.trainer import TrainingArguments
    from paddlenlp.transformers.configuration_utils import LlmMetaConfig

    table: dict[str, dict] = {}
    for owner, keys in classes.items():  # a subclass's own field wins over its base's
        for key, (tp, optional, default_) in keys.items():
            table[key] = {"type": tp, "optional": optional, "choices": choices.get(key), "owner": owner,
                          "default": default_}
    for f in dataclasses.fields(TrainingArguments):
        if f.init:
            table.setdefault(f.name, _field_spec(f, "TrainingArguments"))
    for name, tp, default_, _help in LlmMetaConfig._get_all_meta():
        # llmmetaclass skips a name the class has already (tensor_parallel_rank: a TrainingArguments property)
        if name not in table and not hasattr(TrainingArguments, name):
            t, optional, _ = _type_name(tp)
            table[name] = {"type": t, "optional": optional or default_ is None, "choices": None,
                           "owner": "LlmMetaConfig", "default": default_}
    return _with_choices(table)


def build_kto_table() -> dict:
    """The keys llm/alignment/kto/run_kto.py accepts (see build_dpo_table), plus KTO_PREFIX_KEYS read
    as the TrainingArguments field argparse expands them to."""
    table = build_dpo_table(KTO_CLASSES, {})
    for key, full in KTO_PREFIX_KEYS.items():
        table[key] = {**table[full], "owner": f"TrainingArguments ({full}: argparse expands the prefix)"}
    return table


def build_tables() -> dict:
    return {"finetune": build_table(), "dpo": build_dpo_table(), "kto": build_kto_table()}


_TABLES: dict | None = None


def _tables() -> dict:
    """The argument tables of the installed paddlenlp (cached per version; built in a subprocess)."""
    global _TABLES
    if _TABLES is not None:
        return _TABLES
    path = cache_dir() / f"upstream-args-v4-{paddlenlp_version()}.json"
    try:
        _TABLES = json.loads(path.read_text(encoding="utf-8"))
        return _TABLES
    except (OSError, ValueError):
        pass
    if "paddlenlp" in sys.modules:
        _TABLES = build_tables()
    else:
        root = Path(__file__).resolve().parents[2]
        r = subprocess.run([sys.executable, "-m", "core.train.upstream"], cwd=str(root), capture_output=True,
                           text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(root)})
        if r.returncode != 0:
            raise RuntimeError(f"cannot read PaddleNLP's argument classes: {r.stderr.strip()[-500:]}")
        _TABLES = json.loads(r.stdout)
    try:  # a cache that cannot be written is only slower next time
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8") as f:
            json.dump(_TABLES, f)
        os.replace(f.name, path)
    except OSError:
        pass
    return _TABLES


def table() -> dict:
    """The keys llm/run_finetune.py accepts (ModelConfig, DataConfig, SFTConfig and llm/utils')."""
    return _tables()["finetune"]


def dpo_table() -> dict:
    """The keys llm/alignment/dpo/run_dpo.py accepts (see build_dpo_table)."""
    return _tables()["dpo"]


def kto_table() -> dict:
    """The keys llm/alignment/kto/run_kto.py accepts (see build_kto_table)."""
    return _tables()["kto"]


def quant_table() -> dict:
    """The keys llm/run_quantization.py accepts: the fine-tuning table plus QuantArgument's."""
    t = dict(table())
    for key, (tp, optional) in QUANT_ARGUMENT_KEYS.items():
        t[key] = {"type": tp, "optional": optional, "choices": QUANT_CHOICES.get(key)}
    return t


# ---------------------------------------------------------------- which entry a file is for

TRUE_WORDS = ("yes", "true", "t", "y", "1")  # upstream's strtobool, any case
FALSE_WORDS = ("no", "false", "f", "n", "0")


def _switched_on(value) -> bool:
    """A switch as upstream's parser reads it ("false" and 0 are off); a value it cannot read counts
    as on, so that the entry it is for reports it."""
    status, v = upstream_value(value, {"type": "bool", "optional": True})
    return bool(v) if status == "ok" else True


def _name_words(name: str) -> set[str]:
    return set(re.split(r"[^a-z0-9]+", Path(name).stem.lower())) if name else set()


def entry_of(d: dict, name: str = "") -> tuple[str, str, list[str]] | None:
    """(entry, script, what tells) for a config meant for another upstream entry than
    llm/run_finetune.py (dpo included), else None. By the keys only that entry reads; where
    upstream's scripts read the same keys (run_dpo.py, run_kto.py and rm/flashmask/run_reward.py),
    by ``name``, the file's name as upstream names its files (kto_argument.json,
    rm_flashmask_argument.json); such a file with no telling name is DPO's."""
    def having(keys):
        return [k for k in keys if k in d]

    def told(entry, keys):
        return entry, SCRIPTS[entry][1], keys

    on = [k for k in QUANT_SWITCHES if k in d and _switched_on(d[k])]
    if on:
        return told("quantization", on)
    if having(PRETRAIN_KEYS) and ("input_dir" in d or "dataset_name_or_path" not in d):
        return told("pretrain", having(PRETRAIN_KEYS))
    words = _name_words(name)
    if having(RL_KEYS):
        grpo = str(d.get("rl_algorithm", "")).lower() == "grpo" or "grpo" in words
        return told("grpo" if grpo else "ppo", having(RL_KEYS))
    if having(REWARD_KEYS) or d.get("loss_type") in REWARD_LOSSES:
        return told("reward", having(REWARD_KEYS) or ["loss_type"])
    if having(EMBEDDING_KEYS):
        return told("embedding", having(EMBEDDING_KEYS))
    if having(KTO_KEYS):
        return told("kto", having(KTO_KEYS))
    dpo_own = having(DPO_OWN_KEYS) + (["loss_type"] if d.get("loss_type") in DPO_LOSSES else [])
    if dpo_own:
        return told("dpo", having(("beta",)) + dpo_own)
    shared = having(("beta",) + PREFERENCE_KEYS)
    if not shared:
        return None
    for word, entry in NAME_TELLS.items():
        if word in words:
            script = SCRIPTS[entry][1].removeprefix("llm/alignment/")
            return told(entry, [f"the file name {Path(name).name}: its keys ({', '.join(shared)}) are "
                                f"dpo/run_dpo.py's and {script}'s alike"])
    return told("dpo", shared)


def is_dpo(d, name: str = "") -> bool:
    return isinstance(d, dict) and (entry_of(d, name) or ("",))[0] == "dpo"


def is_kto(d, name: str = "") -> bool:
    return isinstance(d, dict) and (entry_of(d, name) or ("",))[0] == "kto"


def is_quantization(d) -> bool:
    return isinstance(d, dict) and (entry_of(d) or ("",))[0] == "quantization"


def _todo(entry: str, d: dict) -> str:
    if entry == "quantization" and "fp8" in str(d.get("quant_type", "")).lower():
        return WHAT_TO_DO["quantization_fp8"]
    return WHAT_TO_DO[entry]


# ---------------------------------------------------------------- values as upstream reads them

EXPECTED = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a string",
            "list": "a list or a string", "dict": "an object"}


def upstream_value(value, spec: dict) -> tuple[str, object]:
    """How upstream's parser reads ``value`` for a field of ``spec``. PdArgumentParser.parse_json_file
    (3.0.0b4) turns each JSON value into command-line words (``str(v)``; each item of a list; an object
    as JSON text) and argparse converts them with the field's type (bools with strtobool). Returns
    ("ok", the value it ends with), ("stop", None) where it stops with an error, or ("odd", what it
    ends with) where that is not what anyone writing the file means (text from a number, a switch
    turned on by an empty list)."""
    tp = spec.get("type")
    if value is None:  # what the table has always allowed (null for a field whose default is None)
        return ("ok", None) if spec.get("optional") else ("stop", None)
    if tp == "list":  # nargs="+": one string is a list of one (report_to: "visualdl")
        return ("ok", value) if isinstance(value, (list, str)) else ("stop", None)
    if tp == "dict":
        return ("ok", value) if isinstance(value, dict) else ("stop", None)
    if tp not in ("bool", "int", "float", "str"):
        return "ok", value  # a type the table does not model: upstream decides
    if isinstance(value, dict):
        words = [json.dumps(value)]
    elif isinstance(value, list):
        words = [str(v) for v in value]
    else:
        words = [str(value)]
    if tp == "bool":
        if isinstance(value, bool):
            return "ok", value
        if not words:
            return "odd", True  # `--lora` with no value: nargs="?" gives the const, True
        if len(words) > 1:
            return "stop", None  # the rest is left over: "Some specified arguments are not used"
        word = words[0].lower()
        return ("ok", True) if word in TRUE_WORDS else ("ok", False) if word in FALSE_WORDS else ("stop", None)
    if len(words) != 1:
        return "stop", None  # none: "expected one argument"; more: left over
    if tp == "str":
        if isinstance(value, str):
            return "ok", value
        if isinstance(value, list) and isinstance(value[0], str):
            return "ok", value[0]
        return "odd", words[0]
    if tp == "int" and isinstance(value, int) and not isinstance(value, bool):
        return "ok", value
    if tp == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return "ok", value
    try:
        return "ok", (int if tp == "int" else float)(words[0])
    except ValueError:
        return "stop", None


def _argparse_expands(key: str, known: dict) -> str | None:
    """The argument argparse takes ``key`` for when it is no name of ``known`` (allow_abbrev: a prefix
    of exactly one option), else None. Options also include --help and the --no_X of switches whose
    default is true; a prefix of those, or of several, is no argument."""
    options = list(known) + ["help"] + [f"no_{k}" for k, v in known.items()
                                          if v.get("type") == "bool" and v.get("default") is True]
    hits = [o for o in options if o.startswith(key)]
    return hits[0] if len(hits) == 1 and hits[0] in known else None


def read(d, known: dict | None = None, script: str = FINETUNE_SCRIPT, name: str = "") -> tuple[dict | None, list[dict]]:
    """``d`` as upstream's parser reads it (values converted as it converts them) and every problem,
    as {"code", "field", "params"}. ``known``/``script``: another entry's table (quant_table() for
    llm/run_quantization.py); without one, the entry is told from the keys and ``name`` (the file's
    name): run_finetune.py's table, run_dpo.py's for a DPO file, run_kto.py's for a KTO file, a refusal
    naming any other entry."""
    if not isinstance(d, dict):
        return None, [{"code": "not_an_object", "field": "",
                       "params": {"got": type(d).__name__ if d is not None else "null"}}]
    if known is None:
        other = entry_of(d, name)
        if other and other[0] == "dpo":
            known, script = dpo_table(), DPO_SCRIPT
        elif other and other[0] == "kto":
            known, script = kto_table(), KTO_SCRIPT
        elif other:
            entry, script, keys = other
            told = ", ".join(keys[:-1]) + " and " + keys[-1] if len(keys) > 1 else keys[0]
            return d, [{"code": "other_entry", "field": "",
                        "params": {"entry": entry, "what": SCRIPTS[entry][0], "script": script, "keys": told,
                                   "todo": _todo(entry, d)}}]
        else:
            known = table()
    out, found = {}, []
    names = list(known) + list(STUDIO_KEYS)
    for key, value in d.items():
        out[key] = value
        spec = known.get(key) or ({"type": STUDIO_KEYS[key], "optional": False} if key in STUDIO_KEYS else None)
        if spec is None:
            full = _argparse_expands(key, known)
            if full:
                found.append({"code": "abbreviated_key", "field": key, "params": {"key": key, "full": full}})
                continue
            close = difflib.get_close_matches(key, names, n=1, cutoff=0.75)
            found.append({"code": "unknown_key", "field": key,
                          "params": {"key": key, "suggestion": close[0] if close else None, "script": script,
                                     "hint": f"; did you mean {close[0]!r}?" if close else ""}})
            continue
        status, v = upstream_value(value, spec)
        if status == "stop":
            found.append({"code": "bad_type", "field": key,
                          "params": {"key": key, "expected": EXPECTED.get(spec.get("type"), spec.get("type")),
                                     "value": value}})
        elif status == "odd":
            found.append({"code": "reads_as", "field": key, "params": {"key": key, "value": value,
                                                                        "taken": json.dumps(v, ensure_ascii=False)}})
        elif spec.get("choices") and v is not None and v not in spec["choices"]:
            found.append({"code": "bad_choice", "field": key,
                          "params": {"key": key, "value": v, "choices": ", ".join(map(str, spec["choices"]))}})
        else:
            out[key] = v
    return out, found


def problems(d, known: dict | None = None, script: str = FINETUNE_SCRIPT, name: str = "") -> list[dict]:
    """Every way ``d``, used as it is, differs from what upstream's parser reads (see read): its
    problems, and a "reads_as" for each value upstream converts ("max_steps": "3")."""
    out, found = read(d, known, script, name)
    if out is None or out is d:
        return found
    flagged = {p["field"] for p in found}
    for key, value in d.items():
        v = out[key]
        if key not in flagged and (type(v) is not type(value) or v != value):
            found.append({"code": "reads_as", "field": key,
                          "params": {"key": key, "value": value, "taken": json.dumps(v, ensure_ascii=False)}})
    return found


def message(p: dict) -> str:
    try:
        return MESSAGES[p["code"]].format(**p.get("params", {}))
    except (KeyError, IndexError, ValueError):
        return p["code"]


if __name__ == "__main__":  # print the tables of the installed paddlenlp (what _tables() caches)
    json.dump(build_tables(), sys.stdout)
