"""Quantize a merged (or base) model: weight-only INT8/INT4 (per-channel or group-wise, RTN or GPTQ)
and A8W8 post-training quantization (optionally with Shift and Smooth). CPU-first.

What runs where (paddle 3.0.0 CPU, paddlenlp 3.0.0b4, paddleslim 2.6.0):
- RTN weight-only: our own round-to-nearest with per-channel / group scales (numpy), because
  ``weight_quantize`` computes in fp16 and ``weight_only_linear`` / ``weight_dequantize`` have no CPU kernel.
- GPTQ: PaddleSlim's ``GPTQ.fasterquant`` (works on paddle 3.0.0), layer after layer, each layer
  calibrated on the model whose earlier layers are already quantized (as PaddleNLP's ``apply_gptq``).
  Upstream saves the result as fake-quantized floats; the studio stores the same 4-bit grid as
  weight_only_int4 (the report's ``notes`` say so).
- A8W8: ``paddle.quantization.PTQ`` with the PaddleSlim activation observer the preset's
  ``act_quant_method`` names, as upstream's llm/utils/quant.py maps it (``avg``: ``AVGObserver``, the
  default of an upstream config; ``abs_max``: ``AbsmaxObserver``, what the studio's a8w8 presets say;
  per tensor), and ``AbsMaxChannelWiseWeightObserver`` (weights, per output channel) collect the scales.
  Calibration batches are padded as upstream's collator pads them (LLaMA tokenizers with EOS, on the
  tokenizer's padding side): the observers see the padding positions too.
- Shift and Smooth: our own (PaddleSlim's Shift rewraps norms into helper layers that rename the
  state-dict keys, and its Smooth piece-wise search casts to fp16 and fails on CPU). Shift moves the
  per-channel centre z of a norm's output into a norm bias (-z) and the following linears' bias (+z·W);
  Smooth moves s_j = max|X_j|^α / max|W_j|^(1-α) from the activations into the weights.

The output folder is what PaddleNLP's GPU inference reads:
- weight-only: ``<linear>.quant_weight`` (int8; int4 packed two per byte) in the layout
  ``paddle.nn.quant.weight_quantize(arch=80)`` produces (SM80/86/89/90 share it), ``<linear>.quant_scale``
  (fp16; [out] per channel, [in/group, out] group-wise), and ``config.json`` with a
  ``quantization_config`` whose ``weight_quantize_algo`` is weight_only_int8 / weight_only_int4;
- a8w8: int8 ``<linear>.weight`` ([in, out], as PaddleNLP's fused a8w8 loader casts it),
  ``act_scales.json`` / ``weight_scales.json`` keyed ``<linear>.activation_quanter`` /
  ``<linear>.weight_quanter`` (the values PaddleSlim's observers report: activation abs-max or average
  per-sample max, weight abs-max per channel), Shift's
  ``*_layernorm.bias`` and linear biases; ``quantization_config`` with quant_type a8w8, shift, smooth.
Plus the tokenizer with its chat template, ``studio_quant.json`` (the marker ``core.models.evaluate.load``
recognises) and ``report.json``. Written to a hidden temp folder and renamed into place.

Loading (``load_quantized``): on CPU the int weights are **dequantized on load** into fp32
(W = code · scale), and for A8W8 every quantized linear also quantizes its input to int8 on the fly
with the calibrated activation scale (simulated in paddle ops). Where a CUDA GPU is visible,
weight-only models use Paddle's ``weight_only_linear`` kernel on the stored int weights instead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import shutil
import sys
import time
from pathlib import Path

from core import workspace
from core.jobs import report_progress
from core.data import templates
from core.models import evaluate, loading
from core.models.loading import load_quantized
from core.quant.algorithms import (ACT_QUANT_DEFAULT, ACT_QUANT_METHODS, LAYOUT_ARCH, _collect_inputs, _gptq_layers,
                                   _ptq_scales, _require_gpu, _shift_smooth, _transform_input, bits_of, dequant, pack,
                                   rel_error, rtn, target_linears)
from core.quant.presets import check_preset, list_presets, load_preset
from core.quant.presets import from_paddlenlp as load_paddlenlp_preset
from core.workspace import MODEL_MARKER, QUANT_MARKER

def _weights_bytes(model_dir: Path) -> int:
    from safetensors import safe_open

    total = 0
    if not list(model_dir.glob("*.safetensors")):  # a full fine-tune's model_state.pdparams: its size on disk
        return sum(f.stat().st_size for f in model_dir.glob("*.pdparams"))
    for f in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(f), framework="np") as h:
            for k in h.keys():
                t = h.get_slice(k)
                shape = t.get_shape()
                size = {"F32": 4, "F16": 2, "BF16": 2, "I8": 1, "U8": 1, "I64": 8, "I32": 4, "F64": 8}[t.get_dtype()]
                total += size * math.prod(shape)
    return total


def _calib_pad(tok) -> tuple[int, str]:
    """(pad id, side) of upstream's calibration batches: llm/run_quantization.py pads LLaMA tokenizers
    with EOS, and DataCollatorForSeq2Seq pads on the tokenizer's ``padding_side`` (left for
    LlamaTokenizer). The observers see the padding positions too, so this is part of the scales."""
    from paddlenlp.transformers import Llama3Tokenizer, LlamaTokenizer

    pad = tok.eos_token_id if isinstance(tok, (LlamaTokenizer, Llama3Tokenizer)) else tok.pad_token_id
    if pad is None or pad < 0:  # an EOS outside the vocabulary (id -1) is no token to pad with
        pad = tok.pad_token_id
    return pad, getattr(tok, "padding_side", "right")


def _calib_batches(tok, tpl, records, steps: int, batch_size: int, src_length: int, max_length: int):
    import numpy as np
    import paddle

    exs = [e for e in (templates.build_example(tok, tpl, r, src_length, max_length) for r in records) if e]
    exs = exs[: steps * batch_size]
    if not exs:
        raise ValueError("no calibration examples (empty data?)")
    pad, side = _calib_pad(tok)
    out = []
    for i in range(0, len(exs), batch_size):
        chunk = exs[i:i + batch_size]
        n = max(len(e["input_ids"]) for e in chunk)
        ids = np.full((len(chunk), n), pad, dtype="int64")
        att = np.zeros((len(chunk), n), dtype="int64")
        for j, e in enumerate(chunk):
            k = len(e["input_ids"])
            at = slice(n - k, n) if side == "left" else slice(0, k)
            ids[j, at] = e["input_ids"]
            att[j, at] = 1
        out.append((paddle.to_tensor(ids), paddle.to_tensor(att)))
    return out, len(exs)



# ---------------------------------------------------------------- data


def _training_dataset(model_dir: Path) -> str | None:
    """The dataset a merged model was trained on: studio_model.json (merged_from.adapter = <run>/output)
    -> the run's config.json (the PaddleNLP argument JSON) -> dataset_name_or_path."""
    info = model_dir / MODEL_MARKER
    if not info.is_file():
        return None
    meta = json.loads(info.read_text(encoding="utf-8"))
    if meta.get("dataset"):
        return meta["dataset"]
    adapter = (meta.get("merged_from") or {}).get("adapter")
    if not adapter:
        return None
    for cfg in (Path(adapter).parent / "config.json", Path(adapter) / "config.json"):
        if cfg.is_file():
            try:
                ds = json.loads(cfg.read_text(encoding="utf-8")).get("dataset_name_or_path")
            except ValueError:
                continue
            if ds:
                return ds
    return None


