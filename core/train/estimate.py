"""Will it fit? Peak memory per process and time to finish of a run config, before Start.

A first guess from the model's shape and the config (weights, gradients and AdamW moments of what
trains, activations of one micro-batch, logits, and what a process holds once paddle is imported),
then **calibrated by this machine's own finished runs**: the median ratio of what earlier runs
measured (their supervisor's peak PSS per rank, core.train.monitor, and their steps/s) to what the
same guess said for them. With no earlier run the guess stands, and says so.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path

from core import workspace

MIB = 1 << 20
BASE_MIB = 380.0  # one training process after importing paddle and paddlenlp (measured, docs/faults.md)
# of which pages the processes of one machine share (paddle's libraries): PSS splits them between
# the local ranks (bench/estimate_accuracy.py: a demo LoRA rank's peak PSS 696 MiB alone, 534 MiB
# as one of 2, so about 2 x 162 MiB shared)
SHARED_MIB = 324.0
FLOPS_PER_S = 4e9  # a first guess of one CPU process's training throughput, before calibration


def model_shape(model_dir: str | Path) -> dict:
    """Parameters, hidden size, layers and vocabulary of a model folder (its config.json; the
    studio's own count where it recorded one)."""
    d = Path(model_dir)
    cfg = json.loads((d / "config.json").read_text(encoding="utf-8"))
    h = int(cfg.get("hidden_size") or cfg.get("n_embed") or cfg.get("d_model") or 0)
    layers = int(cfg.get("num_hidden_layers") or cfg.get("n_layer") or cfg.get("num_layers") or 0)
    vocab = int(cfg.get("vocab_size") or 0)
    inter = int(cfg.get("intermediate_size") or cfg.get("ffn_hidden_size") or cfg.get("inner_hidden_size") or 4 * h)
    n = None
    try:
        n = int(json.loads((d / workspace.MODEL_MARKER).read_text(encoding="utf-8")).get("parameters") or 0) or None
    except (OSError, ValueError, AttributeError):
        pass
    if n is None:
        n = layers * (4 * h * h + 3 * h * inter) + vocab * h * (1 if cfg.get("tie_word_embeddings") else 2)
    return {"parameters": n, "hidden": h, "layers": layers, "vocab": vocab, "intermediate": inter}


ADAPTERS = ("lora", "qlora", "prefix", "vera", "lokr", "reft")


def adapter_of(m) -> str | None:
    """What the optimizer trains besides full weights: the method's adapter (DPO and KTO train LoRA
    unless dpo_lora / kto_lora is off), or None for a full fine-tune."""
    if m.method in ADAPTERS:
        return m.method
    if m.method == "dpo" and getattr(m, "dpo_lora", False) or m.method == "kto" and getattr(m, "kto_lora", False):
        return "lora"
    return None


def trainable(method: str, shape: dict, m) -> int:
    """What the optimizer updates: every weight (a full fine-tune), or the adapter's."""
    h, layers, inter = shape["hidden"], shape["layers"], shape["intermediate"]
    kind = adapter_of(m)
    if kind is None:
        return shape["parameters"]
    if kind == "prefix":
        return int(getattr(m, "num_prefix_tokens", 64)) * layers * 2 * h
    if kind == "vera":
        return layers * 7 * (int(getattr(m, "vera_rank", 8) or 8) + h)  # two scaling vectors a projection
    if kind == "lokr":
        return layers * 7 * 2 * int(getattr(m, "lokr_dim", 8) or 8) ** 2 + layers * 7 * (h + inter)
    if kind == "reft":
        return layers * 2 * int(getattr(m, "reft_rank", 8) or 8) * h
    rank = int(getattr(m, "lora_rank", 8) or 8)
    return layers * rank * (4 * 2 * h + 3 * (h + inter))  # q, k, v, o and the three MLP projections of every layer


_LENGTHS: dict = {}


def _lengths_key(cfg) -> tuple | None:
    """What the lengths of ``cfg``'s training sequences depend on: its train file (path, size, time),
    tokenizer, chat template and the two lengths; None when it has no train file."""
    from core.data import datasets

    d = cfg.data
    path = Path(d.dataset_name_or_path)
    files = datasets.resolve_files(path).get("train", []) if path.is_dir() else [path]
    if not files:
        return None
    f = Path(files[0]).resolve()
    st = f.stat()
    tok_dir = str(Path(cfg.model.tokenizer_name_or_path or cfg.model.model_name_or_path).resolve())
    return (str(f), st.st_size, st.st_mtime_ns, tok_dir, d.chat_template, int(d.src_length), int(d.max_length))


def _lengths_file(key: tuple) -> Path:
    import hashlib

    return workspace.home() / "cache" / "token_lengths" / (
        hashlib.sha256(json.dumps(key, default=str).encode()).hexdigest()[:24] + ".json")


def seq_lengths(cfg, limit: int = 2000, compute: bool = True) -> dict:
    """The sequence lengths training will see: ``peak`` (the longest example, cut to max_length:
    what the biggest batch pads to) and ``batch_mean`` (the expected longest of a micro-batch: what
    an average batch pads to), from the dataset's own token lengths (core.data.datasets.token_stats:
    template, system prompt and EOS included). Packed (zero_padding) and raw-text runs fill
    max_length. ``source`` says which.

    Measuring needs the tokenizer (paddlenlp: ~5 s and ~450 MiB the first time in a process), so the
    lengths are kept on disk in the workspace (cache/token_lengths/), written by whoever measured
    them: every training run (its rank 0, at the end), ``config check`` and a dry run. With
    ``compute`` False (the studio's live check) unknown lengths are not measured: max_length stands,
    ``source`` "unmeasured"."""
    d, tr = cfg.data, cfg.training
    max_len = max(int(d.max_length), 1)
    full = {"peak": max_len, "batch_mean": float(max_len), "source": "max_length"}
    if d.zero_padding or cfg.method.method == "pretrain":
        return {**full, "source": "packed"}
    if not d.dataset_name_or_path:
        return full
    try:
        key = _lengths_key(cfg)
    except (OSError, ValueError, TypeError):
        return full
    if key is None:
        return full
    hist = _LENGTHS.get(key)
    if hist is None:
        try:
            hist = json.loads(_lengths_file(key).read_text(encoding="utf-8"))["total"]
        except (OSError, ValueError, KeyError, TypeError):
            hist = None
    if hist is None and not compute:
        return {**full, "source": "unmeasured"}
    if hist is None:
        from core.data import datasets

        try:
            kw = {} if d.chat_template is None else {"chat_template": d.chat_template}
            st = datasets.token_stats(key[0], key[3], int(d.src_length), max_len, limit=limit, bins=64, **kw)
        except Exception:  # noqa: BLE001 - a dataset the check reports, a tokenizer that fails: max_length stands
            return full
        hist = st["total"]
        try:
            workspace.write_json_atomic(_lengths_file(key), {"key": list(key), "total": hist, "records": st["records"]})
        except OSError:  # a read-only workspace: measured again next time
            pass
    _LENGTHS[key] = hist
    counts, edges = hist["counts"], hist["edges"]
    total = sum(counts) or 1
    micro = max(int(tr.per_device_train_batch_size), 1) * (2 if cfg.method.method in ("dpo", "kto") else 1)
    mean, cdf_prev = 0.0, 0.0
    for i, c in enumerate(counts):  # E[max of `micro` draws] over the histogram, each bin at its upper edge
        cdf = cdf_prev + c / total
        mean += min(edges[i + 1], max_len) * (cdf ** micro - cdf_prev ** micro)
        cdf_prev = cdf
    peak = min(int(math.ceil(edges[-1])), max_len)
    return {"peak": max(peak, 1), "batch_mean": max(mean, 1.0), "source": "dataset"}


def guess(cfg, shape: dict, world: int, lengths: dict | None = None) -> dict:
    """The uncalibrated figures: MiB per process, seconds per optimizer step. ``world`` processes:
    sharding splits the optimizer's moments (stage 1) and gradients (stage 2), tensor and pipeline
    parallelism the weights, between them."""
    tr, p, m = cfg.training, cfg.parallel, cfg.method
    n, t = shape["parameters"], trainable(m.method, shape, m)
    lengths = lengths or seq_lengths(cfg, compute=False)
    micro = max(int(tr.per_device_train_batch_size), 1)
    rows = micro * (2 if m.method in ("dpo", "kto") else 1)  # preferred and rejected (or KL) sequences
    acts = rows * lengths["peak"] * (shape["hidden"] * shape["layers"] * 34 + shape["vocab"] * 3) * 4
    bf = 2 if getattr(tr, "bf16", False) or getattr(tr, "fp16", False) else 4
    split = max(int(p.tensor_parallel_degree or 1) * int(p.pipeline_parallel_degree or 1), 1)
    shard = max(int(p.sharding_parallel_degree or 1), 1) if p.sharding else 1
    shard = min(shard, max(world, 1))
    grads = t * 4 / (shard if p.sharding in ("stage2", "stage3") else 1)
    moments = t * 8 / shard
    reference = n * bf if m.method in ("dpo", "kto") and adapter_of(m) is None else 0  # a frozen copy
    local = max(int(p.nproc or 1), 1)
    mib = BASE_MIB - SHARED_MIB * (1 - 1 / local) + (n * bf / split + grads + moments + reference) / MIB + acts / MIB
    tokens = rows * lengths["batch_mean"] * max(int(tr.gradient_accumulation_steps), 1)
    per_token = 6.0 if adapter_of(m) is None else 4.0  # adapters: no weight gradients of the frozen base
    step_s = per_token * n / split * tokens / FLOPS_PER_S
    return {"mib": mib, "step_s": step_s, "seq_peak": lengths["peak"], "seq_mean": lengths["batch_mean"],
            "lengths_from": lengths["source"]}


def planned_steps(cfg) -> int | None:
    """Optimizer steps: max_steps, or epochs x the training records over batch x processes x accumulation."""
    from core.train.config import _train_records

    tr, p = cfg.training, cfg.parallel
    if int(tr.max_steps) > 0:
        return int(tr.max_steps)
    records = _train_records(cfg.data.dataset_name_or_path) if cfg.data.dataset_name_or_path else None
    if not records:
        return None
    dp = max(int(p.world_size()), 1)
    batches = math.ceil(records / (max(int(tr.per_device_train_batch_size), 1) * dp))
    return max(math.ceil(tr.num_train_epochs * max(batches // max(int(tr.gradient_accumulation_steps), 1), 1)), 1)


DRY_RUN_STEPS = 20
# what a dry run changes of the config it measures: left out of the fingerprint that matches them
_NOT_MEASURED = {("name",), ("training", "max_steps"), ("training", "num_train_epochs"),
                 ("training", "evaluation_strategy"), ("training", "eval_steps"), ("training", "save_strategy"),
                 ("training", "save_steps"), ("training", "save_total_limit"), ("training", "logging_steps"),
                 ("parallel", "early_stopping_patience"), ("parallel", "early_stopping_threshold"),
                 ("parallel", "stall_timeout")}


def fingerprint(cfg) -> str:
    """What decides a step's memory and time (model, data, method, batch, lengths, layout): equal for a
    config and its dry run."""
    import hashlib

    d = cfg.to_dict()
    flat = {f"{sec}.{k}": v for sec, vals in d.items() if isinstance(vals, dict) for k, v in vals.items()
            if (sec, k) not in _NOT_MEASURED}
    return hashlib.sha256(json.dumps(flat, sort_keys=True, default=str).encode()).hexdigest()[:16]


def measured(d: Path) -> dict | None:
    """A run's own figures: its ranks' peak PSS (MiB, core.train.monitor) and median seconds per step."""
    from core.train import monitor, runs

    recs = [r for r in monitor.read(d) if r.get("procs")]
    peak = max((max((p["pss_mib"] for p in r["procs"] if p["role"].startswith("rank")), default=0) for r in recs),
               default=0)
    sps = [r["steps_per_sec"] for r in runs.read_metrics(d)[0] if r.get("steps_per_sec")]
    if peak <= 0 and not sps:
        return None
    return {"peak_mib": peak or None, "step_s": 1.0 / statistics.median(sps) if sps else None}


def _run_config(d: Path):
    from core.train.config import RunConfig

    meta = json.loads((d / "studio.json").read_text(encoding="utf-8"))
    cfg = RunConfig.from_paddlenlp(json.loads((d / "config.json").read_text(encoding="utf-8")))
    cfg.parallel.nproc = int((meta.get("parallel") or {}).get("nproc") or 1)
    return cfg, meta


def calibration(cfg=None) -> dict:
    """Measured/guessed ratios of memory and time. A finished dry run of ``cfg`` (same fingerprint)
    gives them alone; otherwise the median over the workspace's runs that have samples and speeds,
    those of the same method when there are (a method's own costs: prefix tuning's step took twice
    LoRA's on the demo, which no shape formula here says)."""
    from core.train import runs

    want = fingerprint(cfg) if cfg is not None else None
    method = cfg.method.method if cfg is not None else None
    mem, speed, same_mem, same_speed = [], [], [], []
    for d in runs.run_dirs():
        try:
            m = measured(d)
            if not m:
                continue
            rcfg, meta = _run_config(d)
            g = guess(rcfg, model_shape(rcfg.model.model_name_or_path), max(int(rcfg.parallel.world_size()), 1))
            ratios = ((m["peak_mib"] or 0) / g["mib"], (m["step_s"] or 0) / g["step_s"])
            if want and meta.get("dry_run_of") == want and runs.status(d).get("state") == "succeeded":
                return {"runs": 1, "mem": ratios[0] or 1.0, "time": ratios[1] or 1.0, "time_runs": 1,
                        "dry_run": d.name}
            same = method is not None and rcfg.method.method == method
            if ratios[0]:
                (same_mem if same else mem).append(ratios[0])
            if ratios[1]:
                (same_speed if same else speed).append(ratios[1])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    mem, speed = same_mem or mem + same_mem, same_speed or speed + same_speed
    return {"runs": len(mem), "mem": statistics.median(mem) if mem else 1.0,
            "time": statistics.median(speed) if speed else 1.0, "time_runs": len(speed), "dry_run": None}


def dry_run(cfg, steps: int = DRY_RUN_STEPS) -> str:
    """Start ``steps`` steps of ``cfg`` as a run of its own (no evaluation, no checkpoint) whose
    measured memory and step time then calibrate the estimate of ``cfg``; returns the run id."""
    import copy

    from core.train import runs

    dry = copy.deepcopy(cfg)
    dry.name = f"{cfg.name}-dry-run"
    tr = dry.training
    tr.max_steps, tr.evaluation_strategy, tr.save_strategy, tr.logging_steps = int(steps), "no", "no", 1
    dry.parallel.early_stopping_patience = 0
    run_id = runs.create(dry, meta={"dry_run_of": fingerprint(cfg), "dry_run_steps": int(steps)})
    runs.start(run_id)
    return run_id


def estimate(cfg, calib: dict | None = None, measure: bool = True) -> dict | None:
    """Peak MiB per process and in all, seconds to finish, and whether it fits the free memory and
    disk; None when the model folder cannot be read. ``measure`` False: the dataset's token lengths
    only when known (see seq_lengths), never measured here (the studio's live check)."""
    import psutil

    try:
        shape = model_shape(cfg.model.model_name_or_path)
    except (OSError, ValueError, TypeError):
        return None
    world = max(int(cfg.parallel.world_size()), 1)
    local = max(int(cfg.parallel.nproc or 1), 1)
    calib = calib if calib is not None else calibration(cfg)
    g = guess(cfg, shape, world, seq_lengths(cfg, compute=measure))
    per = g["mib"] * calib["mem"]
    steps = planned_steps(cfg)
    seconds = steps * g["step_s"] * calib["time"] if steps else None
    free = psutil.virtual_memory().available / MIB
    # a checkpoint: the model (full) or the adapter, with the optimizer's two moments of what trains
    ckpt = (shape["parameters"] * 4 + trainable(cfg.method.method, shape, cfg.method) * 8) / MIB
    try:
        disk_free = shutil.disk_usage(workspace.home() if workspace.home().exists() else "/").free / MIB
    except OSError:
        disk_free = None
    saves = max(int(getattr(cfg.training, "save_total_limit", 1) or 1), 1) + 1
    return {"per_process_mib": per, "total_mib": per * local, "free_mib": free, "seconds": seconds, "steps": steps,
            "parameters": shape["parameters"], "calibrated_runs": calib["runs"], "dry_run": calib.get("dry_run"),
            "seq_peak": g["seq_peak"], "seq_mean": round(g["seq_mean"], 1), "lengths_from": g["lengths_from"],
            "fits_memory": per * local <= free, "disk_mib": ckpt * saves, "disk_free_mib": disk_free,
            "fits_disk": disk_free is None or ckpt * saves <= disk_free}
