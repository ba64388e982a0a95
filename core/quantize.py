"""Quantize a merged (or base) model: weight-only INT8/INT4 (per-channel or group-wise, RTN or GPTQ)
and A8W8 post-training quantization (optionally with Shift and Smooth). CPU-first.

What runs where (paddle 3.0.0 CPU, paddlenlp 3.0.0b4, paddleslim 2.6.0):
- RTN weight-only: our own round-to-nearest with per-channel / group scales (numpy), because
  ``weight_quantize`` computes in fp16 and ``weight_only_linear`` / ``weight_dequantize`` have no CPU kernel.
- GPTQ: PaddleSlim's ``GPTQ.fasterquant`` (works on paddle 3.0.0), layer after layer, each layer
  calibrated on the model whose earlier layers are already quantized (as PaddleNLP's ``apply_gptq``).
- A8W8: ``paddle.quantization.PTQ`` with PaddleSlim's ``AbsmaxObserver`` (activations, per tensor)
  and ``AbsMaxChannelWiseWeightObserver`` (weights, per output channel) collect the scales.
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
  ``<linear>.weight_quanter`` (abs-max values, as PaddleSlim's observers report them), Shift's
  ``*_layernorm.bias`` and linear biases; ``quantization_config`` with quant_type a8w8, shift, smooth.
Plus the tokenizer with its chat template, ``studio_quant.json`` (the marker ``core.evaluate.load``
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

from core import evaluate, templates, workspace

ROOT = Path(__file__).resolve().parents[1]
PRESETS_DIR = ROOT / "presets" / "quant"
MARKER = "studio_quant.json"
LAYOUT_ARCH = 80  # layout of quant_weight on disk; weight_quantize gives the same bytes for 80, 86, 89, 90
NORM_GROUPS = {  # norm -> the linears that read its output (llama / qwen2 naming)
    "input_layernorm": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"],
    "post_attention_layernorm": ["mlp.gate_proj", "mlp.up_proj"],
}


# ---------------------------------------------------------------- presets


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


def bits_of(algo: str) -> int:
    return 4 if algo == "weight_only_int4" else 8


# ---------------------------------------------------------------- int layout (what weight_only_linear reads)

_LAYOUTS: dict = {}


def _kernel_quant(x, bits: int, arch: int):
    import paddle

    algo = "weight_only_int8" if bits == 8 else "weight_only_int4"
    t = paddle.to_tensor(x, dtype="float16", place=paddle.CPUPlace())
    q, _ = paddle.nn.quant.weight_quantize(t, algo=algo, arch=arch)
    return q.numpy()


def _units(o, bits):
    import numpy as np

    u = o.view(np.uint8).ravel()
    return u.astype(np.int64) if bits == 8 else np.stack([u & 15, u >> 4], 1).ravel().astype(np.int64)


def _layout(k: int, n: int, bits: int, arch: int):
    """(perm, offset): the kernel stores code[perm[p]] (flat [k, n] index) at unit p (byte or nibble)
    as (code + offset) mod 2^bits. Learned from Paddle's own CPU ``weight_quantize`` with probe
    matrices whose every column has abs-max = qmax (scale 1, so the codes are the probe values)."""
    import numpy as np

    key = (k, n, bits, 80 if arch in (80, 86, 89, 90) else arch)
    if key in _LAYOUTS:
        return _LAYOUTS[key]
    qmax, mod = (127, 256) if bits == 8 else (7, 16)
    lo = -qmax
    base = qmax - lo  # digits lo..qmax-1; qmax is the sentinel that pins the scale
    x = np.zeros((k, n), np.float32)
    x[0] = qmax
    zero_unit = np.bincount(_units(_kernel_quant(x, bits, arch), bits), minlength=mod).argmax()
    offset = int(zero_unit) % mod
    idx = np.arange(k * n).reshape(k, n)
    digits = 1
    while base ** digits < k * n:
        digits += 1
    parts = []
    for sent in (0, 1):
        acc, is_sent = 0, None
        for t in range(digits):
            x = ((idx // base ** t) % base + lo).astype(np.float32)
            x[sent] = qmax
            v = (_units(_kernel_quant(x, bits, arch), bits) - offset) % mod
            v = np.where(v > mod // 2 - 1, v - mod, v)
            if is_sent is None:
                is_sent = v == qmax
            acc = acc + (v - lo) * base ** t
        parts.append((acc, is_sent))
    (a, sa), (b, sb) = parts
    perm = np.where(sa, b, a).astype(np.int64)
    if (sa & sb).any() or not np.array_equal(np.sort(perm), np.arange(k * n)):
        raise RuntimeError(f"could not learn the weight_only layout for [{k}, {n}] int{bits} arch {arch}")
    _LAYOUTS[key] = (perm, offset)
    return perm, offset


def pack(codes, bits: int, arch: int = LAYOUT_ARCH):
    """Signed codes [in, out] -> the int8 tensor weight_only_linear reads ([out, in] or [out/2, in])."""
    import numpy as np

    k, n = codes.shape
    perm, offset = _layout(k, n, bits, arch)
    u = (codes.astype(np.int64).ravel()[perm] + offset) % (256 if bits == 8 else 16)
    if bits == 4:
        u = u.reshape(-1, 2)
        u = u[:, 0] | (u[:, 1] << 4)
    shape = (n, k) if bits == 8 else (n // 2, k)
    return u.astype(np.uint8).view(np.int8).reshape(shape)


def unpack(qweight, k: int, n: int, bits: int, arch: int = LAYOUT_ARCH):
    """Inverse of ``pack``: the stored int8 tensor -> signed codes [in, out]."""
    import numpy as np

    perm, offset = _layout(k, n, bits, arch)
    mod = 256 if bits == 8 else 16
    v = (_units(np.ascontiguousarray(qweight), bits) - offset) % mod
    v = np.where(v > mod // 2 - 1, v - mod, v)
    out = np.zeros(k * n, np.int64)
    out[perm] = v
    return out.reshape(k, n)


# ---------------------------------------------------------------- round to nearest, GPTQ


def rtn(w, bits: int, group_size: int = -1):
    """Symmetric round-to-nearest of a Linear weight [in, out]: (codes [in, out], scales).

    scale = abs-max / qmax per output channel ([out]) or per group of ``group_size`` inputs
    ([in/group, out]), as ``weight_quantize`` lays them out."""
    import numpy as np

    qmax = 127 if bits == 8 else 7
    k, n = w.shape
    if group_size == -1:
        scale = np.abs(w).max(0) / qmax
        full = scale[None, :]
    else:
        if k % group_size:
            raise ValueError(f"group size {group_size} does not divide the input dimension {k}")
        scale = np.abs(w.reshape(k // group_size, group_size, n)).max(1) / qmax
        full = np.repeat(scale, group_size, 0)
    scale = np.where(scale == 0, 1e-8, scale).astype(np.float16).astype(np.float32)  # stored as fp16
    full = np.where(full == 0, 1e-8, full).astype(np.float16).astype(np.float32)
    codes = np.clip(np.round(w / full), -qmax, qmax).astype(np.int64)
    return codes, scale


def dequant(codes, scale, group_size: int = -1):
    import numpy as np

    s = scale[None, :] if group_size == -1 else np.repeat(scale, group_size, 0)
    return (codes * s).astype(np.float32)


def _gptq_layers(model, names, batches, log, percdamp=0.1, actorder=True):
    """PaddleSlim GPTQ, one linear at a time. Returns {name: (codes [in, out], scale [out])}."""
    import numpy as np
    import paddle
    from paddleslim.quant.advanced import GPTQ

    out = {}
    layers = dict(model.named_sublayers())
    for i, name in enumerate(names):
        layer = layers[name]
        parent, sub = _parent(model, name)
        w0 = layer.weight.numpy().astype(np.float32)
        # PaddleSlim's grid: abs-max per output channel / 7, codes clipped to [-8, 7]
        scale = (np.abs(w0).max(0) / 7).astype(np.float16).astype(np.float32)
        scale = np.where(scale == 0, 1e-8, scale)
        g = GPTQ(layer, quant_bits=4)
        setattr(parent, sub, g)
        try:
            with paddle.no_grad():
                for ids, att in batches:
                    model(input_ids=ids, attention_mask=att)
                with contextlib.redirect_stdout(sys.stderr):
                    g.fasterquant(percdamp=percdamp, groupsize=-1, actorder=actorder)
        finally:
            setattr(parent, sub, layer)
        wq = layer.weight.numpy().astype(np.float32)
        codes = np.clip(np.round(wq / scale[None, :]), -8, 7).astype(np.int64)
        with paddle.no_grad():  # keep exactly what will be stored (fp16 scales)
            layer.weight.set_value(paddle.to_tensor(dequant(codes, scale)))
        out[name] = (codes, scale)
        log(f"gptq {i + 1}/{len(names)} {name}")
    return out


# ---------------------------------------------------------------- model plumbing


def _parent(model, name):
    obj = model
    parts = name.split(".")
    for p in parts[:-1]:
        obj = getattr(obj, p)
    return obj, parts[-1]


def target_linears(model) -> list[str]:
    """Every nn.Linear in the decoder layers (the LM head and embeddings stay in full precision)."""
    import paddle.nn as nn

    return [n for n, l in model.named_sublayers() if isinstance(l, nn.Linear) and ".layers." in f".{n}"]


def _weights_bytes(model_dir: Path) -> int:
    from safetensors import safe_open

    total = 0
    for f in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(f), framework="np") as h:
            for k in h.keys():
                t = h.get_slice(k)
                shape = t.get_shape()
                size = {"F32": 4, "F16": 2, "BF16": 2, "I8": 1, "U8": 1, "I64": 8, "I32": 4, "F64": 8}[t.get_dtype()]
                total += size * math.prod(shape)
    return total


def _calib_batches(tok, tpl, records, steps: int, batch_size: int, src_length: int, max_length: int):
    import numpy as np
    import paddle

    exs = [e for e in (templates.build_example(tok, tpl, r, src_length, max_length) for r in records) if e]
    exs = exs[: steps * batch_size]
    if not exs:
        raise ValueError("no calibration examples (empty data?)")
    pad = tok.pad_token_id
    out = []
    for i in range(0, len(exs), batch_size):
        chunk = exs[i:i + batch_size]
        n = max(len(e["input_ids"]) for e in chunk)
        ids = np.full((len(chunk), n), pad, dtype="int64")
        att = np.zeros((len(chunk), n), dtype="int64")
        for j, e in enumerate(chunk):
            ids[j, :len(e["input_ids"])] = e["input_ids"]
            att[j, :len(e["input_ids"])] = 1
        out.append((paddle.to_tensor(ids), paddle.to_tensor(att)))
    return out, len(exs)


def _collect_inputs(model, names, batches, max_rows: int = 2048):
    """Inputs of each named linear over the calibration batches (padding rows dropped), as numpy [rows, in]."""
    import numpy as np
    import paddle

    layers = dict(model.named_sublayers())
    got = {n: [] for n in names}
    masks = []
    hooks = []
    for n in names:
        def hook(layer, inp, n=n):
            x = inp[0] if isinstance(inp, (tuple, list)) else inp
            got[n].append(x.numpy().astype(np.float32))
        hooks.append(layers[n].register_forward_pre_hook(hook))
    try:
        with paddle.no_grad():
            for ids, att in batches:
                masks.append(att.numpy().astype(bool))
                model(input_ids=ids, attention_mask=att)
    finally:
        for h in hooks:
            h.remove()
    out = {}
    for n in names:
        rows = np.concatenate([x[m] for x, m in zip(got[n], masks)], 0)
        out[n] = rows[:max_rows]
    return out


def rel_error(x, w, wq) -> float:
    """||X·W - X·Ŵ||² / ||X·W||² on calibration inputs X."""
    import numpy as np

    ref = x @ w
    return float(np.sum((ref - x @ wq) ** 2) / max(float(np.sum(ref ** 2)), 1e-20))


def _shift_smooth(model, batches, shift: bool, smooth: bool, alpha: float, log):
    """Own Shift + Smooth for llama/qwen2 decoder layers. Changes the model in place; returns
    {norm name: {"linears": [...], "shift": bool, "smooth": bool}}."""
    import numpy as np
    import paddle

    layers = dict(model.named_sublayers())
    groups = {}
    for name in layers:
        for norm, lins in NORM_GROUPS.items():
            if name.endswith("." + norm):
                prefix = name[: -len(norm)]
                groups[name] = [prefix + l for l in lins if prefix + l in layers]
    if not groups:
        raise ValueError("shift/smooth supports llama and qwen2 style models (input_layernorm / post_attention_layernorm)")

    def norm_outputs(stat):
        acc = {}
        hooks = []
        for nname in groups:
            def hook(layer, inp, out, nname=nname):
                x = out.numpy().astype(np.float32)
                acc.setdefault(nname, []).append(stat(x.reshape(-1, x.shape[-1]), cur_mask[0].reshape(-1)))
            hooks.append(layers[nname].register_forward_post_hook(hook))
        cur_mask = [None]
        try:
            with paddle.no_grad():
                for ids, att in batches:
                    cur_mask[0] = att.numpy().astype(bool)
                    model(input_ids=ids, attention_mask=att)
        finally:
            for h in hooks:
                h.remove()
        return acc

    zs = {n: np.zeros(layers[n].weight.shape[0], np.float32) for n in groups}
    ss = {n: np.ones(layers[n].weight.shape[0], np.float32) for n in groups}
    if shift:
        # centre per channel: mean over real tokens, averaged over batches
        sums = norm_outputs(lambda x, m: (x[m].sum(0), int(m.sum())))
        for nname, lins in groups.items():
            z = (sum(s for s, _ in sums[nname]) / max(sum(c for _, c in sums[nname]), 1)).astype(np.float32)
            zs[nname] = z
            norm = layers[nname]
            zt = paddle.to_tensor(z.astype(np.float32))
            _set_norm_bias(norm, -zt)
            for ln in lins:
                lin = layers[ln]
                b = paddle.matmul(zt.unsqueeze(0), lin.weight).squeeze(0)
                if lin.bias is None:
                    lin.bias = lin.create_parameter(shape=[lin.weight.shape[1]], dtype=lin.weight.dtype, is_bias=True)
                    lin.bias.set_value(paddle.zeros_like(b))
                with paddle.no_grad():
                    lin.bias.set_value(lin.bias + b)
        log(f"shift: {len(groups)} norms centred")
    if smooth:
        maxes = norm_outputs(lambda x, m: np.abs(x[m]).max(0))
        for nname, lins in groups.items():
            a = np.maximum(np.max(np.stack(maxes[nname]), 0), 1e-5)
            wmax = np.maximum(np.max(np.stack([np.abs(layers[l].weight.numpy()).max(1) for l in lins]), 0), 1e-5)
            s = np.clip(a ** alpha / wmax ** (1 - alpha), 1e-4, 1e4).astype(np.float32)
            ss[nname] = s
            st = paddle.to_tensor(s)
            norm = layers[nname]
            with paddle.no_grad():
                norm.weight.set_value(norm.weight / st)
                if getattr(norm, "studio_bias", None) is not None:
                    norm.studio_bias.set_value(norm.studio_bias / st)
                for l in lins:
                    layers[l].weight.set_value(layers[l].weight * st.unsqueeze(1))
        log(f"smooth: alpha {alpha}, {len(groups)} norms")
    return {n: {"linears": l, "z": zs[n], "s": ss[n]} for n, l in groups.items()}


def _set_norm_bias(norm, value):
    """Give an RMSNorm (which has no bias) an additive bias applied after it."""
    import paddle

    if getattr(norm, "studio_bias", None) is None:
        norm.studio_bias = norm.create_parameter(shape=list(value.shape), dtype="float32", is_bias=True)
        norm.studio_bias.set_value(paddle.zeros_like(value))
        norm.register_forward_post_hook(lambda layer, inp, out: out + layer.studio_bias.astype(out.dtype))
    with paddle.no_grad():
        norm.studio_bias.set_value(value)


def _ptq_scales(model, names, batches):
    """A8W8 scales from paddle.quantization.PTQ with PaddleSlim's observers:
    ({name: activation abs-max}, {name: per-output-channel weight abs-max})."""
    import paddle
    from paddle.quantization import PTQ, QuantConfig
    from paddleslim.quant.observers import AbsMaxChannelWiseWeightObserver
    from paddleslim.quant.observers.abs_max import AbsmaxObserver

    q_config = QuantConfig(activation=None, weight=None)
    layers = dict(model.named_sublayers())
    for n in names:
        q_config.add_name_config([layers[n].full_name()], activation=AbsmaxObserver(quant_bits=8),
                                 weight=AbsMaxChannelWiseWeightObserver(quant_bits=8))
    ptq = PTQ(q_config)
    qmodel = ptq.quantize(model, inplace=False)
    with paddle.no_grad():
        for ids, att in batches:
            qmodel(input_ids=ids, attention_mask=att)
    act, wts = {}, {}
    for cur, layer in qmodel.named_sublayers():
        if not hasattr(layer, "scales") or "_observer" in cur:
            continue
        if cur.endswith(".activation_quanter"):
            act[cur[: -len(".activation_quanter")]] = float(layer.scales().cast("float32").numpy().reshape(-1)[0])
        elif cur.endswith(".weight_quanter"):
            wts[cur[: -len(".weight_quanter")]] = layer.scales().cast("float32").numpy().reshape(-1)
    missing = [n for n in names if n not in act or n not in wts]
    if missing:
        raise RuntimeError(f"PTQ gave no scales for {missing[:3]}")
    return act, wts


# ---------------------------------------------------------------- data


def _training_dataset(model_dir: Path) -> str | None:
    """The dataset a merged model was trained on: studio_model.json (merged_from.adapter = <run>/output)
    -> the run's config.json (the PaddleNLP argument JSON) -> dataset_name_or_path."""
    info = model_dir / "studio_model.json"
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
    from core import datasets

    src = Path(data) if data else (Path(d) if (d := _training_dataset(model_dir)) else None)
    if src is None:
        raise ValueError(f"{model_dir} does not record its training dataset; pass --data DIR (a dataset folder or file)")
    if not src.exists():
        raise FileNotFoundError(f"calibration data {src} does not exist")
    if src.is_dir():
        if (src / "quant.json").is_file():
            calib = src / "quant.json"
        else:
            files = datasets.resolve_files(src)
            calib = (files.get("train") or files.get("data") or [None])[0]
        dev = (datasets.resolve_files(src).get("dev") or [None])[0]
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
    kind = evaluate.adapter_kind(model_dir)
    if kind:
        raise ValueError(f"{model_dir} holds an unmerged {kind} adapter: merge it into its base first "
                         f"(Merge tab, or paddle-studio merge --adapter {model_dir} --out DIR) and quantize the merged model")
    if (model_dir / MARKER).is_file():
        raise ValueError(f"{model_dir} is already quantized; quantize the full-precision model")
    if not (model_dir / "config.json").is_file() or not list(model_dir.glob("*.safetensors")):
        raise ValueError(f"{model_dir} has no config.json and safetensors weights (is it a model folder?)")
    algo = preset["algorithm"]
    method = preset.get("method", "ptq" if algo == "a8w8" else "rtn")
    group = int(preset.get("group_size", -1))
    steps = int(calib_steps or preset.get("calib_steps", 8))
    bsz = int(batch_size or preset.get("batch_size", 8))
    calib_file, dev = resolve_data(model_dir, data)
    from core import datasets

    records = list(datasets.iter_records(calib_file, "paddlenlp"))
    log(f"quantizing {model_dir} with {preset['name']} ({algo}, {method}); calibration {calib_file}")

    model, tok, tpl = evaluate.load(model_dir)
    before = _eval((model, tok, tpl), dev, eval_limit, eval_max_new_tokens)
    t_eval = time.perf_counter() - t0
    if before:
        log(f"before: ppl {before['perplexity']:.4f} em {before['exact_match']:.3f}")
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
        act, wmax = _ptq_scales(model, names, batches)
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
              "weight_quant_method": "abs_max_channel_wise", "act_quant_method": "abs_max"}
    else:
        qc = {"weight_quantize_algo": algo, "quant_type": algo, "weight_quant_method":
              "abs_max_channel_wise" if group == -1 else "groupwise", "weight_blocksize": group if group != -1 else 64}
    cfg["quantization_config"] = qc
    marker = {"preset": preset["name"], "algorithm": algo, "method": method, "bits": 8 if algo == "a8w8" else bits_of(algo),
              "group_size": group, "layout_arch": LAYOUT_ARCH, "layers": names,
              "activation_bits": 8 if algo == "a8w8" else None, "dtype": "float32",
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
        workspace.write_json_atomic(tmp / MARKER, marker)
        workspace.write_json_atomic(tmp / "studio_model.json",
                                    {"quantized_from": str(model_dir.resolve()), "preset": preset["name"], "algorithm": algo})
        # evaluate what is on disk, through the loader eval/chat/serve use
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
                     "linear_before_bytes": lin_before, "linear_after_bytes": lin_after,
                     "linear_params": sum(originals[n].size for n in names)},
            "eval": {"data": str(dev) if dev else None, "limit": eval_limit, "before": before, "after": after,
                     "kernel": loaded[0].studio_quant_kernel if hasattr(loaded[0], "studio_quant_kernel") else "paddle"},
            "layer_error": {"mean": float(np.mean(errs)), "max": float(np.max(errs)), "max_layer": worst["name"]},
            "layers": layer_report,
            "seconds": {"quantize": round(t_quant, 2), "evaluate": round(t_eval, 2),
                        "total": round(time.perf_counter() - t0, 2)},
            "versions": _versions(),
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


