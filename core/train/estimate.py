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


def trainable(method: str, shape: dict, m) -> int:
    """What the optimizer updates: every weight (full), or the adapter's."""
    h, layers = shape["hidden"], shape["layers"]
    if method in ("sft", "pretrain", "dpo", "kto") and not getattr(m, "lora", False):
        return shape["parameters"]
    if method == "prefix":
        return int(getattr(m, "num_prefix_tokens", 64)) * layers * 2 * h
    rank = int(getattr(m, "lora_rank", 8) or 8)
    return layers * 7 * rank * (h + shape["intermediate"])  # attention and MLP projections of every layer


def guess(cfg, shape: dict, world: int) -> dict:
    """The uncalibrated figures: MiB per process, seconds per step."""
    tr, d, m = cfg.training, cfg.data, cfg.method
    n, t = shape["parameters"], trainable(m.method, shape, m)
    micro = max(int(tr.per_device_train_batch_size), 1)
    seq = max(int(d.max_length), 1)
    acts = micro * seq * (shape["hidden"] * shape["layers"] * 34 + shape["vocab"] * 3) * 4  # fp32 activations + logits
    bf = 2 if getattr(tr, "bf16", False) or getattr(tr, "fp16", False) else 4
    mib = BASE_MIB + (n * bf + t * (4 + 8)) / MIB + acts / MIB
    tokens = micro * seq * max(int(tr.gradient_accumulation_steps), 1)
    step_s = 6.0 * n * tokens / FLOPS_PER_S
    return {"mib": mib, "step_s": step_s}


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


def calibration() -> dict:
    """Median measured/guessed ratios over the workspace's runs that have samples and speeds."""
    from core.train import monitor, runs
    from core.train.config import RunConfig

    mem, speed = [], []
    for d in runs._run_dirs():
        try:
            recs = [r for r in monitor.read(d) if r.get("procs")]
            if not recs:
                continue
            meta = json.loads((d / "studio.json").read_text(encoding="utf-8"))
            cfg = RunConfig.from_paddlenlp(json.loads((d / "config.json").read_text(encoding="utf-8")))
            cfg.parallel.nproc = int((meta.get("parallel") or {}).get("nproc") or 1)
            shape = model_shape(cfg.model.model_name_or_path)
            world = max(int(cfg.parallel.world_size()), 1)
            g = guess(cfg, shape, world)
            peak = max(max((p["pss_mib"] for p in r["procs"] if p["role"].startswith("rank")), default=0) for r in recs)
            if peak > 0:
                mem.append(peak / g["mib"])
            sps = [r["steps_per_sec"] for r in runs.read_metrics(d)[0] if r.get("steps_per_sec")]
            if sps:
                speed.append((1.0 / statistics.median(sps)) / g["step_s"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return {"runs": len(mem), "mem": statistics.median(mem) if mem else 1.0,
            "time": statistics.median(speed) if speed else 1.0, "time_runs": len(speed)}


def estimate(cfg, calib: dict | None = None) -> dict | None:
    """Peak MiB per process and in all, seconds to finish, and whether it fits the free memory and
    disk; None when the model folder cannot be read."""
    import psutil

    try:
        shape = model_shape(cfg.model.model_name_or_path)
    except (OSError, ValueError, TypeError):
        return None
    world = max(int(cfg.parallel.world_size()), 1)
    local = max(int(cfg.parallel.nproc or 1), 1)
    calib = calib if calib is not None else calibration()
    g = guess(cfg, shape, world)
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
            "parameters": shape["parameters"], "calibrated_runs": calib["runs"],
            "fits_memory": per * local <= free, "disk_mib": ckpt * saves, "disk_free_mib": disk_free,
            "fits_disk": disk_free is None or ckpt * saves <= disk_free}
