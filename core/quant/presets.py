"""Quantization presets: JSON files under presets/quant, loaded and checked."""

from __future__ import annotations

import json
from pathlib import Path

PRESETS_DIR = Path(__file__).resolve().parents[2] / "presets" / "quant"



def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.json"))


def load_preset(name_or_path: str) -> dict:
    p = Path(name_or_path)
    if not p.is_file():
        p = PRESETS_DIR / f"{name_or_path}.json"
    if not p.is_file():
        raise ValueError(f"unknown quantization preset {name_or_path!r}; choose one of {', '.join(list_presets())}")
    preset = json.loads(p.read_text(encoding="utf-8"))
    preset.setdefault("name", p.stem)
    problems = check_preset(preset)
    if problems:
        raise ValueError(f"preset {p}: " + "; ".join(problems))
    return preset


def check_preset(p: dict) -> list[str]:
    """Every problem of a preset, in one list."""
    out = []
    algo = p.get("algorithm")
    if algo not in ("weight_only_int8", "weight_only_int4", "a8w8"):
        out.append(f"algorithm must be weight_only_int8, weight_only_int4 or a8w8, not {algo!r}")
    if not p.get("description"):
        out.append("description is missing")
    if p.get("method", "rtn") not in ("rtn", "gptq", "ptq"):
        out.append(f"method must be rtn, gptq or ptq, not {p.get('method')!r}")
    g = p.get("group_size", -1)
    if g not in (-1, 64, 128):
        out.append(f"group_size must be -1 (per channel), 64 or 128 (what weight_only_linear supports), not {g!r}")
    if p.get("method") == "gptq" and g != -1:
        out.append("gptq presets are per channel (group_size -1)")
    if algo == "a8w8" and p.get("method", "ptq") != "ptq":
        out.append("a8w8 uses method ptq")
    a = p.get("smooth_alpha", 0.5)
    if not (0 < float(a) < 1):
        out.append(f"smooth_alpha must be in (0, 1), not {a!r}")
    return out


