"""Run configuration: dataclasses <-> the PaddleNLP argument JSON that llm/run_finetune.py reads.

A :class:`RunConfig` groups the settings the way the Train tab shows them. ``to_paddlenlp``
writes the flat JSON PaddleNLP reads (method becomes its ``lora``/``prefix_tuning``/... flags);
``from_paddlenlp`` reads it back, and keys it does not model are kept in ``extra`` and
written back untouched. Launch settings (processes, devices, nodes) are not PaddleNLP keys:
they live in ``ParallelSection`` and go to ``studio.json``.

:func:`check` reports every problem at once as ``{"code", "field", "params"}``; the CLI prints
:data:`MESSAGES`, the studio translates the codes.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from core.train import upstream

PRESETS_DIR = Path(__file__).resolve().parents[2] / "presets"
METHODS = ("sft", "lora", "prefix", "vera", "lokr", "reft", "qlora", "pretrain", "dpo", "kto")
DPO_LOSS_TYPES = upstream.DPO_LOSSES
# DPO's settings: the studio's field -> the key upstream's run_dpo.py reads
DPO_KEYS = {"dpo_beta": "beta", "dpo_loss_type": "loss_type", "dpo_lora": "lora", "dpo_sft_loss_ratio": "sft_loss_ratio"}
# KTO's settings: the studio's field -> the key upstream's run_kto.py reads (its KTOConfig)
KTO_KEYS = {"kto_beta": "beta", "kto_desirable_weight": "desirable_weight",
            "kto_undesirable_weight": "undesirable_weight", "kto_lora": "lora"}
# ReFT's settings: the studio's field -> the key upstream's llm/utils ReftArgument reads
REFT_KEYS = {"reft_layers": "layers", "reft_position": "position", "reft_rank": "rank",
             "reft_intervention_type": "intervention_type", "reft_dropout": "dropout"}


def _f(default, help: str, **kw):
    return field(default=default, metadata={"help": help, **kw})


@dataclass
class ModelSection:
    model_name_or_path: str = _f("", "Folder of the base model (PaddleNLP save_pretrained format).")
    tokenizer_name_or_path: str | None = _f(None, "Tokenizer folder, when not the model's own.")


@dataclass
class DataSection:
    dataset_name_or_path: str = _f("", "Dataset folder with train.json (and dev.json for evaluation).")
    src_length: int = _f(1024, "Most prompt tokens kept; longer prompts lose their beginning.")
    max_length: int = _f(2048, "Most prompt + answer tokens; longer answers lose their end.")
    zero_padding: bool = _f(False, "Pack several examples into one sequence instead of padding.")
    greedy_zero_padding: bool = _f(False, "Pack greedily by length (with zero_padding).")
    chat_template: str | None = _f(None, "Chat template file or folder; \"none\": no template; default: the "
                                         "tokenizer's own template.")


@dataclass
class MethodSection:
    method: str = _f("lora", "Training method.", choices=METHODS)
    lora_rank: int = _f(8, "LoRA rank r.")
    rslora: bool = _f(False, "rsLoRA: scale by alpha/sqrt(r) instead of alpha/r.")
    lora_plus_scale: float = _f(1.0, "LoRA+: learning-rate multiplier of the B matrices.")
    pissa: bool = _f(False, "PiSSA: initialise LoRA from the principal singular vectors.")
    use_mora: bool = _f(False, "MoRA: one square high-rank matrix (rotated, compressed input) instead of the low-rank A and B.")
    lora_use_mixer: bool = _f(False, "MoSLoRA: a trainable r x r mixer between LoRA's A and B.")
    num_prefix_tokens: int = _f(128, "Prefix tuning: number of virtual tokens per layer.")
    vera_rank: int = _f(8, "VeRA rank.")
    lokr_dim: int = _f(8, "LoKr dimension.")
    reft_layers: str = _f("all", "ReFT: layers whose output is edited: all, or numbers like 0;2;3.")
    reft_position: str = _f("f7+l7", "ReFT: prompt tokens edited: fN (first N), lN (last N) or fN+lN.")
    reft_rank: int = _f(8, "ReFT: rank of each intervention.")
    reft_intervention_type: str = _f("LoreftIntervention", "ReFT: intervention class.",
                                     choices=("LoreftIntervention", "TinyIntervention"))
    reft_dropout: float = _f(0.0, "ReFT: dropout on the edited states while training.")
    dpo_beta: float = _f(0.1, "DPO: beta, how far the tuned model may move from the reference (higher: less).")
    dpo_loss_type: str = _f("sigmoid", "DPO: preference loss (sigmoid = DPO; simpo and or need no reference).",
                            choices=DPO_LOSS_TYPES)
    dpo_lora: bool = _f(True, "DPO: train LoRA adapters (the reference is the model with them off); off: full DPO "
                              "with a frozen copy as the reference.")
    dpo_sft_loss_ratio: float = _f(0.0, "DPO: weight of an SFT loss on the preferred answers, added to the DPO loss.")
    kto_beta: float = _f(0.1, "KTO: beta, how far the tuned model may move from the reference (higher: less).")
    kto_desirable_weight: float = _f(1.0, "KTO: weight of the loss on answers marked desirable (sort [1]).")
    kto_undesirable_weight: float = _f(1.0, "KTO: weight of the loss on answers marked undesirable (sort [0]).")
    kto_lora: bool = _f(True, "KTO: train LoRA adapters (the reference is the model with them off); off: full KTO "
                              "with a frozen copy as the reference.")
    neftune: bool = _f(False, "NEFTune: add uniform noise to input embeddings while training.")
    neftune_noise_alpha: float = _f(5.0, "NEFTune noise scale alpha.")
    weight_quantize_algo: str | None = _f(None, "QLoRA: quantize base weights (nf4, fp4, weight_only_int8...). GPU only.")


# The methods that read each MethodSection field, as the studio's entries train them: "dpo+dpo_lora" means
# DPO only while its dpo_lora switch is on. A field not named here is read by every method. The Train form
# shows a field only while the chosen method reads it, and sends a hidden field's default (see unread_fields).
_SFT_LIKE = tuple(x for x in METHODS if x not in ("dpo", "kto"))  # run_dpo.py / run_kto.py drop NEFTune
FIELD_METHODS: dict[str, tuple[str, ...]] = {
    "lora_rank": ("lora", "qlora", "dpo+dpo_lora", "kto+kto_lora"),
    "rslora": ("lora", "qlora", "kto+kto_lora"),  # run_dpo.py's JSON drops it (NOT_DPO)
    "lora_plus_scale": ("lora", "qlora", "kto+kto_lora"),  # the studio's DPO builds a plain LoRA
    "pissa": ("lora", "qlora"),
    "use_mora": ("lora", "qlora"),
    "lora_use_mixer": ("lora", "qlora"),
    "num_prefix_tokens": ("prefix",),
    "vera_rank": ("vera",),
    "lokr_dim": ("lokr",),
    **{name: ("reft",) for name in REFT_KEYS},
    **{name: ("dpo",) for name in DPO_KEYS},
    **{name: ("kto",) for name in KTO_KEYS},
    "neftune": _SFT_LIKE,
    "neftune_noise_alpha": tuple(f"{x}+neftune" for x in _SFT_LIKE),
    "weight_quantize_algo": ("qlora",),
}


def reads(m: "MethodSection", name: str) -> bool:
    """Whether method ``m.method``, with the switches as ``m`` has them, reads MethodSection field ``name``."""
    owners = FIELD_METHODS.get(name)
    if owners is None:
        return True
    for owner in owners:
        method, _, switch = owner.partition("+")
        if method == m.method and (not switch or bool(getattr(m, switch))):
            return True
    return False


def unread_fields(m: "MethodSection") -> list[str]:
    """The MethodSection fields ``m.method`` does not read (the Train form hides them and sends their defaults)."""
    return [name for name in FIELD_METHODS if not reads(m, name)]


# The switches FIELD_METHODS depends on (besides method): a change of one changes what the form shows
METHOD_SWITCHES = tuple(dict.fromkeys(o.partition("+")[2] for os_ in FIELD_METHODS.values() for o in os_
                                      if "+" in o))


@dataclass
class TrainingSection:
    per_device_train_batch_size: int = _f(8, "Examples per process per step.")
    per_device_eval_batch_size: int = _f(8, "Examples per process per evaluation step.")
    gradient_accumulation_steps: int = _f(1, "Steps whose gradients are summed before an update.")
    learning_rate: float = _f(2e-5, "Peak learning rate.")
    num_train_epochs: float = _f(1.0, "Passes over the training data (ignored when max_steps > 0).")
    max_steps: int = _f(-1, "Total optimizer steps; -1 means use num_train_epochs.")
    warmup_steps: int = _f(0, "Linear warm-up steps.")
    lr_scheduler_type: str = _f("linear", "Learning-rate schedule (constant ignores warm-up: use constant_with_warmup).",
                                choices=("linear", "cosine", "constant", "constant_with_warmup", "polynomial"))
    logging_steps: int = _f(1, "Write a metrics line every this many steps.")
    report_to: str = _f("none", "Experiment tracker that also receives the logged metrics, in the run's output/vdl "
                                "(the studio's own metrics are kept either way): none, visualdl, tensorboard (needs "
                                "tensorboardX) or wandb (needs wandb and WANDB_MODE=offline).",
                        choices=("none", "visualdl", "tensorboard", "wandb"))
    evaluation_strategy: str = _f("no", "When to evaluate on dev.", choices=("no", "steps", "epoch"))
    eval_steps: int = _f(100, "Evaluate every this many steps (evaluation_strategy=steps).")
    save_strategy: str = _f("steps", "When to save a checkpoint.", choices=("no", "steps", "epoch"))
    save_steps: int = _f(500, "Save every this many steps (save_strategy=steps).")
    save_total_limit: int = _f(2, "Keep at most this many checkpoints.")
    fp16: bool = _f(False, "Mixed precision fp16 (GPU).")
    bf16: bool = _f(False, "Mixed precision bf16 (GPU).")
    fp16_opt_level: str = _f("O1", "AMP level; O2 needs fp16 or bf16.", choices=("O1", "O2"))
    recompute: bool = _f(False, "Recompute activations in backward to save memory.")
    unified_checkpoint: bool = _f(False, "Save checkpoints in PaddleNLP's unified format (safetensors shards) that "
                                         "loads on another number of data-parallel processes.")
    use_flash_attention: bool = _f(False, "FlashAttention (GPU only).")
    flash_mask: bool = _f(False, "FlashMask attention (GPU only, needs zero_padding).")
    seed: int = _f(42, "Random seed.")


@dataclass
class ParallelSection:
    nproc: int = _f(1, "Processes on this machine (CPU data parallel through gloo).")
    devices: str = _f("", "GPU ids, e.g. 0,1 (GPU only).")
    nnodes: int = _f(1, "Machines in the job.")
    master: str = _f("", "host:port of the rank-0 machine (multi-node).")
    rank: int = _f(0, "This machine's node rank (multi-node).")
    tensor_parallel_degree: int = _f(1, "Tensor parallel degree.")
    pipeline_parallel_degree: int = _f(1, "Pipeline parallel degree.")
    sharding: str = _f("", "Sharding stage: '', stage1, stage2 or stage3.")
    sharding_parallel_degree: int = _f(1, "Sharding degree.")
    stall_timeout: int = _f(1800, "Fail the run when its log and metrics stay unchanged this many seconds (0: never; "
                                  "a run over several machines: 300 unless set).")
    early_stopping_patience: int = _f(0, "End the run (saving its model) when the eval loss has not improved for this "
                                         "many evaluations in a row (0: off; needs evaluation).")
    early_stopping_threshold: float = _f(0.0, "With early stopping: an evaluation improves only when its loss is lower "
                                              "than the best so far by more than this.")
    nodes: str = _f("", "Other machines in the run (names from the Cluster tab), comma-separated: node ranks 1, 2, ... in "
                        "this order; this machine is node 0 and holds rank 0 (metrics, checkpoints, outputs).")
    port_range: str = _f("", "Ports the launchers may use on every machine, FIRST-LAST (default 36000-36199 with nodes): "
                             "open them in the firewall; the master port is the first free one here.")

    def node_names(self) -> list[str]:
        return [x.strip() for x in str(self.nodes or "").split(",") if x.strip()]

    def world_size(self):
        """Processes in the whole job: per machine (the GPUs named, else nproc) times the machines
        (this one and the nodes named, else nnodes)."""
        per = len([x for x in self.devices.split(",") if x.strip()]) if self.devices else self.nproc
        return per * (1 + len(self.node_names()) if self.node_names() else max(self.nnodes, 1))


@dataclass
class RunConfig:
    name: str = "run"
    model: ModelSection = field(default_factory=ModelSection)
    data: DataSection = field(default_factory=DataSection)
    method: MethodSection = field(default_factory=MethodSection)
    training: TrainingSection = field(default_factory=TrainingSection)
    parallel: ParallelSection = field(default_factory=ParallelSection)
    extra: dict = field(default_factory=dict)  # PaddleNLP keys this class does not model, kept as-is
    # the flat JSON this config was read from: to_paddlenlp then writes back the keys it had plus
    # only what differs from upstream's defaults (a lossless round trip); None for a new config
    source: dict | None = field(default=None, repr=False, compare=False)

    SECTIONS = ("model", "data", "method", "training", "parallel")

    # -------------------------------------------------- PaddleNLP JSON

    def to_paddlenlp(self, output_dir: str | None = None) -> dict:
        m = self.method
        out: dict = {}
        out.update(asdict(self.model))
        if out["tokenizer_name_or_path"] is None:
            out.pop("tokenizer_name_or_path")
        out.update(asdict(self.data))
        if out["chat_template"] is None:
            out.pop("chat_template")
        out.update(
            lora=m.method in ("lora", "qlora"),
            lora_rank=m.lora_rank,
            rslora=m.rslora,
            lora_plus_scale=m.lora_plus_scale,
            pissa=m.pissa,
            use_mora=m.use_mora,
            lora_use_mixer=m.lora_use_mixer,
            prefix_tuning=m.method == "prefix",
            num_prefix_tokens=m.num_prefix_tokens,
            vera=m.method == "vera",
            vera_rank=m.vera_rank,
            lokr=m.method == "lokr",
            lokr_dim=m.lokr_dim,
            neftune=m.neftune,
            neftune_noise_alpha=m.neftune_noise_alpha,
        )
        if m.method == "reft":
            out["reft"] = True
            out.update({key: getattr(m, name) for name, key in REFT_KEYS.items()})
        if m.weight_quantize_algo:
            out["weight_quantize_algo"] = m.weight_quantize_algo
        out.update(asdict(self.training))
        p = self.parallel
        out.update(
            tensor_parallel_degree=p.tensor_parallel_degree,
            pipeline_parallel_degree=p.pipeline_parallel_degree,
            sharding_parallel_degree=p.sharding_parallel_degree,
        )
        if p.sharding:
            out["sharding"] = p.sharding
        out.update(do_train=True, do_eval=self.training.evaluation_strategy != "no", disable_tqdm=True)
        # metrics go to metrics.jsonl (the studio's callback) either way; training.report_to adds a tracker
        # (core.train.tracking) that logs into logging_dir, inside the run folder
        out["report_to"] = "none" if self.training.report_to is None else self.training.report_to
        if output_dir:
            out["output_dir"] = output_dir
            out.setdefault("logging_dir", str(Path(output_dir) / "vdl"))
        for k, v in self.extra.items():
            out.setdefault(k, v)
        if self.source is not None:
            out = self._as_read(out)
        if m.method == "dpo":
            out = self._dpo_flat(out)
        elif m.method == "kto":
            out = self._kto_flat(out)
        return out

    # SFT keys run_dpo.py does not read (it has its own names for the data and lengths)
    NOT_DPO = ("dataset_name_or_path", "src_length", "max_length", "zero_padding", "chat_template", "prefix_tuning",
               "num_prefix_tokens", "vera", "vera_rank", "lokr", "lokr_dim", "use_mora", "lora_use_mixer", "pissa",
               "neftune", "neftune_noise_alpha", "rslora", "reft", "layers", "position", "rank", "intervention_type",
               "dropout")

    def _preference_flat(self, out: dict, dropped: tuple, keys: dict, table: dict, always: tuple) -> dict:
        """``out`` as run_dpo.py's / run_kto.py's JSON: the SFT keys it does not read dropped, data files
        and lengths under its names, the method's own keys (``keys``: field -> key; ``table``: the
        script's defaults) written when the config is new, the file had them, they are in ``always``
        or they differ from upstream's default; unified_checkpoint false (upstream's default true is
        not for CPU)."""
        m, d = self.method, self.data
        ds = Path(d.dataset_name_or_path) if d.dataset_name_or_path else None
        flat = {k: v for k, v in out.items() if k not in dropped}
        src = self.source or {}
        for key, name in (("train_dataset_path", "train.json"), ("dev_dataset_path", "dev.json")):
            kept = src.get(key) or self.extra.get(key)
            if kept and ds and Path(kept).parent == ds:
                flat[key] = kept
            elif ds:
                flat[key] = str(ds / name)
        if not flat.get("do_eval"):
            flat.pop("dev_dataset_path", None)
        own = dict(max_seq_len=d.max_length, max_prompt_len=d.src_length, lora_rank=m.lora_rank,
                   **{key: getattr(m, name) for name, key in keys.items()})
        for k, v in own.items():  # read from a file: its keys, plus only what differs from the script's defaults
            if self.source is None or k in src or k in always or v != table[k][2]:
                flat[k] = v
        if self.source is None or "unified_checkpoint" in src:
            flat.setdefault("unified_checkpoint", False)
        return flat

    def _dpo_flat(self, out: dict) -> dict:
        """The same run as llm/alignment/dpo/run_dpo.py's JSON: data files and lengths under its names,
        beta / loss_type / lora / sft_loss_ratio, and nothing it would refuse. beta and loss_type are
        always written: they say which upstream entry the file is for."""
        from core.train import upstream

        return self._preference_flat(out, self.NOT_DPO, DPO_KEYS, upstream.DPO_ARGUMENT_KEYS, ("beta", "loss_type"))

    # SFT keys run_kto.py does not read: DPO's list less rslora, which KTOModelArgument reads and the
    # studio's KTO entry honours
    NOT_KTO = tuple(k for k in NOT_DPO if k != "rslora")

    def _kto_flat(self, out: dict) -> dict:
        """The same run as llm/alignment/kto/run_kto.py's JSON: data files and lengths under its names,
        beta / desirable_weight / undesirable_weight / lora, and nothing it would refuse. The two
        weights are always written: they are the keys that say a file is run_kto.py's (a run's
        config.json has no file name that could)."""
        from core.train import upstream

        flat = self._preference_flat(out, self.NOT_KTO, KTO_KEYS, upstream.KTO_ARGUMENT_KEYS,
                                     ("beta", "desirable_weight", "undesirable_weight"))
        if self.source is not None and "rslora" not in self.source and not flat.get("rslora"):
            flat.pop("rslora", None)
        return flat

    ALWAYS = ("output_dir", "logging_dir", "report_to", "disable_tqdm", "do_train", "device")

    def _as_read(self, out: dict) -> dict:
        """``out`` cut back to the keys of the file it was read from, plus every key whose value now
        differs from upstream's default; an explicit do_eval stays as the file said."""
        from core.train import upstream

        src = self.source
        if "do_eval" in src and isinstance(src["do_eval"], bool) and \
                (src.get("evaluation_strategy", "no") != "no") == (out.get("evaluation_strategy", "no") != "no"):
            out["do_eval"] = src["do_eval"]
        kept = {}
        for k, v in out.items():
            if k in src or k in self.ALWAYS:
                kept[k] = v
                continue
            try:
                up = upstream.default(k)
            except KeyError:
                kept[k] = v
                continue
            if v == up or (k in self.DEGREES and v == 1 and up in (-1, 1)):  # -1: "the rest"; 1 here
                continue
            kept[k] = v
        for k, v in src.items():  # a key the file had and the studio writes only when set (sharding: "")
            if k not in out and (k not in self.WRITTEN_WHEN_SET or not v):
                kept[k] = v
        return kept

    WRITTEN_WHEN_SET = ("sharding", "weight_quantize_algo", "chat_template", "tokenizer_name_or_path")
    DEGREES = ("tensor_parallel_degree", "pipeline_parallel_degree", "sharding_parallel_degree")

    @classmethod
    def from_paddlenlp(cls, d: dict, name: str = "run", parallel: dict | None = None,
                       entry: str | None = None) -> "RunConfig":
        """``entry``: the upstream entry ``d`` is for ("dpo", "kto") where its keys alone cannot tell
        (run_kto.py's file without desirable_weight: its file name told); else told by its keys."""
        from core.train import upstream

        d = dict(d)
        cfg = cls(name=name)
        known: set[str] = set()
        for obj in (cfg.model, cfg.data, cfg.training, cfg.method):
            for f in fields(obj):
                if f.name in d:
                    setattr(obj, f.name, d[f.name])
                    known.add(f.name)
                elif f.name != "method":  # a key the file leaves out means upstream's default
                    try:
                        setattr(obj, f.name, upstream.default(f.name))
                    except KeyError:
                        pass
        if "chat_template" in d and d["chat_template"] is None:  # upstream reads null as "None": no template
            cfg.data.chat_template = "none"  # (None here means the key left out: the tokenizer's own)
        if cfg.training.report_to is None:  # left out (upstream's None means VisualDL): the studio writes "none"
            cfg.training.report_to = "none"  # explicitly, its metrics.jsonl being the record it reads
        m = cfg.method
        if entry not in ("dpo", "kto"):
            entry = (upstream.entry_of(d) or ("",))[0]
        if entry in ("dpo", "kto"):  # run_dpo.py's / run_kto.py's names for the data and lengths
            keys, defaults = ((DPO_KEYS, upstream.DPO_ARGUMENT_KEYS) if entry == "dpo"
                              else (KTO_KEYS, upstream.KTO_ARGUMENT_KEYS))
            train = d.get("train_dataset_path")
            if train:
                cfg.data.dataset_name_or_path = str(Path(train).parent)
            if "max_seq_len" in d:
                cfg.data.max_length = d["max_seq_len"]
            if "max_prompt_len" in d:
                cfg.data.src_length = d["max_prompt_len"]
            for name, key in keys.items():  # a key the file leaves out means the script's default
                setattr(m, name, d.get(key, defaults[key][2]))
            m.lora_rank = d.get("lora_rank", defaults["lora_rank"][2])
            known |= {"train_dataset_path", "dev_dataset_path", "max_seq_len", "max_prompt_len", "unified_checkpoint",
                      *keys.values()}
            m.method = entry
        for name, key in REFT_KEYS.items():
            if key in d:
                setattr(m, name, d[key])
                known.add(key)
        if m.method in ("dpo", "kto"):
            pass
        elif d.get("reft"):
            m.method = "reft"
        elif d.get("prefix_tuning"):
            m.method = "prefix"
        elif d.get("vera"):
            m.method = "vera"
        elif d.get("lokr"):
            m.method = "lokr"
        elif d.get("lora"):
            m.method = "qlora" if d.get("weight_quantize_algo") else "lora"
        else:
            m.method = "sft"
        known |= {"lora", "prefix_tuning", "vera", "lokr", "reft", "do_train", "do_eval", "disable_tqdm",
                  "output_dir", "logging_dir", "report_to"}
        p = cfg.parallel
        for k in ("tensor_parallel_degree", "pipeline_parallel_degree", "sharding_parallel_degree", "sharding"):
            if k in d:
                setattr(p, k, d[k])
                known.add(k)
        if d.get("sharding") and "sharding_parallel_degree" not in d:
            p.sharding_parallel_degree = -1  # upstream's default: every process not in tensor/pipeline groups
        for k, v in (parallel or {}).items():
            setattr(p, k, v)
        cfg.extra = {k: v for k, v in d.items() if k not in known}
        cfg.source = dict(d)
        return cfg

    # -------------------------------------------------- studio form

    def to_dict(self) -> dict:
        return {"name": self.name, **{s: asdict(getattr(self, s)) for s in self.SECTIONS}, "extra": self.extra}

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        cfg = cls(name=d.get("name", "run"), extra=dict(d.get("extra", {})))
        for s in cls.SECTIONS:
            obj = getattr(cfg, s)
            for f in fields(obj):
                if f.name in d.get(s, {}):
                    setattr(obj, f.name, d[s][f.name])
        if "report_to" in cfg.extra and "report_to" not in d.get("training", {}):  # saved before it was a field
            cfg.training.report_to = cfg.extra.pop("report_to")
        return cfg