def resolve_data(model_dir: Path, data: str | None) -> tuple[Path, Path | None]:
    """(calibration file, dev file or None). Calibration: --data, else the training dataset's
    quant.json if present, else its train split."""
    from core.data import datasets

    src = Path(data) if data else (Path(d) if (d := _training_dataset(model_dir)) else None)
    if src is None:
        raise ValueError(f"{model_dir} does not record its training dataset; pass --data DIR (a dataset folder or file)")
    if not src.exists():
        raise FileNotFoundError(f"calibration data {src} does not exist")
    if src.is_dir():
        has_quant = (src / "quant.json").is_file()
        try:
            files = datasets.resolve_files(src)
        except datasets.DatasetError:
            if not has_quant:  # a folder of quant.json alone is enough (as llm/run_quantization.py reads it)
                raise
            files = {}
        calib = src / "quant.json" if has_quant else (files.get("train") or files.get("data") or [None])[0]
        dev = (files.get("dev") or [None])[0]
        if calib is None:
            raise ValueError(f"{src}: no quant.json or train split to calibrate on")
        return calib, dev
    return src, None


# ---------------------------------------------------------------- quantize


def _versions() -> dict:
    from importlib import metadata

    out = {}
    for p in ("paddlepaddle", "paddlenlp", "paddleslim"):
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            out[p] = None
    return out


