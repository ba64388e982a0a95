"""Quantization presets: JSON files under presets/quant, loaded and checked."""

from __future__ import annotations

import json
from pathlib import Path

from core.quant.algorithms import ACT_QUANT_DEFAULT, ACT_QUANT_METHODS

PRESETS_DIR = Path(__file__).resolve().parents[2] / "presets" / "quant"



def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.json"))


def load_preset(name_or_path: str) -> dict:
    """A preset by name (presets/quant), by file, or given inline as a JSON object."""
    if name_or_path.lstrip().startswith("{"):
        try:
            preset = json.loads(name_or_path)
        except ValueError as e:
            raise ValueError(f"inline preset is not JSON: {e}") from None
        problems = check_preset(preset)
        if problems:
            raise ValueError("preset: " + "; ".join(problems))
        return preset
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
    am = p.get("act_quant_method")
    if am is not None and am not in ACT_QUANT_METHODS:
        out.append(f"act_quant_method must be abs_max (PaddleSlim AbsmaxObserver: the largest |x| over every "
                   f"calibration batch) or avg (AVGObserver: the mean over batches of each sample's largest |x|), "
                   f"the two upstream's llm/utils/quant.py runs for int8 activations; not {am!r}")
    elif am is not None and algo != "a8w8":
        out.append(f"act_quant_method is for a8w8 (weight-only presets do not quantize activations), not {algo!r}")
    a = p.get("smooth_alpha", 0.5)
    if not (0 < float(a) < 1):
        out.append(f"smooth_alpha must be in (0, 1), not {a!r}")
    return out




# ------------------------------------------------- llm/run_quantization.py argument files

# What the studio's engine does not do, by upstream key: a precise refusal instead of a silent substitute.
NOT_IN_THE_ENGINE = {
    "do_awq": "AWQ search is not in the studio's Quantize engine (nearest: the gptq-wint4 preset)",
    "do_qat": "QAT is not supported by llm/run_quantization.py itself ('Not Yet support') nor by the studio",
    "auto_clip": "AWQ auto-clip is not in the studio's Quantize engine",
    "load_quant_model": "loading an already quantized model is not a quantization; chat with it in the Chat tab",
}
# Upstream refinements the engine approximates: said in the plan's notes, never silently.
APPROXIMATED = {
    "smooth_piecewise_search": "piecewise alpha search is not done: Smooth uses one alpha (0.5) for every channel",
    "smooth_search_piece": "piecewise alpha search is not done: Smooth uses one alpha (0.5) for every channel",
    "shift_all_linears": "Shift is applied to the norm-fed linears only",
    "smooth_all_linears": "Smooth is applied to the norm-fed linears only",
    "shift_sampler": "Shift statistics are the mean over all calibration batches (no EMA)",
    "smooth_sampler": "Smooth statistics are the max over all calibration batches",
}


def from_paddlenlp(d: dict) -> tuple[dict | None, list[str], list[dict]]:
    """An upstream quantization argument dict -> (the equivalent preset, notes, problems).

    Mapping (PaddleNLP llm/run_quantization.py semantics): ``do_gptq`` is GPTQ of 4-bit weights, per
    channel, damp 0.1, act-order over ``gptq_step`` batches; ``do_ptq`` with ``quant_type`` a8w8 is
    A8W8 PTQ over ``ptq_step`` batches after the optional ``shift`` / ``smooth``, activation scales by
    ``act_quant_method`` (left out: upstream's default, avg) and per-channel weight scales; with a
    weight-only ``quant_type`` it is round-to-nearest of the weights (groupwise: groups of 128).
    Problems name the key: quant types and methods the engine lacks (a8w8c8, FP8, AWQ, QAT)."""
    problems, notes = [], []

    def refuse(key, text):
        problems.append({"code": "not_in_engine", "field": key, "params": {"key": key, "what": text},
                         "message": text})

    for key, text in NOT_IN_THE_ENGINE.items():
        if d.get(key):
            refuse(key, text)
    qtype = d.get("quant_type", "a8w8")  # upstream's default
    if qtype not in ("a8w8", "weight_only_int8", "weight_only_int4"):
        refuse("quant_type", f"quant_type {qtype!r} is not in the studio's Quantize engine "
                             "(it does a8w8, weight_only_int8 and weight_only_int4; no cache-KV int8, no FP8)")
    if d.get("do_gptq"):
        preset = {"name": "paddlenlp-gptq", "algorithm": "weight_only_int4", "method": "gptq", "group_size": -1,
                  "percdamp": 0.1, "actorder": True, "calib_steps": int(d.get("gptq_step", 8))}
        if qtype != "weight_only_int4":
            notes.append(f"upstream GPTQ quantizes weights to 4 bits whatever quant_type says ({qtype!r})")
    elif d.get("do_ptq") and qtype == "a8w8":
        act = d.get("act_quant_method", ACT_QUANT_DEFAULT)
        if act not in ACT_QUANT_METHODS:
            refuse("act_quant_method", f"act_quant_method {act!r} is not in the studio's Quantize engine (it runs "
                                       "abs_max and avg, the int8 activation observers of llm/utils/quant.py)")
        wqm = d.get("weight_quant_method", "abs_max_channel_wise")
        if wqm != "abs_max_channel_wise":
            refuse("weight_quant_method", f"weight_quant_method {wqm!r} for a8w8 is not in the studio's Quantize engine "
                                          "(its a8w8 weights are int8 per output channel: abs_max_channel_wise)")
        preset = {"name": "paddlenlp-ptq", "algorithm": "a8w8", "method": "ptq", "shift": bool(d.get("shift")),
                  "smooth": bool(d.get("smooth")), "smooth_alpha": 0.5, "calib_steps": int(d.get("ptq_step", 32))}
        if act in ACT_QUANT_METHODS:  # else refused above, once
            preset["act_quant_method"] = act
        said = set()
        for key, text in APPROXIMATED.items():
            if d.get(key) and text not in said and (not key.startswith("shift") or d.get("shift")) \
                    and (not key.startswith("smooth") or d.get("smooth")):
                said.add(text)
                notes.append(f"{key}: {text}")
    elif qtype in ("weight_only_int8", "weight_only_int4"):
        group = 128 if d.get("weight_quant_method") == "groupwise" else -1
        preset = {"name": f"paddlenlp-{qtype}", "algorithm": qtype, "method": "rtn", "group_size": group}
        if d.get("do_ptq"):
            preset["calib_steps"] = int(d.get("ptq_step", 32))
            notes.append("weight-only PTQ is round to nearest of the weights: calibration data only scores the result")
    else:
        preset = None
        if not problems:
            problems.append({"code": "nothing_to_do", "field": "", "params": {},
                             "message": "no quantization asked for: set do_ptq, do_gptq or a weight-only quant_type"})
    if preset is not None:
        preset["batch_size"] = int(d.get("per_device_train_batch_size", 8))  # upstream's calibration loader uses it
        what = {"a8w8": "A8W8 PTQ", "weight_only_int8": "weight-only INT8", "weight_only_int4": "weight-only INT4"}
        preset["description"] = (f"{what[preset['algorithm']]} ({preset['method']}"
                                 + (", shift" if preset.get("shift") else "") + (", smooth" if preset.get("smooth") else "")
                                 + (f", {preset['act_quant_method']} activation scales"
                                    if preset.get("act_quant_method") else "")
                                 + ") from a PaddleNLP llm/run_quantization.py config")
        problems += [{"code": "bad_preset", "field": "", "params": {}, "message": m} for m in check_preset(preset)]
    return (None if problems else preset), notes, problems
