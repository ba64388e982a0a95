"""Round-trip proof: what a run saved, loaded in a fresh process the way chat, eval and merge load
it, must reproduce what training had in memory.

At the end of training and at every checkpoint, rank 0 evaluates the model it holds on a fixed
small sample (the first ``SAMPLE`` dev records, or train records when there is no dev split),
tokenized as training tokenizes it, and writes the loss and the token ids into the saved folder
(``studio_reference.json``). ``verify_run`` (a job of its own, started by the run's supervisor when
the run ends, or ``paddle-studio runs verify RUN``) loads the saved output and the checkpoint Resume
and Continue would use with ``core.models.loading`` in a new process, scores the same ids, and also
tokenizes the sample again with what was saved (tokenizer and chat template), as chat and eval
will. ``verify.json`` in the run folder says per folder: verified, failed (with the numbers) or
error. The reference is the trained model itself, never the artifact: a PiSSA adapter whose load
re-ran its initialisation, or a VeRA adapter whose frozen matrix was drawn again, fails here.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

REFERENCE = "studio_reference.json"
RESULT = "verify.json"
SAMPLE = 32  # records: enough that a wrong weight shows, few enough to cost a second
BATCH = 8
# float32 on CPU, the same ids and batches on both sides: the losses agree to ~1e-6; a reload
# that is not the trained model is off by 0.05 and more (PiSSA 2.1, VeRA 2.1 on the demo)
ABS_TOL = 1e-3
REL_TOL = 1e-3


def tolerance(reference: float, dtype: str = "float32") -> float:
    """Allowed difference: float32 on both sides agrees to ~1e-6; a reference scored in bf16/fp16
    (an O2 run casts the model it trains) against the float32 reload differs by rounding."""
    if "float32" in str(dtype) or not dtype:
        return ABS_TOL + REL_TOL * abs(reference)
    return 2e-2 + 2e-2 * abs(reference)


def skip_reason(flat: dict) -> str | None:
    """Why the reference cannot be scored by rank 0 alone: a forward that needs every rank
    (tensor-parallel all-reduce, pipeline stages, stage-3 gathers) would pair with the other ranks'
    training collectives and hang or corrupt the run."""
    if int(flat.get("tensor_parallel_degree", 1) or 1) > 1:
        return "tensor parallel: a forward needs every rank"
    if int(flat.get("pipeline_parallel_degree", 1) or 1) > 1:
        return "pipeline parallel: a forward needs every stage"
    if "stage3" in str(flat.get("sharding") or ""):
        return "sharding stage3: a forward gathers weights from every rank"
    return None


# ---------------------------------------------------------------- the sample


def sample_records(flat: dict) -> tuple[list[dict], str]:
    """The records both sides score: the first SAMPLE of dev (train when there is no dev), as
    src/tgt records (a preference pair becomes its preferred answer, a KTO record its one answer)."""
    from core.data import datasets

    paths: list[tuple[str, Path]] = []
    if flat.get("train_dataset_path"):  # DPO's and KTO's keys
        if flat.get("dev_dataset_path"):
            paths.append(("dev", Path(flat["dev_dataset_path"])))
        paths.append(("train", Path(flat["train_dataset_path"])))
    else:
        d = Path(flat.get("dataset_name_or_path") or "")
        files = datasets.resolve_files(d) if d.is_dir() else {}
        paths += [(split, f) for split in ("dev", "train") for f in files.get(split, [])[:1]]
    for split, f in paths:
        if not f.is_file() or not f.stat().st_size:
            continue
        fmt = datasets.detect_format(f)
        recs = []
        for rec in datasets.iter_records(f, "text" if fmt == "text" else
                                         fmt if fmt in (*datasets.PREFERENCE_FORMATS, "kto") else "paddlenlp"):
            if fmt == "kto":
                rec = {"src": rec["src"], "tgt": rec["tgt"] + [rec["response"][0]],
                       **({"system": rec["system"]} if rec.get("system") else {})}
            elif fmt in datasets.PREFERENCE_FORMATS:
                if "response" not in rec:  # iter_records already normalises chosen/rejected records
                    rec = datasets.normalize_preference(rec, fmt)
                rec = {"src": rec["src"], "tgt": rec["tgt"] + [rec["response"][0]],
                       **({"system": rec["system"]} if rec.get("system") else {})}
            recs.append(rec)
            if len(recs) >= SAMPLE:
                break
        if recs:
            return recs, split
    return [], ""


def lengths(flat: dict) -> tuple[int, int]:
    src = int(flat.get("src_length") or flat.get("max_prompt_len") or 1024)
    total = int(flat.get("max_length") or flat.get("max_seq_len") or 2048)
    return src, total


def sample_examples(tokenizer, template, flat: dict, mask_prompt: bool = True,
                    records: list[dict] | None = None) -> tuple[list[dict], str]:
    """input_ids/labels of the sample (or of ``records``), built as training builds its examples (no packing)."""
    from core.data import datasets, templates

    recs, split = (records, "") if records is not None else sample_records(flat)
    src_len, max_len = lengths(flat)
    if datasets.is_text_dataset(recs):
        exs = templates.text_blocks(tokenizer, [r["text"] for r in recs], max_len)
    else:
        exs = [e for e in (templates.build_example(tokenizer, template, r, src_len, max_len, mask_prompt) for r in recs)
               if e is not None]
    return [{"input_ids": list(e["input_ids"]), "labels": list(e["labels"])} for e in exs], split


def score(model, examples: list[dict], pad_id: int) -> dict:
    """Mean loss over the label tokens of ``examples`` (right padded batches of BATCH), model in eval mode."""
    from core.models import evaluate

    return evaluate.examples_loss(model, examples, pad_id, BATCH)


# ---------------------------------------------------------------- training side


def write_reference(folder: Path, model, tokenizer, template, flat: dict, step: int, mask_prompt: bool = True,
                    training_eval: dict | None = None) -> dict | None:
    """Score the in-memory model on the sample and write ``folder/studio_reference.json`` (rank 0,
    after the folder was saved). Leaves the model in the mode it found it in."""
    records, split = sample_records(flat)
    examples, _ = sample_examples(tokenizer, template, flat, mask_prompt, records)
    if not examples:
        return None
    was_training = getattr(model, "training", False)
    model.eval()
    try:
        res = score(model, examples, tokenizer.pad_token_id)
    finally:
        if was_training:
            model.train()
    dtype = next((str(p.dtype) for p in model.parameters()), "float32") if hasattr(model, "parameters") else "float32"
    ref = {"step": step, "split": split, "eval_loss": res["eval_loss"], "token_accuracy": res["token_accuracy"],
           "tokens": res["tokens"], "examples": examples, "records": records, "mask_prompt": mask_prompt,
           "dtype": dtype, "training_eval": training_eval, "time": time.time()}
    tmp = Path(folder) / f".{REFERENCE}.tmp"
    tmp.write_text(json.dumps(ref), encoding="utf-8")
    os.replace(tmp, Path(folder) / REFERENCE)
    return ref


def last_training_eval(metrics_path: Path) -> dict | None:
    """The last in-training evaluation (step, eval_loss) from metrics.jsonl, or None."""
    last = None
    try:
        for line in metrics_path.read_text(encoding="utf-8").splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if "eval_loss" in r:
                last = {"step": r.get("step"), "eval_loss": r["eval_loss"]}
    except OSError:
        return None
    return last


# ---------------------------------------------------------------- the fresh process


def verify_folder(folder: str | Path, base: str | Path | None = None, flat: dict | None = None) -> dict:
    """Load ``folder`` as chat/eval/merge do and score the reference ids; the verdict as a dict."""
    from core.models import loading

    folder = Path(folder)
    t0 = time.perf_counter()
    try:
        ref = json.loads((folder / REFERENCE).read_text(encoding="utf-8"))
        if ref.get("skipped"):
            return {"state": "no_reference", "folder": str(folder), "reason": f"not checked: {ref['skipped']}"}
        out = {"folder": str(folder), "step": ref.get("step"), "split": ref.get("split"),
               "examples": len(ref["examples"]), "training_eval_loss": float(ref["eval_loss"]),
               "last_training_eval": ref.get("training_eval")}
    except (OSError, ValueError, KeyError, TypeError):
        return {"state": "no_reference", "folder": str(folder),
                "reason": f"{folder} has no readable {REFERENCE} (saved by a studio older than this check, or not by "
                          f"the studio)"}
    try:
        if loading.adapter_kind(folder):
            model, tok, tpl = loading.load(base, folder)
        else:
            model, tok, tpl = loading.load(folder)
        res = score(model, ref["examples"], tok.pad_token_id)
        out["reloaded_eval_loss"] = res["eval_loss"]
        out["reloaded_token_accuracy"] = res["token_accuracy"]
        out["diff"] = abs(res["eval_loss"] - ref["eval_loss"])
        out["tolerance"] = tolerance(ref["eval_loss"], ref.get("dtype", "float32"))
        ok = math.isfinite(res["eval_loss"]) and out["diff"] <= out["tolerance"]
        if flat and ref.get("records") is not None:  # the saved tokenizer and template must cut the sample as training did
            if flat.get("chat_template") in (None, ""):
                again, _ = sample_examples(tok, tpl, flat, ref.get("mask_prompt", True), ref["records"])
                n = len(ref["examples"])
                same = sum(a == b for a, b in zip(again, ref["examples"])) if len(again) == n else 0
                out["tokenization_identical"] = f"{same}/{n}"
                if same != n:
                    ok = False
                    out["reason"] = (f"the saved tokenizer and chat template tokenize {n - same} of {n} sample "
                                     f"records differently from training")
            else:
                out["tokenization_identical"] = f"not checked (the run named chat_template {flat['chat_template']!r})"
        out["state"] = "verified" if ok else "failed"
        if not ok and "reason" not in out:
            out["reason"] = (f"the saved model does not reproduce training: reloaded eval loss {res['eval_loss']:.4g} "
                             f"vs {ref['eval_loss']:.4g} in training (allowed difference {out['tolerance']:.2g})")
    except Exception as e:  # noqa: BLE001 - a load that fails is a verdict too
        traceback.print_exc()
        out["state"] = "error"
        out["reason"] = f"{type(e).__name__}: {e}".strip()[:600]
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


def targets(run_dir: Path) -> list[Path]:
    """What a run's verification loads: its final output (when finished) and the checkpoint that
    Resume / Continue would use."""
    from core import workspace
    from core.train import checkpoints

    out = []
    if (run_dir / "output" / workspace.MODEL_MARKER).is_file():
        out.append(run_dir / "output")
    ck = checkpoints.last_complete(run_dir / "output")
    if ck is not None and (ck / REFERENCE).is_file():
        out.append(ck)
    return out


def verify_run(run_dir: str | Path) -> dict:
    """Verify every target of a run and write ``verify.json`` (atomically); returns it."""
    from core import workspace
    from core.jobs import read_json

    run_dir = Path(run_dir)
    flat = read_json(run_dir / "config.json", {}) or {}
    base = flat.get("model_name_or_path")
    found = targets(run_dir)
    from core import jobs

    result = {"state": "running", "started": time.time(), "targets": {}, "pid": os.getpid(),
              "pid_start": jobs.proc_start(os.getpid())}
    workspace.write_json_atomic(run_dir / RESULT, result)
    for t in found:
        name = "output" if t.name == "output" else t.name
        result["targets"][name] = verify_folder(t, base, flat)
    result.pop("pid", None)
    result.pop("pid_start", None)
    states = [v["state"] for v in result["targets"].values()]
    result["state"] = ("none" if not states else "failed" if "failed" in states else "error" if "error" in states
                       else "no_reference" if all(s == "no_reference" for s in states) else "verified")
    result["finished"] = time.time()
    workspace.write_json_atomic(run_dir / RESULT, result)
    return result


def read(run_dir: str | Path) -> dict | None:
    """The run's verify.json (None before any verification); a check left "running" by a process
    that is gone (its supervisor killed) reads as an error."""
    from core import jobs

    v = jobs.read_json(Path(run_dir) / RESULT, None)
    if v and v.get("state") == "running" and v.get("pid") and not jobs.alive(v["pid"], v.get("pid_start")):
        v = {**v, "state": "error", "reason": "the check's process ended before its verdict (killed?)"}
    return v


def summary(v: dict | None) -> dict | None:
    """The headline of a verification: its state and the target that decided it (the final output
    first), with the two losses and the reason."""
    if not v:
        return None
    t = v.get("targets") or {}
    state = v.get("state")
    name = next((k for k in ("output", *t) if k in t and t[k].get("state") == state), None)
    if name is None:
        name = "output" if "output" in t else next(iter(t), None)
    main = t.get(name) or {}
    return {"state": state, "target": name,
            "reloaded_eval_loss": main.get("reloaded_eval_loss"), "training_eval_loss": main.get("training_eval_loss"),
            "step": main.get("step"), "reason": main.get("reason") or v.get("reason"),
            "checkpoints": {k: x.get("state") for k, x in t.items() if k != "output"}}


def verdict_for_folder(path: str | Path) -> dict | None:
    """The verification of a run output or checkpoint folder (for Merge / Quantize warnings):
    None when the folder is no run's output."""
    p = Path(path)
    for run_dir, name in ((p.parent, "output"), (p.parent.parent, p.name)):
        if (run_dir / "studio.json").is_file() and (run_dir / "config.json").is_file():
            v = read(run_dir) or {}
            t = (v.get("targets") or {}).get(name)
            if t:
                return t
            if v.get("state") in ("running", "error"):
                return {"state": v["state"], "folder": str(p), "reason": v.get("reason")}
            return {"state": "unverified", "folder": str(p)}
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m core.train.verify RUN_DIR\n")
        return 2
    res = verify_run(Path(argv[0]))
    print(json.dumps(summary(res)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