def _eval(loaded, dev, limit, max_new_tokens):
    if dev is None or not limit:
        return None
    r = evaluate.evaluate(data=str(dev), limit=limit, max_new_tokens=max_new_tokens, src_length=256, max_length=512,
                          loaded=loaded)
    return {k: r.get(k) for k in ("eval_loss", "perplexity", "token_accuracy", "exact_match", "records", "seconds")}


def quantize(model_dir, preset, out_dir, data=None, calib_steps: int | None = None, batch_size: int | None = None,
             eval_limit: int = 32, eval_max_new_tokens: int = 24, kernel: str = "auto", log=print) -> dict:
    """Quantize ``model_dir`` with ``preset`` (a name in presets/quant or a dict) into ``out_dir``.

    Returns the report (also written as ``out_dir/report.json``). ``eval_limit`` dev records are
    scored before and after (0 skips the evaluation); ``kernel`` is how the result is evaluated:
    auto, paddle (paddle ops on any device) or gpu (Paddle's weight_only_linear; fails without a GPU)."""
    import numpy as np
    import paddle
    from safetensors.numpy import save_file

    t0 = time.perf_counter()
    model_dir, out = Path(model_dir), Path(out_dir)
    preset = load_preset(preset) if isinstance(preset, str) else dict(preset)
    problems = check_preset(preset)
    if problems:
        raise ValueError("; ".join(problems))
    if kernel == "gpu":
        _require_gpu()
    if out.exists():
        raise FileExistsError(f"{out} exists; choose another output folder")
    if not model_dir.is_dir():
        raise FileNotFoundError(f"{model_dir} is not a model folder")
    kind = loading.adapter_kind(model_dir)
    if kind in loading.NOT_MERGEABLE:
        raise ValueError(f"{model_dir} holds a {kind} adapter, which has no weights of its own to quantize and cannot be "
                         f"merged ({loading.NOT_MERGEABLE[kind]}); quantize its base model instead")
    if kind:
        raise ValueError(f"{model_dir} holds an unmerged {kind} adapter: merge it into its base first "
                         f"(Merge tab, or paddle-studio merge --adapter {model_dir} --out DIR) and quantize the merged model")
    if (model_dir / QUANT_MARKER).is_file():
        raise ValueError(f"{model_dir} is already quantized; quantize the full-precision model")
    if not (model_dir / "config.json").is_file() or not (list(model_dir.glob("*.safetensors")) or list(model_dir.glob("*.pdparams"))):
        raise ValueError(f"{model_dir} has no config.json and weights (.safetensors or .pdparams; is it a model folder?)")
    algo = preset["algorithm"]
    method = preset.get("method", "ptq" if algo == "a8w8" else "rtn")
    act_method = preset.get("act_quant_method", ACT_QUANT_DEFAULT) if algo == "a8w8" else None
    group = int(preset.get("group_size", -1))
    steps = int(calib_steps or preset.get("calib_steps", 8))
    bsz = int(batch_size or preset.get("batch_size", 8))
    calib_file, dev = resolve_data(model_dir, data)
    from core.data import datasets

    records = list(datasets.iter_records(calib_file, "paddlenlp"))
    if not records:  # said before the model loads, not by the calibration seconds later
        raise ValueError(f"calibration data {calib_file} holds no src/tgt record; pass --data DIR (a dataset folder "
                         "or file)")
    log(f"quantizing {model_dir} with {preset['name']} ({algo}, {method}); calibration {calib_file}")

    report_progress(0.05, "loading the model", code="loading_model")
    model, tok, tpl = loading.load(model_dir)
    report_progress(0.1, "evaluating before quantization", code="evaluating_before")
    before = _eval((model, tok, tpl), dev, eval_limit, eval_max_new_tokens)
    t_eval = time.perf_counter() - t0
    if before:
        log(f"before: ppl {before['perplexity']:.4f} em {before['exact_match']:.3f}")
    report_progress(0.35, "calibrating", code="calibrating")
    batches, n_calib = _calib_batches(tok, tpl, records, steps, bsz, 256, 512)
    names = target_linears(model)
    if not names:
        raise ValueError("found no linear layers to quantize")
    t1 = time.perf_counter()
    originals = {n: l.weight.numpy().astype(np.float32) for n, l in model.named_sublayers() if n in names}
    inputs = _collect_inputs(model, names, batches)

    tensors_q: dict = {}
    layer_rows = []
    extra_files: dict = {}
    norm_groups = {}
    layers = dict(model.named_sublayers())
    if algo == "a8w8":
        shift, smooth = bool(preset.get("shift")), bool(preset.get("smooth"))
        if shift or smooth:
            norm_groups = _shift_smooth(model, batches, shift, smooth, float(preset.get("smooth_alpha", 0.5)), log)
        act, wmax = _ptq_scales(model, names, batches, act_method)
        for n in names:
            w = layers[n].weight.numpy().astype(np.float32)
            s = np.where(wmax[n] == 0, 1e-8, wmax[n]) / 127.0
            codes = np.clip(np.round(w / s[None, :]), -127, 127).astype(np.int8)
            tensors_q[n] = {"weight": codes}
            wq = codes.astype(np.float32) * s[None, :]
            layer_rows.append((n, w, wq, act[n]))
        extra_files["act_scales.json"] = {f"{n}.activation_quanter": act[n] for n in names}
        extra_files["weight_scales.json"] = {f"{n}.weight_quanter": wmax[n].tolist() for n in names}
    else:
        bits = bits_of(algo)
        if method == "gptq":
            res = _gptq_layers(model, names, batches, log, percdamp=float(preset.get("percdamp", 0.1)),
                               actorder=bool(preset.get("actorder", True)))
        else:
            res = {n: rtn(originals[n], bits, group) for n in names}
        for n in names:
            codes, scale = res[n]
            tensors_q[n] = {"quant_weight": pack(codes, bits), "quant_scale": scale.astype(np.float16)}
            layer_rows.append((n, originals[n], dequant(codes, scale, group), None))
    t_quant = time.perf_counter() - t1
    report_progress(0.6, f"quantized {len(names)} linear layers", code="quantized_layers", n=len(names))

    # per-layer reconstruction error on the calibration inputs of the unquantized model
    layer_report = []
    for n, w, wq, a in layer_rows:
        x = inputs[n]
        if algo == "a8w8":
            # the stored model computes act_q(X') · Ŵ' where X', Ŵ' are shifted/smoothed; compare end to end
            lin = layers[n]
            xs = _transform_input(x, n, norm_groups)
            xq = np.clip(np.round(xs / a * 127), -127, 127) * a / 127
            b = lin.bias.numpy() if lin.bias is not None else 0
            ref = x @ originals[n]
            got = xq @ wq + b
            err = float(np.sum((ref - got) ** 2) / max(float(np.sum(ref ** 2)), 1e-20))
        else:
            err = rel_error(x, w, wq)
        layer_report.append({"name": n, "shape": list(w.shape), "rel_error": err})

    # state dict to write
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    for k in list(state):
        if k.endswith(".studio_bias"):
            state[k[: -len(".studio_bias")] + ".bias"] = state.pop(k).astype(np.float32)
    for n in names:
        state.pop(f"{n}.weight")
        for suffix, arr in tensors_q[n].items():
            state[f"{n}.{suffix}"] = arr
    state = {k: np.ascontiguousarray(v) for k, v in state.items()}

    cfg = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    if algo == "a8w8":
        qc = {"weight_quantize_algo": "a8w8", "quant_type": "a8w8", "shift": bool(preset.get("shift")),
              "smooth": bool(preset.get("smooth")), "shift_smooth_all_linears": False,
              "weight_quant_method": "abs_max_channel_wise", "act_quant_method": act_method}
    else:
        qc = {"weight_quantize_algo": algo, "quant_type": algo, "weight_quant_method":
              "abs_max_channel_wise" if group == -1 else "groupwise", "weight_blocksize": group if group != -1 else 64}
    cfg["quantization_config"] = qc
    marker = {"preset": preset["name"], "algorithm": algo, "method": method, "bits": 8 if algo == "a8w8" else bits_of(algo),
              "group_size": group, "layout_arch": LAYOUT_ARCH, "layers": names,
              "activation_bits": 8 if algo == "a8w8" else None, "act_quant_method": act_method, "dtype": "float32",
              "shift": bool(preset.get("shift")), "smooth": bool(preset.get("smooth")),
              "norm_bias": sorted(k for k in state if k.endswith("layernorm.bias")),
              "quantized_from": str(model_dir.resolve())}

    tmp = workspace.temp_dir_beside(out)
    try:
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "np"})
        workspace.write_json_atomic(tmp / "config.json", cfg)
        for f in ("generation_config.json",):
            if (model_dir / f).is_file():
                shutil.copy2(model_dir / f, tmp / f)
        tok.save_pretrained(str(tmp))
        tc_path = tmp / "tokenizer_config.json"
        tc = json.loads(tc_path.read_text(encoding="utf-8"))
        if tpl and tc.get("chat_template") != tpl:
            tc["chat_template"] = tpl
            workspace.write_json_atomic(tc_path, tc)
        for f, obj in extra_files.items():
            workspace.write_json_atomic(tmp / f, obj)
        workspace.write_json_atomic(tmp / QUANT_MARKER, marker)
        workspace.write_json_atomic(tmp / MODEL_MARKER,
                                    {"quantized_from": str(model_dir.resolve()), "preset": preset["name"], "algorithm": algo})
        # evaluate what is on disk, through the loader eval/chat/serve use
        report_progress(0.7, "evaluating the quantized model", code="evaluating_quantized")
        t2 = time.perf_counter()
        del model
        loaded = load_quantized(tmp, kernel=kernel)
        after = _eval(loaded, dev, eval_limit, eval_max_new_tokens)
        t_eval += time.perf_counter() - t2
        size_before, size_after = _weights_bytes(model_dir), _weights_bytes(tmp)
        lin_before = sum(originals[n].size * 4 for n in names)
        lin_after = sum(a.nbytes for n in names for a in tensors_q[n].values())
        errs = [r["rel_error"] for r in layer_report]
        worst = max(layer_report, key=lambda r: r["rel_error"])
        report = {
            "preset": preset["name"], "description": preset.get("description"), "algorithm": algo, "method": method,
            "params": {k: v for k, v in preset.items() if k not in ("name", "description", "command")},
            "model": str(model_dir.resolve()), "out": str(out.resolve()),
            "calibration": {"data": str(calib_file), "records": n_calib, "steps": len(batches), "batch_size": bsz},
            "size": {"before_bytes": size_before, "after_bytes": size_after,
                     "ratio": round(size_after / max(size_before, 1), 4),
                     "times_smaller": round(size_before / max(size_after, 1), 3),
                     "linear_before_bytes": lin_before, "linear_after_bytes": lin_after,
                     "linear_params": sum(originals[n].size for n in names)},
            "eval": {"data": str(dev) if dev else None, "limit": eval_limit, "before": before, "after": after,
                     "kernel": loaded[0].studio_quant_kernel if hasattr(loaded[0], "studio_quant_kernel") else "paddle"},
            "layer_error": {"mean": float(np.mean(errs)), "max": float(np.max(errs)), "max_layer": worst["name"]},
            "layers": layer_report,
            "seconds": {"quantize": round(t_quant, 2), "evaluate": round(t_eval, 2),
                        "total": round(time.perf_counter() - t0, 2)},
            "versions": _versions(),
            "notes": upstream_notes(algo, method, act_method),
            "table": _table(size_before, size_after, before, after, time.perf_counter() - t0),
        }
        workspace.write_json_atomic(tmp / "report.json", report)
        workspace.publish_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log(f"wrote {out}: {size_before} -> {size_after} bytes" +
        (f", ppl {before['perplexity']:.4f} -> {after['perplexity']:.4f}" if before and after else ""))
    return report


