"""KTO runs (the ``kto`` method): what llm/alignment/kto/run_kto.py does, with PaddleNLP's own
pieces. Each record holds one answer marked desirable (sort [1]) or undesirable (sort [0]). As
upstream, every record is paired with another record's answer for the loss's KL term (record ``i``
takes record ``-i``'s answer, so record 0 takes its own; that second answer's sort is the first's
minus one), ``preprocess_preference_data`` tokenizes the pair, ``ZeroPaddingMapDataset`` packs rows
into ``max_seq_len`` sequences (always: ``preference_collate_fn`` takes no other shape), and the
wheel's ``KTOTrainer`` trains with ``KTOCriterion``. With ``lora`` the reference is the model with its
adapters off; without, a frozen copy.

The chat template: run_kto.py drops it (``tokenizer.chat_template = None``, "TODO: support chat
template in next pr"), and so does the studio, so a config means the same here and upstream: prompts
are the bare text after BOS, answers end with EOS. Unlike upstream (which saves the template it did
not train with beside the model), the saved tokenizer carries no template, so chat, eval and the
round-trip check build prompts the way this training did.

A record's sort must be 1 or 0: upstream's loss counts answers with ``sort == 1`` as desirable and
``sort == 0`` as undesirable and silently leaves any other out; the studio's dataset check refuses
other values with file, line and field (core.data.datasets.check_kto_record).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from core.train.upstream import KTO_ARGUMENT_KEYS, KTO_PREFIX_KEYS


@dataclass
class KTOConfig:
    """run_kto.py's KTOConfig: what KTOTrainer and KTOCriterion read (defaults from upstream)."""

    beta: float = 0.1
    desirable_weight: float = 1.0
    undesirable_weight: float = 1.0
    lora: bool = False


def kto_config(flat: dict) -> KTOConfig:
    """The KTOConfig of a run's flat config; a key it leaves out means run_kto.py's default."""
    return KTOConfig(**{k: flat.get(k, KTO_ARGUMENT_KEYS[k][2]) for k in KTOConfig.__dataclass_fields__})


@dataclass
class DataArgs:  # what preprocess_preference_data reads
    max_seq_len: int
    max_prompt_len: int
    greedy_zero_padding: bool = False


@dataclass
class ModelArgs:  # what preprocess_preference_data reads
    flash_mask: bool = False


def split_training_args(flat: dict):
    """The training arguments run_kto.py reads: TrainingArguments plus @llmmetaclass's LLM switches
    (core.train.dpo.split_training_args says more). run_kto.py's own keys are put aside; a key that
    argparse expands upstream (KTO_PREFIX_KEYS: "lazy") goes in under the name it expands to."""
    from paddlenlp.trainer import PdArgumentParser

    aside = set(KTO_ARGUMENT_KEYS) - {"unified_checkpoint"}
    args = {k: v for k, v in flat.items() if k not in aside}
    for short, full in KTO_PREFIX_KEYS.items():
        if short in args:
            args.setdefault(full, args.pop(short))
    (out,) = PdArgumentParser((_training_arguments_class(),)).parse_dict(args)
    return out


def _training_arguments_class():
    from core.train.dpo import llm_training_arguments

    return llm_training_arguments("KTOTrainingArguments", __name__)


def __getattr__(name):  # PEP 562: unpickling a checkpoint's training_args.bin finds the class here
    if name == "KTOTrainingArguments":
        return _training_arguments_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def read_records(path: str | os.PathLike) -> list[dict]:
    """The checked KTO records of a file ({src, tgt, response: [answer], sort: [1 or 0]})."""
    from core.data import datasets

    p = Path(path)
    if not p.is_file() or not p.stat().st_size:
        return []
    fmt = datasets.detect_format(p)
    if fmt != "kto":
        raise SystemExit(f"{p}: KTO needs records of one answer marked desirable or not ({{src, tgt, response: "
                         f"[answer], sort: [1 or 0]}}), found {fmt or 'no records'}")
    report = datasets.validate(p, "kto")
    if report.bad:  # upstream would train on them (or skip them silently): say which
        first = next(x for x in report.problems if x.severity == "error")
        raise SystemExit(f"{p}: {report.bad} of {report.records} records are not KTO records, e.g. line {first.line}, "
                         f"{first.field or 'the record'}: {first.message}")
    return list(datasets.iter_records(p, "kto"))


def with_kl_answers(records: list[dict]) -> list[dict]:
    """Upstream's pairing for the KL term (run_kto.py's add_response_kl): record ``i`` gets record
    ``-i``'s answer as a second response (record 0 its own), and a second sort, its own minus one."""
    n = len(records)
    out = []
    for i, rec in enumerate(records):
        r = copy.deepcopy(rec)
        r["response"] = [rec["response"][0], records[-i % n]["response"][0]]
        r["sort"] = [rec["sort"][0], rec["sort"][0] - 1]
        out.append(r)
    return out


def tokenize(records: list[dict], tokenizer, data_args: DataArgs) -> list[dict]:
    from paddlenlp.trl import preprocess_preference_data

    out = []
    for rec in with_kl_answers(records):
        ex = preprocess_preference_data(rec, tokenizer, data_args, ModelArgs())
        if ex:
            out.append(ex)
    return out


