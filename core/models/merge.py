"""Merge an adapter into its base model and prove the merge: merged logits must equal base+adapter,
and the merged model reloaded from disk must give the dev loss training recorded for the adapter
with the trained model in memory (an independent reference: a wrong adapter load fails here).

LoRA (W + B·A·scale) and LoKr are folded by PaddleNLP's own ``merge()``; VeRA's update
(diag(b)·B·diag(d)·A·scale) is folded here. The merged model is written as safetensors with
the tokenizer and its chat template into a hidden temp folder, checked, then renamed into
place: a failed merge never leaves a folder that looks complete. Run it in its own process
(``paddle-studio merge``); the studio starts it as a subprocess.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from core import workspace
from core.jobs import report_progress
from core.models import layouts, loading
from core.data import templates

CHECK_PROMPTS = [
    [{"role": "user", "content": "类型#裙*颜色#蓝色*风格#清新"}],
    [{"role": "user", "content": "What is 3 plus 4?"}],
    [{"role": "user", "content": "把这些词倒序排列：苹果 香蕉"}],
    [{"role": "user", "content": "Reverse the order of these words: moon sun river"}],
]


def _logits(model, batch):
    import paddle

    with paddle.no_grad():
        out = model(input_ids=batch, **layouts.inputs(model, batch, paddle.ones_like(batch)))
    return loading.logits_of(out).astype("float32")


def _fold_mora(model) -> None:
    """Fold every MoRA layer (LoRA with use_mora) into its weight. PaddleNLP 3.0.0b4's own
    LoRALinear.get_delta_weight for MoRA does not give what its forward computes (its rotation
    scales the square matrix's columns where the forward scales its rows: merged logits differed
    by ~18 on the demo), so the update is taken from the forward itself: the MoRA branch is linear
    in its input, and applied to the identity it is exactly the [in, out] matrix to add."""
    import paddle

    for layer in model.sublayers():
        if getattr(layer, "use_mora", False) and hasattr(layer, "_apply_mora") and not getattr(layer, "merged", False):
            with paddle.no_grad():
                layer.rope_init()
                eye = paddle.eye(layer.in_features, dtype=layer.weight.dtype)
                delta = layer._apply_mora(eye)
                layer.weight.set_value(layer.weight + delta.astype(layer.weight.dtype))
            layer.merged = True


def _fold_vera(model) -> int:
    """Fold every VeRA layer's update into its weight; returns how many layers were folded."""
    import paddle

    n = 0
    for layer in model.sublayers():
        if all(hasattr(layer, a) for a in ("vera_A", "vera_B", "vera_b", "vera_d")) and not getattr(layer, "merged", False):
            delta = (layer.vera_A * layer.vera_d.unsqueeze(0)) @ (layer.vera_B * layer.vera_b.unsqueeze(0))
            scale = getattr(layer, "scaling", 1.0)
            with paddle.no_grad():
                layer.weight.set_value(layer.weight + delta.astype(layer.weight.dtype) * scale)
            layer.merged = True
            n += 1
    return n