# How the output compares with what PaddleNLP's llm/run_quantization.py writes for the same method
# (English, 中文); the report carries them as {"code", "params", "message", "message_zh"}.
UPSTREAM_NOTES = {
    "gptq_storage": (
        "GPTQ output differs in storage from upstream: llm/run_quantization.py --do_gptq saves fake-quantized "
        "floats (each weight replaced by its 4-bit grid value, in the model's dtype, no int weights), the studio "
        "stores weight_only_int4 (int4 codes packed two per byte + fp16 per-channel scales). Both lie on the same "
        "4-bit grid (per output channel abs-max / 7, codes -8..7) and score the same eval loss (up to the fp16 "
        "rounding of the scales); the studio's linears are about 8x smaller.",
        "GPTQ 的存储方式与上游不同：llm/run_quantization.py --do_gptq 保存伪量化的浮点权重（每个权重换成其 4 bit "
        "网格上的值，仍为模型原精度，没有整数权重），本工作室保存为 weight_only_int4（int4 编码每字节两个 + fp16 逐通道"
        "缩放系数）。两者在同一个 4 bit 网格上（逐输出通道 abs-max / 7，编码 -8..7），评估损失相同（仅差缩放系数的 fp16 "
        "舍入）；本工作室的线性层约小 8 倍。"),
    "act_quant_method": (
        "activation scales by act_quant_method {method} (PaddleSlim {observer}, as upstream maps it); "
        "llm/run_quantization.py defaults to avg",
        "激活缩放系数按 act_quant_method {method} 计算（PaddleSlim {observer}，与上游的对应相同）；"
        "llm/run_quantization.py 的默认值为 avg"),
}