def packed(examples: list[dict], tokenizer, max_len: int, greedy: bool = False):
    from paddlenlp.datasets import ZeroPaddingMapDataset

    return ZeroPaddingMapDataset(examples, tokenizer=tokenizer, max_length=max_len, greedy_zero_padding=greedy)


def lora_model(model, flat: dict, model_dir: str, targets: list[str]):
    """LoRA as run_kto.py builds it: a saved adapter from ``lora_path``, else new adapters with alpha
    2 x rank (4 with rsLoRA; upstream passes that, not lora_alpha), rslora_plus meaning rsLoRA with a
    LoRA+ scale of 4, and use_quick_lora (upstream's default: on)."""
    from paddlenlp.peft import LoRAConfig, LoRAModel

    if flat.get("lora_path"):
        model = LoRAModel.from_pretrained(model=model, lora_path=flat["lora_path"])
    else:
        rank = int(flat.get("lora_rank", KTO_ARGUMENT_KEYS["lora_rank"][2]))
        rslora = bool(flat.get("rslora") or flat.get("rslora_plus"))
        plus = 4.0 if flat.get("rslora_plus") else float(flat.get("lora_plus_scale", 1.0))
        model = LoRAModel(model, LoRAConfig(
            target_modules=targets, r=rank, lora_alpha=4 if rslora else 2 * rank, rslora=rslora,
            lora_plus_scale=plus, use_quick_lora=bool(flat.get("use_quick_lora", True)), merge_weights=False,
            dtype="float32", base_model_name_or_path=model_dir))
    model.mark_only_lora_as_trainable()
    return model


def main(run_dir: Path, flat: dict, resume: bool, entry) -> int:
    """Train the KTO run of ``flat``; ``entry``: the running training entry module (its phase notes,
    fail-fast collator wrapper and metrics callback)."""
    from paddlenlp.transformers import AutoConfig, AutoModelForCausalLM
    from paddlenlp.transformers.configuration_utils import LlmMetaConfig
    from paddlenlp.trl import KTOTrainer, preference_collate_fn

    from core.data import templates
    from core.train import checkpoints
    from core.train.config import model_family
    from core.train.dpo import prepare

    training_args, model_dir, _, tokenizer = prepare(flat, entry, split_training_args)
    templates.keep_with_tokenizer(tokenizer, None)  # as run_kto.py: no chat template (and none saved)
    entry.phase("tokenizer")
    data_args = DataArgs(int(flat.get("max_seq_len", 4096)), int(flat.get("max_prompt_len", 2048)),
                         bool(flat.get("greedy_zero_padding", False)))
    train_ex = tokenize(read_records(flat["train_dataset_path"]), tokenizer, data_args)
    if not train_ex:
        raise SystemExit(f"{flat['train_dataset_path']}: no KTO record to train on")
    eval_ex = tokenize(read_records(flat["dev_dataset_path"]), tokenizer, data_args) \
        if training_args.do_eval and flat.get("dev_dataset_path") else []
    train_ds = packed(train_ex, tokenizer, data_args.max_seq_len, data_args.greedy_zero_padding)
    eval_ds = packed(eval_ex, tokenizer, data_args.max_seq_len) if eval_ex else None  # upstream: never greedy
    if eval_ds is None:
        training_args.do_eval = False
        training_args.evaluation_strategy = "no"
    entry.phase("data")

    family = model_family(model_dir)
    model_config = AutoConfig.from_pretrained(model_dir)
    LlmMetaConfig.set_llm_config(model_config, training_args)  # as run_kto.py: the LLM switches reach the model
    model = AutoModelForCausalLM.from_pretrained(model_dir, config=model_config, dtype="float32")
    cfg = kto_config(flat)
    ref_model = None
    if cfg.lora:
        # a resumed run is rebuilt in the target order its checkpoint recorded (entry.recorded_targets)
        found = checkpoints.last_complete(Path(training_args.output_dir)) if resume else None
        model = lora_model(model, flat, model_dir, entry.recorded_targets(found) or family["target_modules"])
    else:  # full KTO: a frozen copy of the starting model is the reference
        ref_model = AutoModelForCausalLM.from_config(model_config, dtype="float32")
        ref_model.set_state_dict(model.state_dict())
        ref_model.eval()
    entry.phase("model")

    save_reference = entry.reference_writer(run_dir, model, tokenizer, None, flat)
    mean_tokens = sum(len(e["input_ids"]) for e in train_ex) / len(train_ex)
    per_step = training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps
    tokens_per_step = mean_tokens * len(train_ex) / max(len(train_ds), 1) * per_step
    trainer = KTOTrainer(
        model=model, ref_model=ref_model, kto_config=cfg, args=training_args,
        train_dataset=train_ds, eval_dataset=eval_ds, tokenizer=tokenizer,
        data_collator=entry.fail_fast(partial(preference_collate_fn, max_seq_len=data_args.max_seq_len,
                                              data_type="pointwise")),
        callbacks=[entry.make_callback(run_dir / "metrics.jsonl", tokens_per_step, save_reference)],
    )
    entry.phase("trainer")
    from core.train.dpo import train_and_save

    return train_and_save(trainer, tokenizer, training_args, resume, save_reference, {
        "base": str(Path(model_dir).resolve()), "method": "kto", "adapter": bool(cfg.lora), "run": run_dir.name,
        "kto": {"beta": cfg.beta, "desirable_weight": cfg.desirable_weight, "undesirable_weight": cfg.undesirable_weight,
                "lora": bool(cfg.lora)}})
