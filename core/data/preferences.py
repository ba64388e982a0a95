"""Preference pairs collected while chatting: two answers to the same conversation, one marked
better, appended as PaddleNLP preference records ({src, tgt, response, sort}) to a workspace
dataset (created on the first pair), then a DPO run configured on them."""

from __future__ import annotations

import fcntl
import json
from datetime import datetime, timezone
from pathlib import Path

from core import workspace
from core.data import datasets


class PreferenceError(ValueError):
    """A pair that cannot be kept, with a code the studio translates."""

    def __init__(self, code: str, message: str, **params):
        super().__init__(message)
        self.code, self.params = code, params


def record(history_a: list[dict], history_b: list[dict], better: str, system: str = "") -> dict:
    """The preference record of two chats that end with answers to the same user message.
    ``better``: "a" or "b". The earlier turns are the better side's own."""
    if better not in ("a", "b"):
        raise PreferenceError("bad_choice", f"better must be 'a' or 'b', not {better!r}")
    sides = []
    for h in (history_a, history_b):
        turns = [m for m in (h or []) if m.get("role") in ("user", "assistant")]
        if len(turns) < 2 or turns[-1]["role"] != "assistant" or turns[-2]["role"] != "user":
            raise PreferenceError("no_answers", "both sides need an answer to the last message: send a message "
                                                "with two models loaded (compare) first")
        sides.append(turns)
    a, b = sides
    if a[-2]["content"] != b[-2]["content"]:
        raise PreferenceError("different_prompts", "the two sides answer different messages")
    if any(not str(x[-1]["content"]).strip() for x in (a, b)):
        raise PreferenceError("empty_answer", "one of the two answers is empty: there is nothing to prefer")
    win, lose = (a, b) if better == "a" else (b, a)
    src = [m["content"] for m in win if m["role"] == "user"]
    tgt = [m["content"] for m in win[:-1] if m["role"] == "assistant"]
    rec = {"src": src, "tgt": tgt, "response": [win[-1]["content"], lose[-1]["content"]], "sort": [1, 0]}
    if system and system.strip():
        rec["system"] = system
    problems = datasets.check_preference_record(rec)
    if problems:
        p = problems[0]
        raise PreferenceError("bad_pair", f"{p.field}: {datasets.message(p.code, p.params)}")
    return rec


def append(name: str, rec: dict) -> dict:
    """Append ``rec`` to datasets/NAME (a preference dataset, created when missing); returns its meta
    with the new count. The file is rewritten through a temp file and a rename, under a lock."""
    code = workspace.check_name(name)
    if code:
        raise PreferenceError(code, datasets.message(code, {"name": name}), name=name)
    root = workspace.datasets_dir()
    root.mkdir(parents=True, exist_ok=True)
    final = root / name
    with open(root / ".preferences.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if final.exists():
            meta = _meta(final)
            if meta.get("format") not in datasets.PREFERENCE_FORMATS:
                raise PreferenceError("not_preference", f"dataset {name!r} exists and holds {meta.get('format') or 'other'} "
                                                        f"records, not preference pairs: choose another name", name=name)
            d = final
        else:
            d = workspace.temp_dir_beside(final)
            (d / "train.json").write_text("", encoding="utf-8")
            (d / "dev.json").write_text("", encoding="utf-8")
            meta = {"name": name, "source": "chat", "format": "preference", "train": 0, "dev": 0, "shape": "list",
                    "created": _now()}
        train = d / "train.json"
        text = train.read_text(encoding="utf-8")
        if text and not text.endswith("\n"):
            text += "\n"
        workspace.write_text_atomic(train, text + json.dumps(rec, ensure_ascii=False) + "\n")
        meta.update(train=meta.get("train", 0) + 1, updated=_now())
        workspace.write_json_atomic(d / workspace.DATASET_META, meta)
        if d != final:
            workspace.publish_dir(d, final)
    return {**meta, "path": str(final)}


def _meta(d: Path) -> dict:
    try:
        return json.loads((d / workspace.DATASET_META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"format": datasets.detect_format(d)}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def dpo_config(dataset: str | Path, model_dir: str | Path | None, name: str | None = None):
    """A DPO-LoRA RunConfig on ``dataset`` starting from ``model_dir`` (an adapter: its base)."""
    from core.models import loading
    from core.train.config import RunConfig

    if model_dir and loading.adapter_kind(model_dir):
        model_dir = loading.base_of(model_dir)
    cfg = RunConfig(name=name or f"dpo-{Path(dataset).name}"[:60])
    cfg.model.model_name_or_path = str(model_dir or "")
    cfg.data.dataset_name_or_path = str(dataset)
    cfg.method.method = "dpo"
    cfg.method.dpo_lora = True
    cfg.training.per_device_train_batch_size = 1
    cfg.training.evaluation_strategy = "no"
    return cfg