def upstream_notes(algo: str, method: str, act_method: str | None) -> list[dict]:
    """What a user comparing this output with upstream's should know (UPSTREAM_NOTES)."""
    out = []
    if method == "gptq":
        out.append(("gptq_storage", {}))
    if algo == "a8w8" and act_method:
        out.append(("act_quant_method", {"method": act_method, "observer": ACT_QUANT_METHODS[act_method]}))
    return [{"code": c, "params": p, "message": UPSTREAM_NOTES[c][0].format(**p),
             "message_zh": UPSTREAM_NOTES[c][1].format(**p)} for c, p in out]


def _table(sb, sa, before, after, secs):
    rows = [{"metric": "weight_bytes", "before": sb, "after": sa}]
    for k in ("eval_loss", "perplexity", "token_accuracy", "exact_match"):
        if before and after:
            rows.append({"metric": k, "before": before.get(k), "after": after.get(k)})
    rows.append({"metric": "seconds", "before": None, "after": round(secs, 2)})
    return rows




# ---------------------------------------------------------------- PaddleNLP quantization configs


def plan_from_paddlenlp(path: str | Path, model: str | None = None, data: str | None = None,
                        name: str | None = None) -> dict:
    """Read an llm/run_quantization.py argument file as a Quantize job: {"ok", "preset", "notes",
    "problems", "model", "data", "name"}. Keys are checked as strictly as upstream's parser (unknown
    keys with a "did you mean", types, choices); model and data paths are read as upstream reads them
    (relative to the working folder), then relative to the file, then as workspace names.
    ``model``/``data``/``name`` override the file's."""
    from core.train import config, upstream

    path = Path(path)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        return {"ok": False, "problems": [{"code": "unreadable", "field": "", "message": f"{path}: {e}"}]}
    except json.JSONDecodeError as e:
        return {"ok": False, "problems": [{"code": "bad_json", "field": "",
                                           "message": f"{path}: line {e.lineno}, column {e.colno}: {e.msg}"}]}
    problems = [{**x, "message": upstream.message(x)}
                for x in upstream.problems(d, upstream.quant_table(), upstream.QUANTIZATION_SCRIPT)]
    if problems or not isinstance(d, dict):
        return {"ok": False, "problems": problems}
    preset, notes, more = load_paddlenlp_preset(d)
    problems += more

    def local(value, root: Path):
        for cand in (Path(value), path.parent / value, root / value):
            if cand.exists():
                return str(cand.resolve())
        return None

    model_arg = model or d.get("model_name_or_path")
    model_dir = local(model_arg, workspace.models_dir()) if model_arg else None
    if not model_arg:
        problems.append({"code": "required", "field": "model_name_or_path", "message": "model_name_or_path is required"})
    elif not model_dir or not Path(model_dir, "config.json").is_file():
        code = "hub_id" if config.looks_like_hub_id(model_arg) else ("not_a_model" if model_dir else "path_missing")
        p = {"code": code, "field": "model_name_or_path", "params": {"path": model_arg}}
        problems.append({**p, "message": config.check_message(p)})
    data_arg = data or d.get("dataset_name_or_path")
    data_dir = local(data_arg, workspace.datasets_dir()) if data_arg else None
    if data_arg and not data_dir:
        p = {"code": "path_missing", "field": "dataset_name_or_path", "params": {"path": data_arg}}
        problems.append({**p, "message": config.check_message(p)})
    own = Path(str(d.get("output_dir") or "").rstrip("/\\")).name  # "./ckpts/ptq/" names ptq; ".", ".." name nothing
    own = "" if own in ("", ".", "..") else own
    out_name = name or own or f"{Path(model_arg or 'model').name}-quant"
    if not name and own:
        notes.append(f"written to the workspace as models/{out_name} (output_dir {d['output_dir']!r} names it)")
    return {"ok": not problems, "preset": preset, "notes": notes, "problems": problems, "model": model_dir,
            "data": data_dir, "name": out_name, "script": upstream.QUANTIZATION_SCRIPT}


