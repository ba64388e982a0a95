"""The round-trip verdict of a picked folder as a warning line (Merge and Quantize tabs): what
core.train.verify found when the run that saved it reloaded it in a fresh process."""

from __future__ import annotations

import json
from pathlib import Path

from core import workspace
from core.train import verify
from studio.locales import reason_text, t


def verify_warning(path: str | None, lang: str) -> str:
    """"" when the folder passed its run's check or is no run's output; else a warning. A merged
    model is judged by the adapter it was merged from."""
    if not path:
        return ""
    v = verify.verdict_for_folder(path)
    if v is None:  # a merged model: its adapter's verdict
        try:
            src = json.loads((Path(path) / workspace.MODEL_MARKER).read_text(encoding="utf-8"))["merged_from"]["adapter"]
        except (OSError, ValueError, KeyError, TypeError):
            return ""
        v = verify.verdict_for_folder(src)
    if not v or v.get("state") == "verified":
        return ""
    if v["state"] in ("failed", "error"):
        return t("verify.warn_failed", lang, reason=reason_text(v.get("reason"), lang))
    key = f"verify.state.{v['state']}"
    return t("verify.warn_unverified", lang, state=t(key, lang) if t(key, lang) != key else v["state"])
