"""What the workspace holds, read from disk on every call: datasets, models (with their kind),
runs, saved configs, and all activity (runs and jobs together). Every picker in the studio and
every `list` verb reads these, so a new dataset, run, merged or quantized model is offered
everywhere as soon as its folder is complete.
"""

from __future__ import annotations

import json
from pathlib import Path

from core import jobs, workspace
from core.data import datasets as _datasets
from core.models import loading
from core.train import runs as _runs

MODEL_KINDS = ("base", "trained", "merged", "quantized", "static", "adapter")


def datasets() -> list[dict]:
    """Every dataset folder, newest first (meta.json plus its path)."""
    return _datasets.list_datasets()


def _info(d: Path) -> dict:
    try:
        return json.loads((d / workspace.MODEL_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def model_entry(d: Path) -> dict | None:
    """One folder as a model: kind, label and what it came from; None when it is not (yet) a model.

    base: a model folder in models/ (demo, imported); trained: a full fine-tune's output;
    merged: base + adapter folded by merge; quantized; adapter: a run output holding an adapter.
    A run output counts once its marker is written (training finished), a models/ folder once its
    config.json is there (merge and quantize publish by renaming a complete temp folder).
    """
    d = Path(d)
    home = workspace.home()
    in_run = d.name == "output" and d.parent.parent == workspace.runs_dir()
    if d.name.startswith(".") or not d.is_dir():
        return None
    adapter = loading.adapter_kind(d)
    if in_run and not (d / workspace.MODEL_MARKER).is_file():
        return None
    if not adapter and not (d / "config.json").is_file():
        return None
    info = _info(d)
    if adapter:
        kind = "adapter"
    elif (d / workspace.QUANT_MARKER).is_file():
        kind = "quantized"
    elif info.get("kind") == "static":  # a Paddle Inference export (core.models.export)
        kind = "static"
    elif info.get("merged_from"):
        kind = "merged"
    elif in_run:
        kind = "trained"
    else:
        kind = "base"
    name = d.parent.name if in_run else d.name
    rel = str(d.relative_to(home)) if d.is_relative_to(home) else str(d)
    return {"name": name, "path": str(d), "kind": kind, "adapter": adapter, "label": f"{rel} ({adapter or kind})",
            "base": info.get("base") or (info.get("merged_from") or {}).get("base") or info.get("exported_from"),
            "run": d.parent.name if in_run else None}


def models(kinds: tuple[str, ...] | list[str] | None = None) -> list[dict]:
    """Models in models/ (by name) then run outputs (newest run first), optionally of some kinds."""
    out = []
    root = workspace.models_dir()
    if root.is_dir():
        out += [m for d in sorted(root.iterdir()) if (m := model_entry(d))]
    rroot = workspace.runs_dir()
    if rroot.is_dir():
        out += [m for d in sorted(rroot.glob("*/output"), reverse=True) if (m := model_entry(d))]
    return [m for m in out if not kinds or m["kind"] in kinds]


def model_rows() -> list[dict]:
    """Every model with what the Models list shows: family, parameters, disk size, chat template."""
    from core.models import imports

    return [{**m, **imports.describe(m["path"])} for m in models()]


def runs() -> list[dict]:
    return _runs.list_runs()


def configs_dir() -> Path:
    return workspace.home() / "configs"


def configs() -> list[str]:
    """Names of the saved training configs (configs/NAME.json)."""
    d = configs_dir()
    return sorted(p.stem for p in d.glob("*.json")) if d.is_dir() else []


def _fraction(step, max_steps) -> float | None:
    return min(step / max_steps, 1.0) if max_steps else None


def activity() -> list[dict]:
    """Every run and job, newest first, as uniform rows (what the Jobs view lists)."""
    rows = []
    for r in _runs.list_runs():
        p, st = r["progress"], r["status"]
        frac = 1.0 if st.get("state") == "succeeded" else _fraction(p["step"], p["max_steps"])
        rows.append({"id": r["run_id"], "kind": "train", "title": r.get("name") or r["run_id"], "state": st.get("state"),
                     "fraction": frac, "text": f"step {p['step']}/{p['max_steps']}", "created": r.get("created") or "",
                     "started": st.get("started"), "finished": st.get("finished"), "reason": st.get("reason")})
    for j in jobs.list_jobs():
        st, pr = j["status"], j.get("progress") or {}
        frac = 1.0 if st.get("state") == "succeeded" else pr.get("fraction")
        rows.append({"id": j["job_id"], "kind": j["kind"], "title": j.get("title") or j["kind"], "state": st.get("state"),
                     "fraction": frac, "text": pr.get("text", ""), "created": j.get("created") or "",
                     "started": st.get("started"), "finished": st.get("finished"), "reason": st.get("reason")})
    rows.sort(key=lambda r: r["created"], reverse=True)
    return rows


def reconcile() -> list[str]:
    """Settle every run and job whose supervisor vanished and start what waits in the queue (the
    studio does this every few seconds, page open or not); returns the runs started."""
    jobs.list_jobs()  # reading a job's status settles it
    return _runs.reconcile()


def keep_warm() -> None:
    """Keep a warm spare for the next single-process run, owned by this process (the studio)."""
    _runs.keep_warm()


def stop(item_id: str) -> dict:
    """Stop a run or a job by its id (the same Stop for both)."""
    if (workspace.runs_dir() / item_id / "studio.json").is_file():
        return _runs.stop(item_id)
    return jobs.stop(item_id)


def signature(with_metrics: bool = False) -> tuple:
    """Changes when anything a listing shows changes: a folder appears or goes, a status, a marker
    (and, ``with_metrics``, a run's metrics: what an activity table with steps shows)."""
    sig = []
    for root in (workspace.datasets_dir(), workspace.models_dir(), workspace.runs_dir(), jobs.jobs_dir(), configs_dir()):
        try:
            entries = sorted(root.iterdir())
        except OSError:
            sig.append((root.name, None))
            continue
        for d in entries:
            row = [d.name]
            for f in ("status.json", "progress.json", workspace.DATASET_META, "config.json", workspace.MODEL_MARKER,
                      f"output/{workspace.MODEL_MARKER}", *(("metrics.jsonl",) if with_metrics else ())):
                try:
                    s = (d / f).stat()
                    row.append((f, s.st_mtime_ns, s.st_size))
                except OSError:
                    pass
            sig.append(tuple(row))
    return tuple(sig)