# what each method does with calibration data (English, 中文): every preset reads it
CALIBRATION_NEED = {
    "ptq": ("A8W8 PTQ takes its activation scales from it", "A8W8 PTQ 的激活缩放系数取自校准数据"),
    "gptq": ("GPTQ solves each layer's weights on it", "GPTQ 在校准数据上逐层求解权重"),
    "rtn": ("the engine measures each layer's error and the quality before and after on it",
            "量化引擎在其上度量每层误差及量化前后的质量"),
}


def calibration_problem(model, preset: dict, data: str | None) -> dict | None:
    """Why a quantize job would stop for want of calibration data, before it starts: none given and
    none recorded by the model, a path that is not there, or a file without one record. None when
    the data is there. (The job itself loads the model first: it failed only seconds later.)"""
    from core.data import datasets

    method = preset.get("method", "ptq" if preset.get("algorithm") == "a8w8" else "rtn")
    try:
        calib, _ = resolve_data(Path(model), data)
        if not datasets.has_records(calib, "paddlenlp"):
            raise ValueError(f"{calib} holds no src/tgt record")
    except (ValueError, OSError, datasets.DatasetError) as e:
        need, need_zh = CALIBRATION_NEED.get(method, CALIBRATION_NEED["rtn"])
        return {"preset": preset.get("name", ""), "method": method, "need": need, "need_zh": need_zh, "why": str(e)}
    return None