# ---------------------------------------------------------------- checks

MESSAGES = {
    "required": "{field} is required",
    "path_missing": "{field}: no such folder {path}",
    "no_train_file": "{field}: {path} has no train.json",
    "no_dev_file": "evaluation is on but {path} has no dev.json",
    "not_a_model": "{field}: {path} has no config.json",
    "no_family": "{field}: model_type {model_type!r} has no family preset (presets/models); supported: {known}",
    "text_needs_pretrain": "{path} holds raw text (no questions and answers): train it with the pretrain method",
    "prefix_unsupported": "prefix tuning does not work with {family} models: {why}",
    "reft_unsupported": "ReFT does not work with {family} models: {why}",
    "early_stopping_needs_eval": "early stopping watches the eval loss: turn evaluation on (evaluation_strategy steps or epoch)",
    "layout_unsupported": ("{what} does not work with {family} models: it builds 2-D padding masks, and they need a "
                           "4-D blank-infilling mask with 2-D positions"),
    "preference_needs_dpo": "{path} holds preference pairs (two answers, one preferred): train it with the dpo method",
    "dpo_needs_preference": ("DPO trains on preference pairs ({{src, tgt, response: [better, worse], sort}} or "
                             "{{prompt, chosen, rejected}}); {path} holds none"),
    "dpo_one_process": "DPO trains in one process in the studio ({world} asked): set nproc to 1",
    "dpo_too_few_pairs": ("{path} holds {n} preference pair(s); DPO is refused on fewer than {need}: the larger of "
                          "{least} (fewer teach those answers, not a preference) and one optimizer step's worth "
                          "(per_device_train_batch_size {batch} x {world} process(es) x gradient_accumulation_steps "
                          "{accum}). Keep more pairs in the Chat tab's compare mode, or import a larger preference "
                          "dataset"),
    "kto_records_need_kto": ("{path} holds KTO records (one answer each, marked desirable or undesirable by sort): "
                             "train it with the kto method"),
    "kto_needs_records": ("KTO trains on records of one answer marked desirable or not ({{src, tgt, response: "
                          "[answer], sort: [1 or 0]}}); {path} holds none"),
    "kto_one_process": ("KTO trains in one process in the studio ({world} asked; upstream's KTO loss gathers its KL "
                        "term over a hybrid-parallel group): set nproc to 1"),
    "kto_ignored_key": "{key} changes nothing in run_kto.py ({why}): leave it out",
    "unapplied_key": ("{key} = {value}: upstream's {script} applies it, the studio's {method} does not yet (it would "
                      "train without it): leave it out, or train with upstream's script"),
    "kto_bad_records": ("{path}: {bad} of {total} records are not KTO records; line {line}, {where}: {detail}; "
                        "`paddle-studio data validate {path}` lists every one"),
    "reft_with_packing": "ReFT edits each prompt's own first and last tokens: turn zero_padding (packing) off",
    "reft_one_process": ("ReFT trains in one process here ({world} asked): its interventions are not sublayers of the "
                         "model, so data-parallel gradient sync would miss them; set nproc to 1"),
    "hub_id": ("{field}: {path} is a model hub id, not a folder here: the studio trains from a local folder "
               "(nothing is downloaded at run time). Fetch it on a machine with internet, e.g. "
               "`huggingface-cli download {path} --local-dir DIR` or PaddleNLP's "
               "AutoModelForCausalLM.from_pretrained(\"{path}\").save_pretrained(DIR), copy DIR here and point "
               "{field} at it"),
    "bad_value": "{field} must be {expected}, got {value!r}",
    "tracker_unknown": "report_to {value!r}: PaddleNLP knows no such tracker; choose one of {expected}",
    "tracker_missing": ("report_to {tracker}: its package {package} is not installed here (PaddleNLP would stop at "
                        "the run's start): `pip install {package}`, or choose none (the studio's own metrics stay)"),
    "wandb_online": ("report_to wandb: the studio sends no run over the network (wandb would need a login a training "
                     "process cannot give); start the studio with WANDB_MODE=offline (now {mode!r}): logs go to the "
                     "run's logging_dir, `wandb sync` them later"),
    "max_length_le_src": "max_length ({max_length}) must be greater than src_length ({src_length})",
    "prefix_with_pipeline": "prefix tuning does not work with pipeline parallel (pipeline_parallel_degree={pp})",
    "flash_mask_needs_zero_padding": "flash_mask needs zero_padding",
    "opt_level_needs_amp": "fp16_opt_level O2 needs fp16 or bf16",
    "fp16_and_bf16": "choose fp16 or bf16, not both",
    "needs_gpu": "{feature} needs a GPU; none is present{why}",
    "sharding_shards_nothing": ("sharding {sharding} over one rank shards nothing (PaddleNLP: \"sharding_parallel_degree=1 "
                                "means no sharding\"): set sharding_parallel_degree to the processes that share the "
                                "optimizer state (here up to {world}), or -1 for all of them"),
    "sharding_degree_without_stage": ("sharding_parallel_degree does nothing without a sharding stage (PaddleNLP: \"useful "
                                      "only when --sharding is specified\"): choose stage1, or set the degree to 1"),
    "pipeline_needs_pipe_model": ("pipeline parallel ({pp} stages) needs PaddleNLP's pipeline model class "
                                  "(AutoModelForCausalLMPipe), which the studio's training entry does not build: paddle "
                                  "stops with \"Only support pipeline parallel mode when model is PipelineLayer\""),
    "tp_with_vera_lokr": "tensor parallel does not work with {method}",
    "mora_with_mixer": "MoRA and MoSLoRA's mixer are two different LoRA variants: choose one",
    "tp_with_mora_mixer": "tensor parallel does not work with MoRA or MoSLoRA (PaddleNLP refuses it)",
    "lora_variant_needs_lora": "MoRA and MoSLoRA are variants of LoRA: set the method to lora",
    "devices_on_cpu": "--devices needs GPUs; on CPU use nproc (processes) instead",
    "degrees_do_not_divide": "tensor x pipeline x sharding degrees ({product}) must divide the number of processes ({world})",
    "multinode_needs_master": "more than one node needs master host:port",
    "nodes_vs_nnodes": "nnodes is {nnodes} but this machine and the nodes named make {n}: leave nnodes at 1 (it follows the nodes)",
    "nodes_on_head": "a run with nodes starts on its head, node rank 0: leave rank at 0",
    "node_twice": "a node is named twice: each machine takes one node rank",
    "bad_port_range": ("port_range {value!r}: FIRST-LAST with 1024 <= FIRST and at least 9 ports (the launcher takes a "
                       "port per process and a few of its own), e.g. 36000-36199"),
    "qlora_needs_algo": "QLoRA needs weight_quantize_algo (nf4 or fp4)",
    "unknown_method": "unknown method {method!r}; expected one of {expected}",
    "cpu_refused": "{key} does not work on this machine (no GPU): {why}",
    "device_not_here": "device {device!r}: this machine has no GPU; write \"cpu\" (the run would train on the CPU "
                       "while its config says {device})",
    "fused_layout_with_adapter": ("{key} fuses layers ({targets}) into one: the {method} adapter would be trained on "
                                  "the fused layer, while chat, merge and evaluation load the base model unfused, so "
                                  "it would not load back as trained; turn {key} off or train sft"),
    "warmup_ignored": ("warmup_steps ({warmup}) is ignored by the constant schedule: choose constant_with_warmup, "
                       "or set warmup_steps to 0"),
    "not_a_folder": "{field}: {path} is {kind}, not a folder",
    "model_config_not_json": "{field}: {path} is not valid JSON: line {line}, column {column}: {detail}",
    "model_config_unreadable": "{field}: {path} cannot be read as JSON text: {detail}",
    "no_train_records": ("{field}: {path} holds no training record ({why}): the run would stop at its start "
                         "(\"num_samples=0\"); `paddle-studio data validate {path}` lists every line's problem"),
    "too_many_steps": ("{field}: this run would take about {steps} optimizer steps ({epochs} epochs x {per_epoch} "
                       "per epoch{records}); more than {limit} is refused ({why}): lower num_train_epochs or set "
                       "max_steps"),
    "nproc_over_cores": ("{field}: {nproc} processes on a machine with {cores} CPU cores: every rank of CPU data "
                         "parallel needs a core of its own (64 ranks on 2 cores made no step in 45 s); set nproc to at "
                         "most {cores}"),
    "ranks_over_gpus": ("{field}: {ranks} processes on a machine with {gpus} GPU(s): each process takes a GPU of its "
                        "own; use at most {gpus}"),
}