def _table(sb, sa, before, after, secs):
    rows = [{"metric": "weight_bytes", "before": sb, "after": sa}]
    for k in ("eval_loss", "perplexity", "token_accuracy", "exact_match"):
        if before and after:
            rows.append({"metric": k, "before": before.get(k), "after": after.get(k)})
    rows.append({"metric": "seconds", "before": None, "after": round(secs, 2)})
    return rows


def _transform_input(x, name, norm_groups):
    """The input a linear sees after Shift/Smooth, from its unshifted input ``x``: (x - z) / s."""
    for g in norm_groups.values():
        if name in g["linears"]:
            return (x - g["z"][None, :]) / g["s"][None, :]
    return x


# ---------------------------------------------------------------- loading


def is_quantized(model_dir) -> bool:
    return model_dir is not None and (Path(model_dir) / MARKER).is_file()


def _gpu_visible() -> bool:
    try:
        import paddle

        return paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0
    except Exception:  # noqa: BLE001
        return False


def _require_gpu():
    if not _gpu_visible():
        raise RuntimeError("the gpu kernel (paddle.nn.quant.weight_only_linear) needs a CUDA build of Paddle and a visible "
                           "GPU; it has no CPU kernel. Use kernel 'auto' or 'paddle' (dequantize on load) on this machine")


