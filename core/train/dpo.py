"""DPO runs (the ``dpo`` method): what llm/alignment/dpo/run_dpo.py does, with PaddleNLP's own
pieces: ``preprocess_preference_data`` tokenizes each pair (prompt, preferred answer, other
answer in one row), ``ZeroPaddingMapDataset`` packs rows into ``max_seq_len`` sequences (the only
shape ``preference_collate_fn`` takes: given plain rows it raises in a DataLoader thread, and the
studio's fail-fast wrapper ends the run with that traceback instead of a hang), ``DPOTrainer``
trains. With ``lora`` the reference is the model with its adapters off; without, a frozen copy.

One deliberate difference from upstream: run_dpo.py drops the tokenizer's chat template ("TODO");
the studio keeps it, so the pairs are tokenized the way its chat (and SFT) builds prompts.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from core.train.upstream import DPO_ARGUMENT_KEYS

DPO_CONFIG_KEYS = ("beta", "simpo_gamma", "label_smoothing", "loss_type", "pref_loss_ratio", "sft_loss_ratio",
                   "dpop_lambda", "ref_model_update_steps", "reference_free", "lora")


@dataclass
class DataArgs:  # what preprocess_preference_data reads
    max_seq_len: int
    max_prompt_len: int
    greedy_zero_padding: bool = False


@dataclass
class ModelArgs:  # what preprocess_preference_data reads
    flash_mask: bool = False


def dpo_config(flat: dict):
    """run_dpo.py's DPOConfig (defaults from upstream) as an object DPOTrainer and DPOCriterion read."""
    cfg = {k: flat.get(k, DPO_ARGUMENT_KEYS[k][2]) for k in DPO_CONFIG_KEYS}
    if cfg["loss_type"] == "orpo":  # upstream's alias
        cfg.update(loss_type="or", sft_loss_ratio=1.0)
    if cfg["loss_type"] in ("or", "simpo"):  # upstream: these losses use no reference model
        cfg["reference_free"] = True
    return type("DPOConfig", (), cfg)()


def split_training_args(flat: dict):
    """The training arguments run_dpo.py reads: TrainingArguments plus the LLM switches
    (use_fused_rope, tensor_parallel_output, recompute_use_reentrant, …) that upstream's
    ``@llmmetaclass`` adds and LlmMetaConfig.set_llm_config copies into the model's config. The
    keys a file may hold are checked before launch (core.train.upstream's table of run_dpo.py);
    parse_dict itself drops what no field takes."""
    from paddlenlp.trainer import PdArgumentParser

    aside = set(DPO_ARGUMENT_KEYS) - {"unified_checkpoint"}
    (args,) = PdArgumentParser((_training_arguments_class(),)).parse_dict(
        {k: v for k, v in flat.items() if k not in aside})
    return args


_ARGS_CLASSES: dict = {}


def llm_training_arguments(name: str, module: str):
    """TrainingArguments with ``@llmmetaclass``'s fields (run_dpo.py's and run_kto.py's training
    arguments), made on first use (importing paddlenlp is slow; these modules are imported by light
    code too) and named ``module.name``: the trainer pickles its arguments into every checkpoint, so
    the module answers that name (its ``__getattr__``)."""
    key = (module, name)
    if key not in _ARGS_CLASSES:
        from paddlenlp.trainer import TrainingArguments
        from paddlenlp.transformers.configuration_utils import llmmetaclass

        ns = {"__module__": module, "__qualname__": name, "__annotations__": {}}  # its own: llmmetaclass adds to it
        cls = dataclass(llmmetaclass(type(name, (TrainingArguments,), ns)))
        _ARGS_CLASSES[key] = cls
    return _ARGS_CLASSES[key]


def _training_arguments_class():
    return llm_training_arguments("DPOTrainingArguments", __name__)


def __getattr__(name):  # PEP 562: unpickling a checkpoint's training_args.bin finds the class here
    if name == "DPOTrainingArguments":
        return _training_arguments_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def read_pairs(path: str | os.PathLike) -> list[dict]:
    """The checked preference records of a file (both PaddleNLP's and the chosen/rejected form)."""
    from core.data import datasets

    p = Path(path)
    if not p.is_file() or not p.stat().st_size:
        return []
    fmt = datasets.detect_format(p)
    if fmt not in datasets.PREFERENCE_FORMATS:
        raise SystemExit(f"{p}: DPO needs preference pairs ({{src, tgt, response, sort}} or {{prompt, chosen, rejected}}), "
                         f"found {fmt or 'no records'}")
    return list(datasets.iter_records(p, fmt))


def tokenize(pairs: list[dict], tokenizer, data_args: DataArgs) -> list[dict]:
    from paddlenlp.trl import preprocess_preference_data

    out = []
    for rec in pairs:  # it rewrites its input (puts the preferred answer first): give it a copy
        ex = preprocess_preference_data(copy.deepcopy(rec), tokenizer, data_args, ModelArgs())
        if ex:
            out.append(ex)
    return out


def packed(examples: list[dict], tokenizer, data_args: DataArgs):
    from paddlenlp.datasets import ZeroPaddingMapDataset

    return ZeroPaddingMapDataset(examples, tokenizer=tokenizer, max_length=data_args.max_seq_len,
                                 greedy_zero_padding=data_args.greedy_zero_padding)