# The most optimizer steps a run may take: 1e7 steps last more than a day even at 100 steps a second
# (the tiny demo model's pace on these CPUs is ~65 steps/s) and are far beyond any fine-tuning run;
# a number above it is a typo (num_train_epochs 1e9 made 188 billion steps) or an unbounded value.
MAX_TOTAL_STEPS = 10_000_000
# numpy's seed range: PaddleNLP's set_seed calls np.random.seed(seed), which takes 0 .. 2**32 - 1
# (paddle.seed(-1) fails: "incompatible function arguments ... Generator")
MAX_SEED = 2**32 - 1
# what a path is when it is not a folder, for not_a_folder (English, 中文)
PATH_KINDS = {
    "file": ("a file", "文件"),
    "symlink_loop": ("a loop of symbolic links", "循环的符号链接"),
    "dangling_link": ("a symbolic link to nothing", "指向不存在目标的符号链接"),
    "is_fifo": ("a FIFO (named pipe)", "FIFO（命名管道）"),
    "is_device": ("a device file", "设备文件"),
    "is_socket": ("a socket", "套接字"),
}


# Keys PaddleNLP accepts that do nothing or fail on a machine without a GPU, each with what was
# measured here (paddle 3.0.0 CPU, paddlenlp 3.0.0b4, the demo LLaMA): the check refuses them on
# CPU instead of letting the run ignore them. (English, 中文)
CPU_REFUSED = {
    "use_fused_rms_norm": ("PaddleNLP's fused RMSNorm imports the GPU-only fused_ln module (\"Failed importing fused_ln\")",
                           "PaddleNLP 的融合 RMSNorm 需要仅 GPU 可用的 fused_ln 模块（“Failed importing fused_ln”）"),
    "use_fused_rope": ("PaddleNLP switches the fused rotary embedding off when no GPU is present and trains with the "
                       "plain one, so the switch would do nothing",
                       "没有 GPU 时 PaddleNLP 会关闭融合旋转位置编码、改用普通实现，这个开关不会生效"),
    "use_fused_linear_cross_entropy": ("it needs the paddlenlp_kernel package (GPU kernels; \"No module named "
                                       "'paddlenlp_kernel'\")",
                                       "需要 paddlenlp_kernel 包（GPU 算子；“No module named 'paddlenlp_kernel'”）"),
    "use_fused_linear": ("GPT's fused linear layer is a GPU kernel (paddle.incubate); other families ignore the switch",
                         "GPT 的融合线性层是 GPU 算子（paddle.incubate）；其他模型系列会忽略这个开关"),
    "use_fused_dropout_add": ("GPT's fused dropout + residual add is a GPU kernel (paddle.incubate); other families "
                              "ignore the switch",
                              "GPT 的融合 dropout + 残差相加是 GPU 算子（paddle.incubate）；其他模型系列会忽略这个开关"),
    "sequence_parallel": ("it splits activations between tensor-parallel ranks, so it needs tensor_parallel_degree > 1 "
                          "(paddle fails without a hybrid group: \"'Fleet' object has no attribute '_hcg'\")",
                          "它在张量并行的各进程间切分激活，需要 tensor_parallel_degree > 1（没有混合并行组时 paddle 报错："
                          "“'Fleet' object has no attribute '_hcg'”）"),
    "amp_master_grad": ("it keeps fp32 master gradients for O2 mixed precision (fp16/bf16), which needs a GPU: on CPU "
                        "it would do nothing",
                        "它为 O2 混合精度（fp16/bf16）保留 fp32 主梯度，而混合精度需要 GPU：在 CPU 上不会生效"),
    "fp16_full_eval": ("it casts the model to fp16 to evaluate, and fp16 needs a GPU here (fp16 itself is refused on CPU)",
                       "它把模型转成 fp16 来评估，而 fp16 在这里需要 GPU（CPU 上 fp16 本身也会被拒绝）"),
}
# Why each GPU-only switch of the form cannot run here, as paddle 3.0.0 / paddlenlp 3.0.0b4 said it
# on this CPU machine (gloo, 2 processes where it takes them). Sharding stage 1 is not here: it
# trains on CPU (tests/test_parallel_env.py). (English, 中文)
GPU_REASONS = {
    "training.use_flash_attention": ("paddle: \"Expected is_gpu_place == true\" in its fused softmax mask kernel",
                                     "paddle 报错：融合 softmax 掩码算子要求 GPU（is_gpu_place）"),
    "training.fp16": ("paddle's GradScaler fails at the first step on CPU: \"'GradScaler' object has no attribute "
                      "'_cache_found_inf'\"", "CPU 上 paddle 的 GradScaler 在第一步就报错（_cache_found_inf）"),
    "training.bf16": ("paddle's AMP does nothing on CPU: a bf16 O1 run's losses equal float32's to the last digit",
                      "paddle 的自动混合精度在 CPU 上不起作用：bf16 O1 的损失与 float32 逐位相同"),
    "parallel.tensor_parallel_degree": ("paddle's tensor-parallel layers: \"Only support xpu, gpu and custom_device now, "
                                        "but this is cpu\"", "paddle 的张量并行层报错：只支持 xpu、gpu 和自定义设备"),
    "parallel.sharding": ("paddle: \"group_sharded_parallel only support gpu, xpu and custom_device now\"; stage1 "
                          "trains on CPU", "paddle 报错：group_sharded_parallel 只支持 gpu、xpu 和自定义设备；stage1 可在 CPU 上训练"),
}
# switches that re-shape the model's layers: a LoRA-family method's targets (the family preset's
# q_proj, k_proj, v_proj, gate_proj, up_proj) would then match nothing of what they fused
FUSED_LAYOUT = {"fuse_attention_qkv": "q, k, v", "fuse_attention_ffn": "gate, up"}  # switch -> the layers it fuses