# ---------------------------------------------------------------- CLI


def submit(model: str | Path, preset: str | dict, name: str, data: str | None = None, calib_steps: int | None = None,
           eval_limit: int = 32) -> str:
    """Start a quantize job writing models/NAME; returns the job id (jobs.Refused when it cannot start).
    ``preset``: a name in presets/quant, or a preset dict (e.g. from plan_from_paddlenlp)."""
    from core import jobs

    if not model or not Path(model, "config.json").is_file():
        raise jobs.Refused("no_model", f"{model} is not a model folder (no config.json)", path=str(model))
    if isinstance(preset, dict):
        bad = check_preset(preset)
        if bad:
            raise jobs.Refused("bad_preset", "; ".join(bad), name=preset.get("name", ""))
        preset_arg = json.dumps(preset, ensure_ascii=False)
    elif preset not in list_presets():
        raise jobs.Refused("no_preset", f"unknown preset {preset!r} (one of {', '.join(list_presets())})", name=preset)
    else:
        preset_arg = preset
    out = jobs.check_output(name, workspace.models_dir())
    bad = calibration_problem(model, preset if isinstance(preset, dict) else load_preset(preset), data)
    if bad:
        raise jobs.Refused("no_calibration_data", f"preset {bad['preset']} needs calibration data: {bad['need']}. "
                           f"None was given or found: {bad['why']}. Pick a dataset (--data)", **bad)
    args = ["quantize", "--model", str(model), "--preset", preset_arg, "--out", str(out), "--json",
            "--eval-limit", str(int(eval_limit))]
    if data:
        args += ["--data", str(data)]
    if calib_steps:
        args += ["--calib-steps", str(int(calib_steps))]
    return jobs.submit("quantize", args, title=out.name,
                       params={"model": str(model), "preset": preset if isinstance(preset, str) else preset.get("name", ""),
                               "out": str(out)}, outputs=[out])


