"""What PaddleNLP's own entry scripts accept: every argument key, its type and choices, read from
the installed paddlenlp's argument dataclasses; and which upstream entry a config file is for.

``problems(d)`` checks a PaddleNLP argument JSON as strictly as upstream's ``PdArgumentParser``
(which refuses unknown keys: "Some specified arguments are not used") and stricter on values
(upstream passes ``"max_steps": "10"`` through and fails later): unknown keys with a "did you
mean", wrong types, values outside their choices, every problem at once, never a traceback.

Reading the dataclasses needs ``import paddlenlp`` (seconds, hundreds of MB): the table is built
once per paddlenlp version in a subprocess and cached as JSON, so the studio process never
imports paddlenlp for it.
"""

from __future__ import annotations

import difflib
import json
import os
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
    "weight_quant_method": ["abs_max_channel_wise", "groupwise"], "act_quant_method": ["abs_max", "avg"],
    "cachekv_quant_method": ["abs_max_headwise", "avg_headwise"], "shift_sampler": ["ema", "none"],
    "smooth_sampler": ["multi_step", "none"],
}
QUANTIZATION_SCRIPT = "llm/run_quantization.py"

# llm/alignment/dpo/run_dpo.py parses TrainingArguments plus three dataclasses of its own
# (llm/alignment/dpo/dpo_argument.py, not in the wheel either): their keys, types and defaults.
DPO_SCRIPT = "llm/alignment/dpo/run_dpo.py"
DPO_ARGUMENT_KEYS = {
    # DPOConfig
    "beta": ("float", False, 0.1), "simpo_gamma": ("float", False, 0.5), "label_smoothing": ("float", False, 0.0),
    "loss_type": ("str", False, "sigmoid"), "pref_loss_ratio": ("float", False, 1.0),
    "sft_loss_ratio": ("float", False, 0.0), "dpop_lambda": ("float", False, 50), "normalize_logps": ("bool", False, True),
    "ref_model_update_steps": ("int", False, -1), "reference_free": ("bool", False, False), "lora": ("bool", False, False),
    # DPODataArgument
    "train_dataset_path": ("str", False, "./data/train.jsonl"), "dev_dataset_path": ("str", False, "./data/dev.jsonl"),
    "max_seq_len": ("int", False, 4096), "max_prompt_len": ("int", False, 2048), "greedy_zero_padding": ("bool", False, False),
    "lazy": ("bool", False, False),
    # DPOModelArgument
    "model_name_or_path": ("str", False, None), "tokenizer_name_or_path": ("str", True, None),
    "use_flash_attention": ("bool", False, False), "flash_mask": ("bool", False, False),
    "recompute_granularity": ("str", False, "full"), "use_attn_mask_startend_row_indices": ("bool", False, True),
    "lora_rank": ("int", False, 8), "lora_alpha": ("int", False, -1), "rslora": ("bool", False, False),
    "rslora_plus": ("bool", False, False), "lora_plus_scale": ("float", False, 1.0), "lora_path": ("str", True, None),
    "weight_quantize_algo": ("str", True, None),
    # DPOTrainingArguments (on top of TrainingArguments)
    "unified_checkpoint": ("bool", False, True), "autotuner_benchmark": ("bool", False, False),
    "benchmark": ("bool", False, False),
}
DPO_CHOICES = {"loss_type": ["sigmoid", "hinge", "ipo", "kto_pair", "sppo_hard", "nca_pair", "dpop", "or", "simpo"]}

# Keys the studio adds to the configs it saves (launch settings); never passed to PaddleNLP.
STUDIO_KEYS = {"studio_parallel": "dict", "studio_method": "str"}
# str-typed upstream fields whose help text lists the accepted values
STR_CHOICES = {
    "lr_scheduler_type": ("paddlenlp.trainer.trainer_utils", "SchedulerType"),
    "optim": ("paddlenlp.trainer.training_args", "OptimizerNames"),
}
FIXED_CHOICES = {"fp16_opt_level": ["O0", "O1", "O2"], "device": ["cpu", "gpu", "xpu", "npu"]}