def against_training(model, tokenizer, adapter: str | Path) -> dict | None:
    """The merged model (as reloaded from disk) against the adapter's training, not against the
    adapter as loaded here: its loss on the sample whose loss training recorded with the trained
    model in memory (core.train.verify). None for an adapter saved without that record."""
    from core.train import verify

    try:
        ref = json.loads((Path(adapter) / verify.REFERENCE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(ref, dict) or ref.get("skipped") or not ref.get("examples") or "eval_loss" not in ref:
        return None
    got = verify.score(model, ref["examples"], tokenizer.pad_token_id)["eval_loss"]
    tol = verify.tolerance(ref["eval_loss"], ref.get("dtype", "float32"))
    return {"merged_eval_loss": got, "training_eval_loss": ref["eval_loss"], "step": ref.get("step"),
            "examples": len(ref["examples"]), "diff": abs(got - ref["eval_loss"]), "tolerance": tol,
            "ok": abs(got - ref["eval_loss"]) <= tol}


def merge(base: str | Path | None, adapter: str | Path, out: str | Path, log=print) -> dict:
    import paddle

    t0 = time.perf_counter()
    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out} exists; choose another output folder")
    kind = loading.adapter_kind(adapter)
    if kind in loading.NOT_MERGEABLE:
        raise ValueError(f"{adapter}: a {kind} adapter cannot be merged: {loading.NOT_MERGEABLE[kind]}")
    if kind not in loading.MERGEABLE:
        raise ValueError(f"{adapter}: no mergeable adapter (LoRA, LoKr or VeRA)")
    base = base or loading.base_of(adapter)
    if not base:
        raise ValueError("no base model: pass --base (the adapter does not record its base)")
    log(f"loading {base} + {kind} adapter {adapter}")
    report_progress(0.1, "loading base + adapter", code="loading_base_adapter")
    model, tok, tpl = loading.load(base, adapter)
    ids = [templates.prompt_ids(tok, tpl, m) for m in CHECK_PROMPTS]
    n = max(len(i) for i in ids)
    batch = paddle.to_tensor([[tok.pad_token_id] * (n - len(i)) + i for i in ids], dtype="int64")
    ref = _logits(model, batch)

    log("merging")
    report_progress(0.5, "merging", code="merging")
    if kind == "vera":
        folded = _fold_vera(model)
        if not folded:
            raise ValueError("found no VeRA layers to fold")
    else:
        _fold_mora(model)  # before model.merge(), which then leaves the folded layers alone
        model.merge()
    inner = model.model
    merged_state = {k: v for k, v in inner.state_dict().items()}
    fresh = loading.model_class(base).from_pretrained(str(base), dtype="float32")
    fresh_keys = set(fresh.state_dict())
    fresh.set_state_dict({k: v for k, v in merged_state.items() if k in fresh_keys})
    fresh.eval()
    layouts.attach(fresh, base, tok)
    got = _logits(fresh, batch)
    diff = float((got - ref).abs().max())
    log(f"max |merged - (base+adapter)| logits = {diff:.3g}")

    tmp = workspace.temp_dir_beside(out)
    try:
        fresh.save_pretrained(str(tmp), safe_serialization=True)
        tok.save_pretrained(str(tmp))
        cfg_path = tmp / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        if tpl and cfg.get("chat_template") != tpl:
            cfg["chat_template"] = tpl
            workspace.write_json_atomic(cfg_path, cfg)
        # check what is on disk, not what is in memory
        reloaded = loading.model_class(tmp).from_pretrained(str(tmp), dtype="float32")
        reloaded.eval()
        layouts.attach(reloaded, base, tok)
        disk_diff = float((_logits(reloaded, batch) - ref).abs().max())
        info = {"merged_from": {"base": str(Path(base).resolve()), "adapter": str(Path(adapter).resolve()), "kind": kind},
                "check": {"prompts": len(CHECK_PROMPTS), "max_abs_diff": max(diff, disk_diff), "dtype": "float32"},
                "seconds": round(time.perf_counter() - t0, 2)}
        against = against_training(reloaded, tok, adapter)
        if against:
            info["check"]["training"] = against
            log(f"merged model's eval loss on training's sample {against['merged_eval_loss']:.5g} "
                f"vs {against['training_eval_loss']:.5g} in training")
            if not against["ok"]:
                raise ValueError(f"the merged model does not reproduce training: eval loss {against['merged_eval_loss']:.4g} "
                                 f"on training's own sample vs {against['training_eval_loss']:.4g} in training (allowed "
                                 f"difference {against['tolerance']:.2g}); nothing was written")
        workspace.write_json_atomic(tmp / workspace.MODEL_MARKER, info)
        workspace.publish_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"out": str(out), **info}


def submit(adapter: str | Path, name: str, base: str | Path | None = None) -> str:
    """Start a merge job writing models/NAME; returns the job id (jobs.Refused when it cannot start)."""
    from core import jobs

    if not adapter or not loading.adapter_kind(adapter):
        raise jobs.Refused("no_adapter", f"{adapter} holds no adapter (no lora/prefix/vera/lokr config)", path=str(adapter))
    kind = loading.adapter_kind(adapter)
    if kind in loading.NOT_MERGEABLE:
        raise jobs.Refused(f"not_mergeable_{kind}", f"a {kind} adapter cannot be merged: {loading.NOT_MERGEABLE[kind]}",
                           kind=kind)
    out = jobs.check_output(name, workspace.models_dir())
    args = ["merge", "--adapter", str(adapter), "--out", str(out), "--json"] + (["--base", str(base)] if base else [])
    return jobs.submit("merge", args, title=out.name, params={"adapter": str(adapter), "out": str(out)}, outputs=[out])