def prepare(flat: dict, entry, split) -> tuple:
    """What DPO's and KTO's entries start alike: paddlenlp's log at INFO, the training arguments
    (``split``: the entry's own split_training_args), the seed, the tokenizer (EOS as padding
    where it has none). Returns (training_args, model_dir, tokenizer_dir, tokenizer)."""
    import logging

    import paddle
    from paddlenlp.transformers import AutoTokenizer

    logging.getLogger("paddlenlp").setLevel(logging.INFO)
    entry.phase("imports")
    training_args = split(flat)
    paddle.seed(training_args.seed)
    model_dir = flat["model_name_or_path"]
    tok_dir = flat.get("tokenizer_name_or_path") or model_dir
    tokenizer = AutoTokenizer.from_pretrained(tok_dir)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return training_args, model_dir, tok_dir, tokenizer


def main(run_dir: Path, flat: dict, resume: bool, entry) -> int:
    """Train the DPO run of ``flat``; ``entry``: the running training entry module (its phase notes,
    fail-fast collator wrapper and metrics callback)."""
    from paddlenlp.transformers import AutoConfig, AutoModelForCausalLM
    from paddlenlp.trl import DPOTrainer, preference_collate_fn

    from core.train import checkpoints
    from core.train.config import model_family

    training_args, model_dir, tok_dir, tokenizer = prepare(flat, entry, split_training_args)
    entry.phase("tokenizer")
    data_args = DataArgs(int(flat.get("max_seq_len", 4096)), int(flat.get("max_prompt_len", 2048)),
                         bool(flat.get("greedy_zero_padding", False)))
    train_ex = tokenize(read_pairs(flat["train_dataset_path"]), tokenizer, data_args)
    if not train_ex:
        raise SystemExit(f"{flat['train_dataset_path']}: no preference pair to train on")
    eval_ex = tokenize(read_pairs(flat["dev_dataset_path"]), tokenizer, data_args) \
        if training_args.do_eval and flat.get("dev_dataset_path") else []
    train_ds = packed(train_ex, tokenizer, data_args)
    eval_ds = packed(eval_ex, tokenizer, data_args) if eval_ex else None
    if eval_ds is None:
        training_args.do_eval = False
        training_args.evaluation_strategy = "no"
    entry.phase("data")

    family = model_family(model_dir)
    model_config = AutoConfig.from_pretrained(model_dir)
    # as run_dpo.py: the training arguments' LLM switches reach the model config
    from paddlenlp.transformers.configuration_utils import LlmMetaConfig

    LlmMetaConfig.set_llm_config(model_config, training_args)
    if getattr(model_config, "ignore_index", -100) != -100:
        model_config.ignore_index = -100
    model = AutoModelForCausalLM.from_pretrained(model_dir, config=model_config, dtype="float32")
    cfg = dpo_config(flat)
    ref_model = None
    if cfg.lora:
        from paddlenlp.peft import LoRAConfig, LoRAModel

        rank = int(flat.get("lora_rank", 8))
        alpha = int(flat.get("lora_alpha", -1))
        # a resumed run is rebuilt in the target order its checkpoint recorded (entry.recorded_targets)
        found = checkpoints.last_complete(Path(training_args.output_dir)) if resume else None
        targets = entry.recorded_targets(found) or family["target_modules"]
        model = LoRAModel(model, LoRAConfig(target_modules=targets, r=rank,
                                            lora_alpha=alpha if alpha > 0 else 2 * rank, merge_weights=False,
                                            dtype="float32", base_model_name_or_path=model_dir))
        model.mark_only_lora_as_trainable()
    elif not cfg.reference_free:  # full DPO: a frozen copy of the starting model is the reference
        ref_model = AutoModelForCausalLM.from_config(model_config, dtype="float32")
        ref_model.set_state_dict(model.state_dict())
        ref_model.eval()
    entry.phase("model")

    from core.data import templates

    save_reference = entry.reference_writer(run_dir, model, tokenizer, templates.load_template(tokenizer, tok_dir), flat)
    mean_tokens = sum(len(e["input_ids"]) for e in train_ex) / len(train_ex)
    per_step = training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps
    tokens_per_step = mean_tokens * len(train_ex) / max(len(train_ds), 1) * per_step
    trainer = DPOTrainer(
        model=model, ref_model=ref_model, dpo_config=cfg, args=training_args,
        train_dataset=train_ds, eval_dataset=eval_ds, tokenizer=tokenizer,
        data_collator=entry.fail_fast(partial(preference_collate_fn, max_seq_len=data_args.max_seq_len)),
        ignore_eos_token=True,  # as run_dpo.py
        callbacks=[entry.make_callback(run_dir / "metrics.jsonl", tokens_per_step, save_reference)],
    )
    entry.phase("trainer")
    return train_and_save(trainer, tokenizer, training_args, resume, save_reference, {
        "base": str(Path(model_dir).resolve()), "method": "dpo", "adapter": bool(cfg.lora), "run": run_dir.name,
        "dpo": {"beta": cfg.beta, "loss_type": cfg.loss_type, "lora": bool(cfg.lora)}})


def train_and_save(trainer, tokenizer, training_args, resume: bool, save_reference, info: dict) -> int:
    """Train (from the last complete checkpoint when resuming), save the model, the tokenizer and the
    round-trip reference, then the marker saying the output is whole (studio_model.json: ``info``
    plus the steps), written last and atomically. DPO's and KTO's entries end alike."""
    from core.train import checkpoints
    from core.workspace import MODEL_MARKER

    out = Path(training_args.output_dir)
    found = checkpoints.last_complete(out) if resume else None
    trainer.train(resume_from_checkpoint=str(found) if found else None)
    trainer.save_model(training_args.output_dir)
    if training_args.should_save:
        tokenizer.save_pretrained(training_args.output_dir)
        save_reference(out, trainer.state.global_step)
        tmp = out / f".{MODEL_MARKER}.tmp"
        tmp.write_text(json.dumps({**info, "steps": trainer.state.global_step}, indent=2), encoding="utf-8")
        os.replace(tmp, out / MODEL_MARKER)
    return 0