def print_plan(plan: dict, as_json: bool, out=sys.stdout) -> None:
    if as_json:
        out.write(json.dumps(plan, ensure_ascii=False, indent=2) + "\n")
        return
    if plan.get("preset"):
        pr = plan["preset"]
        out.write(f"{plan['script']} config -> a Quantize job: {pr['description']}, "
                  f"{pr.get('calib_steps', '-')} calibration batches of {pr.get('batch_size', '-')}\n")
    for n in plan.get("notes", []):
        out.write(f"note: {n}\n")
    for p in plan.get("problems", []):
        field = p.get("field") or "-"
        out.write(p["message"] + "\n" if p["message"].startswith(field + ":") else f"{field}: {p['message']}\n")


def cli_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="paddle-studio quantize", description="Quantize a merged model (see presets/quant)")
    p.add_argument("--model", default=None, help="a merged or base model folder (not an adapter)")
    p.add_argument("--preset", default=None, help=f"one of: {', '.join(list_presets())} (or a preset JSON file)")
    p.add_argument("--config", default=None,
                   help="a PaddleNLP llm/run_quantization.py argument JSON instead of --preset (its model, data and "
                        "output_dir are used unless --model/--data/--out are given); runs as a job, prints its id")
    p.add_argument("--data", default=None, help="calibration data (dataset folder or file); default: the training dataset")
    p.add_argument("--calib-steps", type=int, default=None, help="calibration batches (default: the preset's)")
    p.add_argument("--batch-size", type=int, default=None, help="calibration batch size (default: the preset's)")
    p.add_argument("--eval-limit", type=int, default=32, help="dev records scored before and after (0: skip)")
    p.add_argument("--kernel", default="auto", choices=["auto", "paddle", "gpu"],
                   help="how to run the quantized model for the after-evaluation")
    p.add_argument("--out", default=None, help="output folder (must not exist); with --config: a model name")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    a = p.parse_args(argv)
    if a.config:
        return _cli_config(a)
    missing = [f"--{k}" for k in ("model", "preset", "out") if not getattr(a, k)]
    if missing:
        p.error(f"the following arguments are required: {', '.join(missing)} (or --config FILE)")
    log = (lambda m: sys.stderr.write(m + "\n")) if a.json else print
    try:
        with contextlib.redirect_stdout(sys.stderr) if a.json else contextlib.nullcontext():
            rep = quantize(a.model, a.preset, a.out, data=a.data, calib_steps=a.calib_steps, batch_size=a.batch_size,
                           eval_limit=a.eval_limit, kernel=a.kernel, log=log)
    except (ValueError, FileNotFoundError, FileExistsError, RuntimeError) as e:
        sys.stderr.write(f"paddle-studio quantize: {e}\n")
        return 2
    if a.json:
        sys.stdout.write(json.dumps(rep, ensure_ascii=False, indent=2) + "\n")
    else:
        for row in rep["table"]:
            print(f"{row['metric']:16} {row['before']!s:>14} -> {row['after']!s:>14}")
        print(f"layer error mean {rep['layer_error']['mean']:.3g} max {rep['layer_error']['max']:.3g} "
              f"({rep['layer_error']['max_layer']})")
        for n in rep.get("notes", []):
            print(f"note: {n['message']}")
    return 0


def _cli_config(a) -> int:
    """`quantize --config FILE`: the file's plan, started as a Quantize job (exit 1 with every problem)."""
    from core import jobs

    plan = plan_from_paddlenlp(a.config, model=a.model, data=a.data, name=a.out)
    if not plan["ok"]:
        print_plan(plan, a.json, sys.stdout if a.json else sys.stderr)
        return 1
    try:
        job_id = submit(plan["model"], plan["preset"], plan["name"], data=plan["data"], calib_steps=a.calib_steps,
                        eval_limit=a.eval_limit)
    except ValueError as e:
        sys.stderr.write(f"paddle-studio quantize: {e}\n")
        return 1
    plan["job_id"] = job_id
    if a.json:
        print_plan(plan, True)
    else:
        print_plan(plan, False)
        print(f"job {job_id} started: paddle-studio jobs show {job_id}")
    return 0


if __name__ == "__main__":
    sys.exit(cli_main(sys.argv[1:]))