# Which upstream entry a config is for, by the keys only that entry reads (first match wins):
# (entry, script, the keys that tell, whether they tell by being set to a true value, extra test).
ENTRIES = [
    ("quantization", "llm/run_quantization.py (PTQ / GPTQ / AWQ / QAT)", ("do_ptq", "do_gptq", "do_awq", "do_qat"),
     True, None),
    ("pretrain", "llm/run_pretrain.py (pretraining on an indexed corpus)", ("input_dir", "split"), False,
     lambda d: "input_dir" in d or "dataset_name_or_path" not in d),
    ("kto", "llm/alignment/kto/run_kto.py (KTO)", ("desirable_weight", "undesirable_weight"), False, None),
    ("dpo", "llm/alignment/dpo/run_dpo.py (DPO / SimPO / ORPO)",
     ("beta", "simpo_gamma", "loss_type", "ref_model_update_steps", "reference_free", "dpop_lambda",
      "pref_loss_ratio", "normalize_logps"), False,
     lambda d: set(d) & {"beta", "simpo_gamma", "ref_model_update_steps", "reference_free",
                                          "dpop_lambda", "pref_loss_ratio", "normalize_logps"}
     or d.get("loss_type") in DPO_LOSSES),
    ("reward", "llm/alignment/rm (reward model)", ("train_dataset_path", "max_prompt_len"), False, None),
    ("embedding", "llm/run_embedding.py (embedding model)",
     ("embedding_temperature", "embedding_negative_numbers", "use_matryoshka", "matryoshka_dims", "query_max_len",
      "passage_max_len"), False, None),
]
# loss_type is also a fine-tuning key; only these values of it are DPO's
DPO_LOSSES = ("sigmoid", "hinge", "ipo", "kto_pair", "sppo_hard", "nca_pair", "dpop", "or", "simpo")
WHAT_TO_DO = {
    "quantization": "the studio runs it as a Quantize job: `paddle-studio train FILE` or "
                    "`paddle-studio quantize --config FILE` (or pick a preset in the Quantize tab)",
    "pretrain": "the studio trains on its own dataset folders: import raw text with `paddle-studio data import` "
                "and use the pretrain method",
    "kto": "preference training is not in the studio yet",
    "dpo": "the studio trains it with the dpo method (`paddle-studio train FILE` reads run_dpo.py's keys)",
    "reward": "reward-model training is not in the studio yet",
    "embedding": "embedding training is not in the studio yet",
}

MESSAGES = {
    "not_an_object": "the file must hold one JSON object of PaddleNLP arguments, got {got}",
    "other_entry": "this is a config for {script}, not for llm/run_finetune.py (keys: {keys}); {todo}",
    "unknown_key": "not an argument of {script}{hint}",
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


def build_table() -> dict:
    """key -> {"type", "optional", "choices", "owner"} from the installed paddlenlp (imports it)."""
    import dataclasses
    import importlib

    table: dict[str, dict] = {}
    for spec in FINETUNE_CLASSES:
        mod, name = spec.split(":")
        cls = getattr(importlib.import_module(mod), name)
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            tp, optional, choices = _type_name(f.type)
            optional = optional or f.default is None  # `x: str = None` takes null upstream
            table.setdefault(f.name, {"type": tp, "optional": optional, "choices": choices, "owner": name,
                                      **_default_of(f)})
    for key, (mod, name) in STR_CHOICES.items():
        if key in table:
            table[key]["choices"] = [e.value for e in getattr(importlib.import_module(mod), name)]
    for key, choices in FIXED_CHOICES.items():
        if key in table:
            table[key]["choices"] = choices
    for owner, keys in LLM_UTILS_KEYS.items():
        for key, (tp, optional) in keys.items():
            table.setdefault(key, {"type": tp, "optional": optional, "choices": None, "owner": owner})
    return table


_TABLE: dict | None = None


def table() -> dict:
    """The argument table of the installed paddlenlp (cached per version; built in a subprocess)."""
    global _TABLE
    if _TABLE is not None:
        return _TABLE
    path = cache_dir() / f"finetune-args-v2-{paddlenlp_version()}.json"
    try:
        _TABLE = json.loads(path.read_text(encoding="utf-8"))
        return _TABLE
    except (OSError, ValueError):
        pass
    if "paddlenlp" in sys.modules:
        _TABLE = build_table()
    else:
        root = Path(__file__).resolve().parents[2]
        r = subprocess.run([sys.executable, "-m", "core.train.upstream"], cwd=str(root), capture_output=True,
                           text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(root)})
        if r.returncode != 0:
            raise RuntimeError(f"cannot read PaddleNLP's argument classes: {r.stderr.strip()[-500:]}")
        _TABLE = json.loads(r.stdout)
    try:  # a cache that cannot be written is only slower next time
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8") as f:
            json.dump(_TABLE, f)
        os.replace(f.name, path)
    except OSError:
        pass
    return _TABLE