def check_message(p: dict) -> str:
    try:
        return MESSAGES[p["code"]].format(field=p.get("field"), **p.get("params", {}))
    except (KeyError, IndexError, ValueError):
        return p["code"]


def _model_type(model_dir: str) -> str:
    try:
        return json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8")).get("model_type", "") or ""
    except (OSError, ValueError, AttributeError, TypeError):
        return ""


def looks_like_hub_id(path: str) -> bool:
    """``org/name`` (as on Hugging Face or AI Studio) that is no folder here."""
    import re

    return bool(re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", path or "")) and not Path(path).exists() \
        and not path.startswith((".", "~"))


def cpu_cores() -> int:
    """CPU cores this process may run on (its affinity; os.cpu_count() where that is unknown)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def gpu_count() -> int:
    from core import system

    return len(system.gpus())


def _path_kind(path: str) -> str | None:
    """A PATH_KINDS key for a path that exists in some form but is no folder; None when nothing is there."""
    from core.data import datasets

    if Path(path).is_file():
        return "file"
    code, _ = datasets.path_problem(path)
    return code if code in PATH_KINDS else None


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _train_records(ds: str) -> int | None:
    """How many training records a dataset folder holds, when it is cheap to tell: its meta.json's
    count (an imported dataset), else the lines of train files up to 64 MB in all; None otherwise."""
    from core import workspace
    from core.data import datasets

    d = Path(ds)
    try:
        meta = json.loads((d / workspace.DATASET_META).read_text(encoding="utf-8"))
        train = d / "train.json"
        if isinstance(meta.get("train"), int) and not isinstance(meta["train"], bool) and (
                not train.is_file() or train.stat().st_mtime <= (d / workspace.DATASET_META).stat().st_mtime):
            return meta["train"]
    except (OSError, ValueError, AttributeError):
        pass
    if not d.is_dir():
        return None
    try:
        files = datasets.resolve_files(d).get("train", [])
        if sum(f.stat().st_size for f in files) > 64 << 20:
            return None
        n = 0
        for f in files:
            with open(f, "rb") as r:
                while chunk := r.read(1 << 20):
                    n += chunk.count(b"\n")
        return n
    except (OSError, ValueError, datasets.DatasetError):
        return None


def _check_steps(cfg: RunConfig, add) -> None:
    """Refuse a run whose epochs make more than MAX_TOTAL_STEPS optimizer steps: epochs x steps per
    epoch, the latter from the training records (when cheap to count) over batch x data-parallel
    processes x gradient accumulation, else at least one."""
    tr, p = cfg.training, cfg.parallel
    records = _train_records(cfg.data.dataset_name_or_path) if cfg.data.dataset_name_or_path else None
    per_epoch = 1
    try:
        if records:
            rest = max(int(p.tensor_parallel_degree), 1) * max(int(p.pipeline_parallel_degree), 1)
            dp = max(int(p.world_size()) // rest, 1)
            batches = math.ceil(records / (max(int(tr.per_device_train_batch_size), 1) * dp))
            per_epoch = max(batches // max(int(tr.gradient_accumulation_steps), 1), 1)
    except (TypeError, ValueError, OverflowError):
        records, per_epoch = None, 1
    steps = math.ceil(tr.num_train_epochs * per_epoch)
    if steps > MAX_TOTAL_STEPS:
        add("too_many_steps", "training.num_train_epochs", steps=f"{steps:,}", epochs=f"{tr.num_train_epochs:g}",
            per_epoch=f"{per_epoch:,}", limit=f"{MAX_TOTAL_STEPS:,}",
            records=f", {records:,} records" if records else "",
            records_zh=f"，{records:,} 条记录" if records else "",
            why="over a day even at 100 steps a second", why_zh="即使每秒 100 步也要一天以上")


def _no_records(ds: str) -> dict | None:
    """{path, why, why_zh} when the training split of a dataset folder holds no record as training
    reads it (src/tgt, raw text, or preference pairs for dpo); None when it holds one, or when the
    folder cannot be read (the run reports that)."""
    from core.data import datasets

    try:
        trains = datasets.resolve_files(ds).get("train", [])
        fmt = datasets.detect_format(ds)
        # as training reads it (entry: text or src/tgt; dpo: its pairs); a format the method does not
        # take is reported by its own check (text_needs_pretrain, dpo_needs_preference, ...)
        read_as = fmt if fmt in ("text", "kto", *datasets.PREFERENCE_FORMATS) else "paddlenlp"
        if not trains or any(datasets.has_records(f, read_as) for f in trains):
            return None
        f = trains[0]
        why = datasets.empty_reason(f)
    except (OSError, ValueError, datasets.DatasetError):
        return None
    if why and why[0] == "empty_file":
        text = ("the file is empty (0 bytes)", "文件为空（0 字节）")
    elif why and why[0] == "only_blank_lines":
        n = why[1]["lines"]
        text = (f"only blank lines: {n}", f"只有空行：{n} 行")
    elif why:
        text = ("an empty JSON array", "空的 JSON 数组")
    elif fmt and fmt != read_as:
        text = (f"its records are in {fmt} format, which training does not read: `paddle-studio data import` "
                "converts them to src/tgt",
                f"其记录为 {fmt} 格式，训练无法读取：请用 `paddle-studio data import` 转换为 src/tgt")
    else:
        text = ("no line is a valid record", "没有一行是有效记录")
    return {"path": str(f), "why": text[0], "why_zh": text[1]}


KTO_CHECK_BYTES = 64 << 20  # KTO files up to this size are validated record by record before a run


def _check_kto_records(ds: str, with_dev: bool, add) -> None:
    """Refuse a KTO dataset whose train (or, when evaluating, dev) file holds a record that is not a
    KTO record, e.g. a sort other than [1] or [0], which upstream's loss would leave out silently:
    the first one, by file, line and field."""
    from core.data import datasets

    try:
        files = datasets.resolve_files(ds)
    except (OSError, ValueError, datasets.DatasetError):
        return
    for split in ("train", "dev") if with_dev else ("train",):
        for f in files.get(split, []):
            try:
                if not f.stat().st_size or f.stat().st_size > KTO_CHECK_BYTES:
                    continue
                rep = datasets.validate(f, "kto", max_errors=20)
            except (OSError, ValueError, datasets.DatasetError):
                continue
            if rep.bad:
                first = next((x for x in rep.problems if x.severity == "error"), None)
                add("kto_bad_records", "data.dataset_name_or_path", path=str(f), bad=rep.bad, total=rep.records,
                    line=first.line if first else "?", where=(first.field or "the record") if first else "?",
                    detail=first.message if first else "")


# The fewest preference pairs a DPO run is accepted on: fewer teach the model those few answers, not a
# preference (one pair made a 1-step run of one example)
MIN_DPO_PAIRS = 8


def _check_dpo_pairs(cfg: RunConfig, ds: str, fmt: str, add) -> None:
    """Refuse a preference dataset with fewer training pairs than MIN_DPO_PAIRS or than one optimizer
    step takes (batch x data-parallel processes x gradient accumulation); counting stops there."""
    import itertools

    from core.data import datasets

    tr, p = cfg.training, cfg.parallel
    try:
        batch, accum = int(tr.per_device_train_batch_size), int(tr.gradient_accumulation_steps)
        world = int(p.world_size())
    except (TypeError, ValueError, OverflowError):
        return  # a bad number is reported by its own check
    if batch <= 0 or accum <= 0 or world <= 0:
        return
    need = max(MIN_DPO_PAIRS, batch * world * accum)
    if need > 100_000:  # not worth counting: a batch that large is a typo the estimate shows
        return
    try:
        n = 0
        for f in datasets.resolve_files(ds).get("train", []):
            n += sum(1 for _ in itertools.islice(datasets.iter_records(f, fmt), need - n))
            if n >= need:
                return
    except (OSError, ValueError, datasets.DatasetError):
        return
    if n:  # none at all: no_train_records says so
        add("dpo_too_few_pairs", "data.dataset_name_or_path", path=ds, n=n, need=need, least=MIN_DPO_PAIRS,
            batch=batch, world=world, accum=accum)


def check(cfg: RunConfig, has_gpu: bool | None = None) -> list[dict]:
    """Every problem of ``cfg`` at once; [] when it can run here."""
    if has_gpu is None:
        from core import system

        has_gpu = bool(system.gpus())
    out: list[dict] = []

    def add(code, field="", **params):
        out.append({"code": code, "field": field, "params": params})

    m, d, tr, p = cfg.method, cfg.data, cfg.training, cfg.parallel
    if m.method not in METHODS:
        add("unknown_method", "method.method", method=m.method, expected=", ".join(METHODS))
    model_dir = cfg.model.model_name_or_path
    if not model_dir:
        add("required", "model.model_name_or_path")
    elif not Path(model_dir).is_dir():
        kind = _path_kind(model_dir)
        if kind:
            add("not_a_folder", "model.model_name_or_path", path=model_dir, kind=PATH_KINDS[kind][0],
                kind_zh=PATH_KINDS[kind][1])
        else:
            add("hub_id" if looks_like_hub_id(model_dir) else "path_missing", "model.model_name_or_path",
                path=model_dir)
    elif not (Path(model_dir) / "config.json").is_file():
        add("not_a_model", "model.model_name_or_path", path=model_dir)
    else:
        cfg_path = Path(model_dir) / "config.json"
        mtype = None
        try:
            obj = json.loads(cfg_path.read_text(encoding="utf-8"))
            mtype = obj.get("model_type", "") if isinstance(obj, dict) else None
            if not isinstance(obj, dict):
                add("model_config_unreadable", "model.model_name_or_path", path=str(cfg_path),
                    detail=f"expected a JSON object, found {type(obj).__name__}")
        except json.JSONDecodeError as e:
            add("model_config_not_json", "model.model_name_or_path", path=str(cfg_path), line=e.lineno,
                column=e.colno, detail=e.msg)
        except UnicodeDecodeError as e:
            add("model_config_unreadable", "model.model_name_or_path", path=str(cfg_path),
                detail=f"not UTF-8 text (byte {e.start})")
        except (OSError, ValueError) as e:
            add("model_config_unreadable", "model.model_name_or_path", path=str(cfg_path), detail=str(e))
        fam = family_of_type(mtype) if mtype is not None else None
        if mtype is None:  # config.json itself is the problem, said above
            pass
        elif fam is None:
            add("no_family", "model.model_name_or_path", model_type=mtype,
                known=", ".join(sorted(t for f in family_presets().values() for t in f["model_types"])))
        elif m.method == "prefix" and fam.get("prefix") is not True:
            add("prefix_unsupported", "method.method", family=fam["family"],
                why=(fam.get("prefix") or {}).get("unsupported", "not supported"))
        elif m.method == "reft" and fam.get("reft") is not True:
            add("reft_unsupported", "method.method", family=fam["family"],
                why=(fam.get("reft") or {}).get("unsupported", "not supported"))
        if fam is not None and fam.get("inputs"):  # ChatGLM v1 / GLM: core.models.layouts builds what they need
            if m.method in ("dpo", "kto"):  # PaddleNLP's preference collators pack rows with their own 2-D layout
                add("layout_unsupported", "method.method", what=m.method.upper(), what_zh=m.method.upper(), family=fam["family"])
            elif d.zero_padding:
                add("layout_unsupported", "data.zero_padding", what="zero padding (packing)", what_zh="零填充（打包）",
                    family=fam["family"])
    ds = d.dataset_name_or_path
    if not ds:
        add("required", "data.dataset_name_or_path")
    elif not Path(ds).is_dir():
        kind = _path_kind(ds)
        if kind:
            add("not_a_folder", "data.dataset_name_or_path", path=ds, kind=PATH_KINDS[kind][0],
                kind_zh=PATH_KINDS[kind][1])
        else:
            add("path_missing", "data.dataset_name_or_path", path=ds)
    else:
        if not (Path(ds) / "train.json").is_file() and not (Path(ds) / "train").is_dir():
            add("no_train_file", "data.dataset_name_or_path", path=ds)
        dev = Path(ds) / "dev.json"
        has_dev = (dev.is_file() and dev.stat().st_size > 0) or (Path(ds) / "dev").is_dir()
        if tr.evaluation_strategy != "no" and not has_dev:
            add("no_dev_file", "training.evaluation_strategy", path=ds)
        if (Path(ds) / "train.json").is_file():
            from core.data import datasets

            try:
                fmt = datasets.detect_format(ds)
            except Exception:  # noqa: BLE001 - an unreadable dataset is the run's to report
                fmt = None
            if fmt == "text" and m.method != "pretrain":
                add("text_needs_pretrain", "method.method", path=ds)
            elif fmt in datasets.PREFERENCE_FORMATS and m.method != "dpo":
                add("preference_needs_dpo", "method.method", path=ds)
            elif fmt == "kto" and m.method != "kto":
                add("kto_records_need_kto", "method.method", path=ds)
            elif m.method == "dpo" and fmt not in datasets.PREFERENCE_FORMATS:
                add("dpo_needs_preference", "data.dataset_name_or_path", path=ds)
            elif m.method == "dpo":
                _check_dpo_pairs(cfg, ds, fmt, add)
            elif m.method == "kto" and fmt != "kto":
                add("kto_needs_records", "data.dataset_name_or_path", path=ds)
            if m.method == "kto" and fmt == "kto":
                _check_kto_records(ds, tr.evaluation_strategy != "no", add)
        if (Path(ds) / "train.json").is_file() or (Path(ds) / "train").is_dir():
            empty = _no_records(ds)
            if empty:
                add("no_train_records", "data.dataset_name_or_path", **empty)

    def positive(sec, name, value, integer=True):
        if not _finite(value) or value <= 0 or (integer and int(value) != value):
            add("bad_value", f"{sec}.{name}", expected="a positive " + ("integer" if integer else "finite number"),
                value=value)

    positive("data", "src_length", d.src_length)
    positive("data", "max_length", d.max_length)
    if isinstance(d.src_length, int) and isinstance(d.max_length, int) and d.max_length <= d.src_length:
        add("max_length_le_src", "data.max_length", max_length=d.max_length, src_length=d.src_length)
    positive("training", "per_device_train_batch_size", tr.per_device_train_batch_size)
    positive("training", "gradient_accumulation_steps", tr.gradient_accumulation_steps)
    positive("training", "learning_rate", tr.learning_rate, integer=False)
    positive("training", "logging_steps", tr.logging_steps)
    by_epochs = tr.max_steps is None or (_finite(tr.max_steps) and tr.max_steps <= 0)
    if by_epochs:
        positive("training", "num_train_epochs", tr.num_train_epochs, integer=False)
    elif not _finite(tr.max_steps) or int(tr.max_steps) != tr.max_steps or tr.max_steps > MAX_TOTAL_STEPS:
        add("bad_value", "training.max_steps", value=tr.max_steps,
            expected=f"a whole number of steps up to {MAX_TOTAL_STEPS:,} (more lasts over a day even at 100 steps a "
                     "second), or -1 to train num_train_epochs")
    if by_epochs and _finite(tr.num_train_epochs) and tr.num_train_epochs > 0:
        _check_steps(cfg, add)
    if not isinstance(tr.seed, int) or isinstance(tr.seed, bool) or not 0 <= tr.seed <= MAX_SEED:
        add("bad_value", "training.seed", value=tr.seed,
            expected=f"an integer from 0 to {MAX_SEED} (PaddleNLP seeds numpy with it, and numpy takes no other)")
    if not isinstance(tr.warmup_steps, int) or isinstance(tr.warmup_steps, bool) or tr.warmup_steps < 0:
        add("bad_value", "training.warmup_steps", value=tr.warmup_steps,
            expected="0 or a positive whole number of steps")
    ratio = (cfg.extra or {}).get("warmup_ratio")
    if ratio is not None and (not _finite(ratio) or not 0 <= ratio <= 1):
        add("bad_value", "extra.warmup_ratio", value=ratio,
            expected="a number from 0 to 1, the share of the steps spent warming up (PaddleNLP: \"warmup_ratio "
                     "must lie in range [0,1]\")")
    if m.method in ("lora", "qlora"):
        positive("method", "lora_rank", m.lora_rank)
    if m.method == "prefix":
        positive("method", "num_prefix_tokens", m.num_prefix_tokens)
        if p.pipeline_parallel_degree > 1:
            add("prefix_with_pipeline", "method.method", pp=p.pipeline_parallel_degree)
    if m.method == "reft":
        from core.models import reft

        positive("method", "reft_rank", m.reft_rank)
        try:
            reft.parse_position(m.reft_position)
        except ValueError:
            add("bad_value", "method.reft_position", expected="fN, lN or fN+lN, e.g. f7+l7", value=m.reft_position)
        if not re.fullmatch(r"\s*(all|\d+([;,]\d+)*)\s*", str(m.reft_layers), re.I):
            add("bad_value", "method.reft_layers", expected="all, or layer numbers like 0;2;3", value=m.reft_layers)
        if m.reft_intervention_type not in reft.INTERVENTIONS:
            add("bad_value", "method.reft_intervention_type", value=m.reft_intervention_type,
                expected="one of " + ", ".join(reft.INTERVENTIONS))
        if d.zero_padding:
            add("reft_with_packing", "data.zero_padding")
        world_r = p.world_size()
        if world_r > 1:
            add("reft_one_process", "parallel.nproc", world=world_r)
    if m.method == "dpo":
        positive("method", "dpo_beta", m.dpo_beta, integer=False)
        if m.dpo_loss_type not in DPO_LOSS_TYPES:
            add("bad_value", "method.dpo_loss_type", value=m.dpo_loss_type, expected="one of " + ", ".join(DPO_LOSS_TYPES))
        if m.dpo_lora:
            positive("method", "lora_rank", m.lora_rank)
            x_d = cfg.extra or {}
            for key, unset in (("rslora", False), ("rslora_plus", False), ("lora_plus_scale", 1.0), ("lora_path", None)):
                if key in x_d and x_d[key] not in (unset, None):  # run_dpo.py applies them; the studio's DPO does not
                    add("unapplied_key", f"extra.{key}", key=key, value=x_d[key], method="DPO",
                        script="llm/alignment/dpo/run_dpo.py")
            for key, unset in (("rslora", False), ("lora_plus_scale", 1.0)):  # the same, read into the fields
                if getattr(m, key) not in (unset, None):
                    add("unapplied_key", f"method.{key}", key=key, value=getattr(m, key), method="DPO",
                        script="llm/alignment/dpo/run_dpo.py")
        world_d = p.world_size()
        if world_d > 1:
            add("dpo_one_process", "parallel.nproc", world=world_d)
    if m.method == "kto":
        positive("method", "kto_beta", m.kto_beta, integer=False)
        for name in ("kto_desirable_weight", "kto_undesirable_weight"):
            v = getattr(m, name)
            if not _finite(v) or v < 0:
                add("bad_value", f"method.{name}", value=v, expected="a finite number, 0 or more")
        if m.kto_lora:
            positive("method", "lora_rank", m.lora_rank)
            alpha = (cfg.extra or {}).get("lora_alpha")
            if alpha is not None and alpha != -1:
                add("kto_ignored_key", "extra.lora_alpha", key="lora_alpha",
                    why="its LoRA alpha is 2 x lora_rank, or 4 with rslora, whatever lora_alpha says",
                    why_zh="它的 LoRA alpha 固定为 2 × lora_rank（rslora 时为 4），与 lora_alpha 无关")
        world_k = p.world_size()
        if world_k > 1:
            add("kto_one_process", "parallel.nproc", world=world_k)
    if m.method == "vera":
        positive("method", "vera_rank", m.vera_rank)
    if m.method == "lokr":
        positive("method", "lokr_dim", m.lokr_dim)
    if m.use_mora and m.lora_use_mixer:
        add("mora_with_mixer", "method.use_mora")
    if (m.use_mora or m.lora_use_mixer) and m.method not in ("lora", "qlora"):
        add("lora_variant_needs_lora", "method.use_mora" if m.use_mora else "method.lora_use_mixer")
    if (m.use_mora or m.lora_use_mixer) and p.tensor_parallel_degree > 1:
        add("tp_with_mora_mixer", "parallel.tensor_parallel_degree")
    if m.method in ("vera", "lokr") and p.tensor_parallel_degree > 1:
        add("tp_with_vera_lokr", "parallel.tensor_parallel_degree", method=m.method)
    if m.method == "qlora" and not m.weight_quantize_algo:
        add("qlora_needs_algo", "method.weight_quantize_algo")
    if tr.flash_mask and not d.zero_padding and m.method not in ("dpo", "kto"):  # DPO and KTO always pack
        add("flash_mask_needs_zero_padding", "training.flash_mask")
    if tr.fp16_opt_level == "O2" and not (tr.fp16 or tr.bf16):
        add("opt_level_needs_amp", "training.fp16_opt_level")
    if tr.fp16 and tr.bf16:
        add("fp16_and_bf16", "training.bf16")
    from core.train import tracking

    for code, params in tracking.problems(tr.report_to):  # a tracker that is unknown, not installed, or online
        add(code, "training.report_to", **params)
    x = cfg.extra or {}
    # chat_template as upstream's init_chat_template reads it: "none" trains without a template, a folder
    # means its chat_template.json (else the tokenizer's own); a path that is not there would make upstream
    # warn and train with the tokenizer's own template, which nobody asked for
    ct = d.chat_template
    if isinstance(ct, str) and ct and ct.lower() != "none" and ct != model_dir and not Path(ct).exists():
        add("bad_value", "data.chat_template", value=ct,
            expected="a chat template file, a folder holding chat_template.json, the model folder (its tokenizer's "
                     "own template) or \"none\" (no template); no such path here, and upstream's run_finetune.py "
                     "would then train with the tokenizer's own template")
    elif isinstance(ct, str) and ct and ct.lower() != "none" and ct != model_dir:
        from core.data import templates

        f = Path(ct) / "chat_template.json" if Path(ct).is_dir() else Path(ct)
        if f.is_file():
            try:
                templates.load_template(None, path=f)
            except (ValueError, OSError) as e:
                add("bad_value", "data.chat_template", value=ct, expected=f"a jinja chat template ({e})")
    if (m.method in ("lora", "qlora") or (m.method == "kto" and m.kto_lora)) and "lora_path" in x:
        lp = x["lora_path"]
        if lp is None or (isinstance(lp, str) and lp.lower() == "none"):
            add("bad_value", "extra.lora_path", value=lp,
                expected="the folder of a saved LoRA adapter to start from, or left out to train a new one "
                         "(upstream's run_finetune.py reads JSON null as the text \"None\" and stops: \"Can't find "
                         "lora_config.json at 'None'\")")
        elif not isinstance(lp, str) or not (Path(lp) / "lora_config.json").is_file():
            add("bad_value", "extra.lora_path", value=lp,
                expected="the folder of a saved LoRA adapter (with its lora_config.json: upstream stops with "
                         "\"Can't find lora_config.json\" otherwise)")
    for key, what in (("prefix_path", "prefix"), ("lokr_path", "LoKr")):
        if x.get(key) is not None:  # upstream starts from that adapter; training a new one instead would ignore it
            add("bad_value", f"extra.{key}", value=x[key],
                expected=f"left out: the studio cannot start from a saved {what} adapter yet (upstream's "
                         f"run_finetune.py would load {key} and go on training it); train a new one, or run "
                         "upstream's script")
    if tr.lr_scheduler_type == "constant" and isinstance(tr.warmup_steps, int) and tr.warmup_steps > 0:
        add("warmup_ignored", "training.warmup_steps", warmup=tr.warmup_steps)
    if m.method in ("lora", "qlora", "vera", "lokr", "dpo", "kto"):
        for key in FUSED_LAYOUT:
            if x.get(key) and (m.method not in ("dpo", "kto") or (m.dpo_lora if m.method == "dpo" else m.kto_lora)):
                add("fused_layout_with_adapter", f"extra.{key}", key=key, method=m.method,
                    targets=FUSED_LAYOUT[key])
    if m.method in ("dpo", "kto"):  # what run_dpo.py / run_kto.py apply and the studio's entries do not (yet)
        script = {"dpo": "llm/alignment/dpo/run_dpo.py", "kto": "llm/alignment/kto/run_kto.py"}[m.method]
        adapter = m.dpo_lora if m.method == "dpo" else m.kto_lora
        unapplied = [(f"extra.{k}", x.get(k)) for k in FUSED_LAYOUT if x.get(k) and not adapter]  # adapters: above
        if has_gpu:  # on CPU the GPU-only check below refuses these already
            unapplied += [(f, v) for f, v in (("method.weight_quantize_algo", m.weight_quantize_algo),
                                              ("training.flash_mask", tr.flash_mask)) if v]
        for fld, v in unapplied:
            add("unapplied_key", fld, key=fld.split(".")[1], value=v, method=m.method.upper(), script=script)
    if not has_gpu:
        dev = x.get("device")
        if isinstance(dev, str) and dev not in ("", "cpu"):
            add("device_not_here", "extra.device", device=dev)
        for key, (why, why_zh) in CPU_REFUSED.items():
            if x.get(key):
                add("cpu_refused", f"extra.{key}", key=key, why=why, why_zh=why_zh)
        stages = set(str(p.sharding or "").split())
        for flag, name, fld in (
            (m.method == "qlora" or bool(m.weight_quantize_algo), "QLoRA / weight_quantize_algo", "method.weight_quantize_algo"),
            (tr.use_flash_attention, "FlashAttention", "training.use_flash_attention"),
            (tr.flash_mask, "flash_mask", "training.flash_mask"),
            (tr.fp16, "fp16", "training.fp16"),
            (tr.bf16, "bf16", "training.bf16"),
            (p.tensor_parallel_degree > 1, "tensor parallel", "parallel.tensor_parallel_degree"),
            (bool(stages & {"stage2", "stage3"}), "sharding " + "/".join(sorted(stages & {"stage2", "stage3"})),
             "parallel.sharding"),
        ):
            if flag:
                why, why_zh = GPU_REASONS.get(fld, ("", ""))
                add("needs_gpu", fld, feature=name, why=f" ({why})" if why else "", why_zh=f"（{why_zh}）" if why_zh else "")
        if p.devices:
            add("devices_on_cpu", "parallel.devices")
    if isinstance(p.sharding_parallel_degree, int) and isinstance(p.nproc, int) and p.nproc > 0:
        world_s = p.world_size()
        rest = max(p.tensor_parallel_degree, 1) * max(p.pipeline_parallel_degree, 1)
        degree = p.sharding_parallel_degree if p.sharding_parallel_degree > 0 else world_s // rest
        if str(p.sharding or "").strip() and degree <= 1:
            add("sharding_shards_nothing", "parallel.sharding_parallel_degree", sharding=p.sharding, world=world_s)
        elif not str(p.sharding or "").strip() and p.sharding_parallel_degree > 1:
            add("sharding_degree_without_stage", "parallel.sharding")
    if p.pipeline_parallel_degree > 1:  # on any machine
        add("pipeline_needs_pipe_model", "parallel.pipeline_parallel_degree", pp=p.pipeline_parallel_degree)
    positive("parallel", "nproc", p.nproc)
    positive("parallel", "nnodes", p.nnodes)
    if has_gpu:  # one process per GPU: the ids named, else nproc of them
        ranks = len([x for x in str(p.devices or "").split(",") if x.strip()]) or p.nproc
        gpus = gpu_count()
        if gpus and isinstance(ranks, int) and ranks > gpus:
            add("ranks_over_gpus", "parallel.devices" if p.devices else "parallel.nproc", ranks=ranks, gpus=gpus)
    elif _finite(p.nproc) and p.nproc > 1 and p.nproc > cpu_cores():
        add("nproc_over_cores", "parallel.nproc", nproc=p.nproc, cores=cpu_cores())
    if not isinstance(p.stall_timeout, int) or isinstance(p.stall_timeout, bool) or p.stall_timeout < 0:
        add("bad_value", "parallel.stall_timeout", expected="0 or a positive number of seconds", value=p.stall_timeout)
    pat, thr = p.early_stopping_patience, p.early_stopping_threshold
    if not isinstance(pat, int) or isinstance(pat, bool) or pat < 0:
        add("bad_value", "parallel.early_stopping_patience", expected="0 (off) or a number of evaluations", value=pat)
    elif pat > 0 and tr.evaluation_strategy == "no":
        add("early_stopping_needs_eval", "parallel.early_stopping_patience")
    if not _finite(thr) or isinstance(thr, bool) or thr < 0:
        add("bad_value", "parallel.early_stopping_threshold", expected="a loss difference of 0 or more", value=thr)
    world = p.world_size()
    product = p.tensor_parallel_degree * p.pipeline_parallel_degree * max(p.sharding_parallel_degree, 1)  # -1: the rest
    if product > 0 and world > 0 and world % product:
        add("degrees_do_not_divide", "parallel.tensor_parallel_degree", product=product, world=world)
    if p.nnodes > 1 and not p.master and not p.node_names():
        add("multinode_needs_master", "parallel.master")
    if p.node_names():
        if p.nnodes not in (1, 1 + len(p.node_names())):
            add("nodes_vs_nnodes", "parallel.nnodes", nnodes=p.nnodes, n=1 + len(p.node_names()))
        if p.rank:
            add("nodes_on_head", "parallel.rank")
        if len(set(p.node_names())) != len(p.node_names()):
            add("node_twice", "parallel.nodes")
    if str(p.port_range or "").strip():
        from core.train import nodes

        try:
            nodes.parse_port_range(p.port_range)
        except ValueError:
            add("bad_port_range", "parallel.port_range", value=p.port_range)
    if str(p.master or "").strip():
        host, _, port = str(p.master).strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            add("bad_value", "parallel.master", expected="HOST:PORT with a port 1-65535", value=p.master)
    return out


# ---------------------------------------------------------------- presets


def list_presets() -> list[dict]:
    """Every runnable preset (presets/runs/*.json): name, description, command."""
    out = []
    for f in sorted((PRESETS_DIR / "runs").glob("*.json")):
        d = json.loads(f.read_text(encoding="utf-8"))
        out.append({"name": f.stem, "description": d["description"], "command": d["command"], "path": str(f)})
    return out


def family_presets() -> dict[str, dict]:
    """Every model family preset (presets/models/<family>.json) by family name."""
    out = {}
    for f in sorted((PRESETS_DIR / "models").glob("*.json")):
        d = json.loads(f.read_text(encoding="utf-8"))
        out[d["family"]] = d
    return out


def family_preset(name: str) -> dict:
    fams = family_presets()
    if name not in fams:
        raise ValueError(f"no model family {name!r}: the families are {', '.join(fams)}")
    return fams[name]


def family_of_type(model_type: str) -> dict | None:
    """The family preset whose model_types include ``model_type`` (None when none does)."""
    return next((d for d in family_presets().values() if model_type in d["model_types"]), None)


def config_value(config, name: str, family: dict, default=None):
    """A model config's value under its common name (num_hidden_layers, num_key_value_heads, ...),
    read under the family's own name where its preset says the family spells it otherwise."""
    own = (family.get("config_names") or {}).get(name, name)
    v = getattr(config, own, None)
    return default if v is None else v


def model_family(model_dir: str | Path) -> dict:
    """The family preset (presets/models/<family>.json) matching a model folder's model_type."""
    cfg = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    mtype = cfg.get("model_type", "")
    fam = family_of_type(mtype)
    if fam:
        return fam
    raise ValueError(f"no model family preset for model_type {mtype!r} in {PRESETS_DIR / 'models'}")


def load_preset(name: str, workspace_home: str | Path | None = None) -> RunConfig:
    """A run preset as a RunConfig; ``${WORKSPACE}`` in paths becomes the workspace root.

    A run preset names a method template (presets/methods/) and overrides on top of it.
    """
    from core import workspace

    home = str(workspace_home or workspace.home())
    d = json.loads((PRESETS_DIR / "runs" / f"{name}.json").read_text(encoding="utf-8"))
    method = json.loads((PRESETS_DIR / "methods" / f"{d['method']}.json").read_text(encoding="utf-8"))
    flat = {**method["config"], **d.get("config", {})}
    flat = json.loads(json.dumps(flat).replace("${WORKSPACE}", home))
    cfg = RunConfig.from_paddlenlp(flat, name=name, parallel=d.get("parallel"))
    if d["method"] == "pretrain":  # not expressible in PaddleNLP's keys; kept in studio.json
        cfg.method.method = "pretrain"
    return cfg


# ---------------------------------------------------------------- saved configs (configs/NAME.json)


def saved_path(name: str) -> Path:
    from core import workspace

    code = workspace.check_name(name)
    if code:
        raise ValueError(f"{name!r} is not a usable config name (letters, digits, _ . -)")
    return workspace.home() / "configs" / f"{name}.json"


def save_named(cfg: RunConfig) -> Path:
    """Write ``cfg`` as configs/NAME.json: the PaddleNLP argument JSON plus the studio's launch settings."""
    from core import workspace

    path = saved_path(cfg.name)
    workspace.write_json_atomic(path, cfg.to_paddlenlp() | {"studio_parallel": cfg.to_dict()["parallel"],
                                                           "studio_method": cfg.method.method})
    return path


def from_saved(d: dict, name: str, entry: str | None = None) -> RunConfig:
    """A RunConfig from a saved config's JSON (or any PaddleNLP argument JSON); ``entry``: the
    upstream entry its file name told (see RunConfig.from_paddlenlp)."""
    d = dict(d)
    parallel = d.pop("studio_parallel", None)
    method = d.pop("studio_method", None)
    cfg = RunConfig.from_paddlenlp(d, name=name, parallel=parallel,
                                   entry=method if method in ("dpo", "kto") else entry)
    if method:
        cfg.method.method = method
    return cfg


class FileProblems(ValueError):
    """A config file that cannot become a RunConfig: ``problems`` lists why, each with its message."""

    def __init__(self, path: str | Path, problems: list[dict]):
        self.path, self.problems = str(path), problems
        super().__init__("; ".join(f"{p['field'] or '-'}: {p['message']}" for p in problems))


def load_run_file(path: str | Path, name: str | None = None) -> RunConfig:
    """A PaddleNLP argument JSON (checked against what upstream's parser accepts), a run preset
    file, or a preset name -> RunConfig; raises FileProblems with every problem found."""
    from core.train import upstream

    p = Path(path)
    if not p.is_file() and (PRESETS_DIR / "runs" / f"{path}.json").is_file():
        cfg = load_preset(str(path))
    else:
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise FileProblems(p, [{"code": "bad_json", "field": "", "params": {},
                                    "message": f"{p}: line {e.lineno}, column {e.colno}: {e.msg}"}]) from None
        except UnicodeDecodeError as e:
            raise FileProblems(p, [{"code": "bad_json", "field": "", "params": {},
                                    "message": f"{p}: not UTF-8 text (byte {e.start})"}]) from None
        except ValueError as e:  # e.g. an integer longer than Python reads ("Exceeds the limit (4300 digits)")
            raise FileProblems(p, [{"code": "bad_json", "field": "", "params": {},
                                    "message": f"{p}: not readable as JSON: {e}"}]) from None
        if isinstance(d, dict) and "method" in d and "config" in d and p.parent.name == "runs":
            cfg = load_preset(p.stem)
        else:  # a PaddleNLP argument JSON; the studio's saved configs add their launch settings
            # as upstream's parser reads it ("max_steps": "3" is 3), against the keys of the entry the
            # file is for (run_dpo.py's for a DPO file: the dpo method; run_kto.py's: the kto method);
            # the file's name tells run_dpo.py's, run_kto.py's and rm/flashmask's files apart where
            # their keys cannot
            d, found = upstream.read(d, name=p.name)
            if found:
                raise FileProblems(p, [{**x, "message": upstream.message(x)} for x in found])
            told = upstream.entry_of(d, p.name) if isinstance(d, dict) else None
            cfg = from_saved(d, p.stem, entry=told[0] if told else None)
    if name:
        cfg.name = name
    return cfg


def load_named(name: str) -> RunConfig:
    return from_saved(json.loads(saved_path(name).read_text(encoding="utf-8")), name)