def _weight_only_linear_cls():
    import paddle

    class _WOLinear(paddle.nn.Layer):
        """y = x·dequant(W) + b through paddle.nn.quant.weight_only_linear (GPU kernel)."""

        def __init__(self, qweight, scale, bias, bits, group_size, arch):
            super().__init__()
            self.quant_weight = paddle.to_tensor(qweight)
            self.quant_scale = paddle.to_tensor(scale).astype("float16")
            self.bias = None if bias is None else paddle.to_tensor(bias).astype("float16")
            self.weight_dtype = "int8" if bits == 8 else "int4"
            self.group_size, self.arch = group_size, arch

        def forward(self, x):
            y = paddle.nn.quant.weight_only_linear(x.astype("float16"), self.quant_weight, bias=self.bias,
                                                   weight_scale=self.quant_scale, weight_dtype=self.weight_dtype,
                                                   arch=self.arch, group_size=self.group_size)
            return y.astype(x.dtype)

    return _WOLinear


def load_quantized(model_dir, kernel: str = "auto"):
    """(model, tokenizer, template) of a quantized folder. kernel: auto (GPU kernel where a GPU is
    visible, else paddle ops), paddle (dequantize on load; any device), gpu (weight_only_linear; fails on CPU)."""
    import logging

    import numpy as np
    import paddle
    from paddlenlp.quantization.quantization_config import QuantizationConfig
    from paddlenlp.transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from safetensors import safe_open

    logging.getLogger("paddlenlp").setLevel(logging.WARNING)
    model_dir = Path(model_dir)
    marker = json.loads((model_dir / MARKER).read_text(encoding="utf-8"))
    algo, group = marker["algorithm"], int(marker.get("group_size", -1))
    if kernel not in ("auto", "paddle", "gpu"):
        raise ValueError(f"kernel must be auto, paddle or gpu, not {kernel!r}")
    if kernel == "gpu":
        _require_gpu()
        if algo == "a8w8":
            raise RuntimeError("a8w8 runs on GPU through PaddleNLP's fused predictor (act_scales.json, weight_scales.json); "
                               "the studio runs it with paddle ops (kernel 'paddle')")
    use_gpu = algo != "a8w8" and (kernel == "gpu" or (kernel == "auto" and _gpu_visible()))
    cfg = AutoConfig.from_pretrained(str(model_dir))
    cfg.quantization_config = QuantizationConfig()
    model = AutoModelForCausalLM.from_config(cfg, dtype="float32")
    state = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(f), framework="np") as h:
            for k in h.keys():
                state[k] = h.get_tensor(k)
    layers = dict(model.named_sublayers())
    act = {}
    if algo == "a8w8":
        act = json.loads((model_dir / "act_scales.json").read_text(encoding="utf-8"))
        wsc = json.loads((model_dir / "weight_scales.json").read_text(encoding="utf-8"))
    gpu_layers = {}
    for n in marker["layers"]:
        lin = layers[n]
        k, nout = lin.weight.shape
        if algo == "a8w8":
            s = np.asarray(wsc[f"{n}.weight_quanter"], np.float32) / 127.0
            state[f"{n}.weight"] = state[f"{n}.weight"].astype(np.float32) * s[None, :]
        else:
            bits = marker["bits"]
            qw, scale = state.pop(f"{n}.quant_weight"), state.pop(f"{n}.quant_scale").astype(np.float32)
            if use_gpu:
                arch = _gpu_arch()
                if arch not in (80, 86, 89, 90):
                    qw = pack(unpack(qw, k, nout, bits), bits, arch)
                gpu_layers[n] = (qw, scale, bits, arch)
            else:
                state[f"{n}.weight"] = dequant(unpack(qw, k, nout, bits), scale, group)
        if f"{n}.bias" in state and lin.bias is None:
            lin.bias = lin.create_parameter(shape=[nout], dtype="float32", is_bias=True)
    for key in marker.get("norm_bias", []):
        norm = layers[key[: -len(".bias")]]
        _set_norm_bias(norm, paddle.to_tensor(state.pop(key).astype(np.float32)))
    missing = [k for k in model.state_dict() if k not in state and not k.endswith(".studio_bias")
               and k.rsplit(".", 1)[0] not in gpu_layers]
    if missing:
        raise ValueError(f"{model_dir}: weights missing for {missing[:3]}")
    model.set_state_dict({k: v for k, v in state.items()})
    if gpu_layers:
        cls = _weight_only_linear_cls()
        for n, (qw, scale, bits, arch) in gpu_layers.items():
            parent, sub = _parent(model, n)
            b = state.get(f"{n}.bias")
            setattr(parent, sub, cls(qw, scale, b, bits, group, arch))
        model.studio_quant_kernel = "weight_only_linear"
    else:
        model.studio_quant_kernel = "paddle (dequantized on load" + (", int8 activations)" if algo == "a8w8" else ")")
    if algo == "a8w8":
        for n in marker["layers"]:
            a = float(act[f"{n}.activation_quanter"])

            def fq(layer, inp, a=a):
                x = inp[0] if isinstance(inp, (tuple, list)) else inp
                q = paddle.clip(paddle.round(x / a * 127.0), -127.0, 127.0) * (a / 127.0)
                return (q,)
            layers[n].register_forward_pre_hook(fq)
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer, templates.load_template(tokenizer, model_dir)


def _gpu_arch() -> int:
    import paddle

    major, minor = paddle.device.cuda.get_device_capability()
    return major * 10 + minor


# ---------------------------------------------------------------- CLI


def cli_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="paddle-studio quantize", description="Quantize a merged model (see presets/quant)")
    p.add_argument("--model", required=True, help="a merged or base model folder (not an adapter)")
    p.add_argument("--preset", required=True, help=f"one of: {', '.join(list_presets())} (or a preset JSON file)")
    p.add_argument("--data", default=None, help="calibration data (dataset folder or file); default: the training dataset")
    p.add_argument("--calib-steps", type=int, default=None, help="calibration batches (default: the preset's)")
    p.add_argument("--batch-size", type=int, default=None, help="calibration batch size (default: the preset's)")
    p.add_argument("--eval-limit", type=int, default=32, help="dev records scored before and after (0: skip)")
    p.add_argument("--kernel", default="auto", choices=["auto", "paddle", "gpu"],
                   help="how to run the quantized model for the after-evaluation")
    p.add_argument("--out", required=True, help="output folder (must not exist)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    a = p.parse_args(argv)
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
    return 0


if __name__ == "__main__":
    sys.exit(cli_main(sys.argv[1:]))