def entry_of(d: dict) -> tuple[str, str, list[str]] | None:
    """(entry, script, the keys that tell) for a config meant for another upstream entry, else None."""
    for entry, script, keys, by_value, extra in ENTRIES:
        present = [k for k in keys if (d.get(k) if by_value else k in d)]
        if present and (extra is None or extra(d)):
            return entry, script, present
    return None


def _matches(value, spec: dict) -> bool:
    if value is None:
        return bool(spec.get("optional"))
    tp = spec.get("type")
    if tp == "bool":
        return isinstance(value, bool)
    if tp == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if tp == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp == "str":
        return isinstance(value, str)
    if tp == "list":  # upstream also takes one string for a list (report_to: "visualdl")
        return isinstance(value, (list, str))
    if tp == "dict":
        return isinstance(value, dict)
    return True  # a type the table does not model: upstream decides


EXPECTED = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "a string",
            "list": "a list or a string", "dict": "an object"}


def quant_table() -> dict:
    """The keys llm/run_quantization.py accepts: the fine-tuning table plus QuantArgument's."""
    t = dict(table())
    for key, (tp, optional) in QUANT_ARGUMENT_KEYS.items():
        t[key] = {"type": tp, "optional": optional, "choices": QUANT_CHOICES.get(key)}
    return t


def dpo_table() -> dict:
    """The keys llm/alignment/dpo/run_dpo.py accepts: TrainingArguments' plus its own dataclasses'."""
    import dataclasses

    from paddlenlp.trainer import TrainingArguments

    names = {f.name for f in dataclasses.fields(TrainingArguments) if f.init}
    t = {k: v for k, v in table().items() if k in names}
    for key, (tp, optional, _default) in DPO_ARGUMENT_KEYS.items():
        t[key] = {"type": tp, "optional": optional, "choices": DPO_CHOICES.get(key)}
    return t


def is_dpo(d) -> bool:
    return isinstance(d, dict) and (entry_of(d) or ("",))[0] == "dpo"


def is_quantization(d) -> bool:
    return isinstance(d, dict) and (entry_of(d) or ("",))[0] == "quantization"


def problems(d, known: dict | None = None, script: str = "llm/run_finetune.py") -> list[dict]:
    """Every way ``d`` differs from what llm/run_finetune.py accepts, as {"code", "field", "params"}.
    ``known``/``script``: another entry's table (quant_table() for llm/run_quantization.py)."""
    if not isinstance(d, dict):
        return [{"code": "not_an_object", "field": "", "params": {"got": type(d).__name__ if d is not None else "null"}}]
    other = entry_of(d) if known is None else None
    if other:
        entry, script, keys = other
        return [{"code": "other_entry", "field": "", "params": {"entry": entry, "script": script,
                                                                "keys": ", ".join(keys), "todo": WHAT_TO_DO[entry]}}]
    known = table() if known is None else known
    out = []
    names = list(known) + list(STUDIO_KEYS)
    for key, value in d.items():
        spec = known.get(key) or ({"type": STUDIO_KEYS[key], "optional": False} if key in STUDIO_KEYS else None)
        if spec is None:
            close = difflib.get_close_matches(key, names, n=1, cutoff=0.75)
            out.append({"code": "unknown_key", "field": key,
                        "params": {"key": key, "suggestion": close[0] if close else None, "script": script,
                                   "hint": f"; did you mean {close[0]!r}?" if close else ""}})
        elif not _matches(value, spec):
            out.append({"code": "bad_type", "field": key,
                        "params": {"key": key, "expected": EXPECTED.get(spec.get("type"), spec.get("type")),
                                   "value": value}})
        elif spec.get("choices") and value is not None and value not in spec["choices"]:
            out.append({"code": "bad_choice", "field": key,
                        "params": {"key": key, "value": value, "choices": ", ".join(map(str, spec["choices"]))}})
    return out


def message(p: dict) -> str:
    try:
        return MESSAGES[p["code"]].format(**p.get("params", {}))
    except (KeyError, IndexError, ValueError):
        return p["code"]


if __name__ == "__main__":  # print the table of the installed paddlenlp (what table() caches)
    json.dump(build_table(), sys.stdout)
