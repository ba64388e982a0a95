"""Quantization algorithms: int packing in the GPU kernel's layout, round-to-nearest, GPTQ layer
by layer, Shift/Smooth, PTQ scales, and the GPU weight-only linear. Numbers in, numbers out: no
files, no model folders (those are core.quant.pipeline and core.models.loading).
"""

from __future__ import annotations

import contextlib
import sys

from core.models import layouts

LAYOUT_ARCH = 80  # layout of quant_weight on disk; weight_quantize gives the same bytes for 80, 86, 89, 90
NORM_GROUPS = {  # norm -> the linears that read its output (llama / qwen2 naming)
    "input_layernorm": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"],
    "post_attention_layernorm": ["mlp.gate_proj", "mlp.up_proj"],
}



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
    # stored as fp16: an all-zero column gets a scale fp16 can hold (1e-8 would round to 0, and 0/0)
    scale = np.where(scale == 0, 1e-7, scale).astype(np.float16).astype(np.float32)
    full = np.where(full == 0, 1e-7, full).astype(np.float16).astype(np.float32)
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
                    model(input_ids=ids, **layouts.inputs(model, ids, att))
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
    """Every nn.Linear in the repeated decoder blocks (``layers.3.``, ``h.3.``: a numbered segment
    of its name, whatever the family calls its blocks); the LM head and embeddings stay in full
    precision."""
    import re

    import paddle.nn as nn

    block = re.compile(r"\.\d+\.")
    return [n for n, l in model.named_sublayers() if isinstance(l, nn.Linear) and block.search(f".{n}")]


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
                model(input_ids=ids, **layouts.inputs(model, ids, att))
    finally:
        for h in hooks:
            h.remove()
    def real_rows(x, m):
        # [batch, seq, in] for most families; ChatGLM's layers run sequence-first, [seq, batch, in]
        if x.shape[:2] != m.shape and x.shape[:2] == m.shape[::-1]:
            x = x.swapaxes(0, 1)
        return x[m]

    out = {}
    for n in names:
        rows = np.concatenate([real_rows(x, m) for x, m in zip(got[n], masks)], 0)
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
                    model(input_ids=ids, **layouts.inputs(model, ids, att))
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


# act_quant_method -> the PaddleSlim observer llm/utils/quant.py's ACT_OBSERVER maps it to for int8
# activations (paddlenlp.trl.QuantConfig's default is "avg"). AbsmaxObserver keeps the largest |x| over
# every calibration batch; AVGObserver, per batch, the mean over the batch's samples of each sample's
# largest |x| (padding positions included), and reports the mean of those over the batches.
ACT_QUANT_METHODS = {"abs_max": "AbsmaxObserver", "avg": "AVGObserver"}
ACT_QUANT_DEFAULT = "avg"


def _act_observer(method: str):
    from paddleslim.quant.observers.abs_max import AbsmaxObserver
    from paddleslim.quant.observers.avg import AVGObserver

    if method not in ACT_QUANT_METHODS:
        raise ValueError(f"act_quant_method {method!r} is not one the studio runs: abs_max or avg, the two "
                         "llm/utils/quant.py maps to PaddleSlim observers for int8 activations")
    return {"abs_max": AbsmaxObserver, "avg": AVGObserver}[method](quant_bits=8)


def _ptq_scales(model, names, batches, act_method: str = ACT_QUANT_DEFAULT):
    """A8W8 scales from paddle.quantization.PTQ with PaddleSlim's observers, as upstream's apply_ptq
    collects them: ({name: activation scale}, {name: per-output-channel weight abs-max}). The
    activation observer is the one ``act_method`` names (ACT_QUANT_METHODS); one observer per linear
    sees its whole input tensor, padding positions included, as upstream's does."""
    import paddle
    from paddle.quantization import PTQ, QuantConfig
    from paddleslim.quant.observers import AbsMaxChannelWiseWeightObserver

    activation = _act_observer(act_method)
    q_config = QuantConfig(activation=None, weight=None)
    layers = dict(model.named_sublayers())
    for n in names:
        q_config.add_name_config([layers[n].full_name()], activation=activation,
                                 weight=AbsMaxChannelWiseWeightObserver(quant_bits=8))
    ptq = PTQ(q_config)
    qmodel = ptq.quantize(model, inplace=False)
    with paddle.no_grad():
        for ids, att in batches:
            qmodel(input_ids=ids, **layouts.inputs(qmodel, ids, att))
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



def _transform_input(x, name, norm_groups):
    """The input a linear sees after Shift/Smooth, from its unshifted input ``x``: (x - z) / s."""
    for g in norm_groups.values():
        if name in g["linears"]:
            return (x - g["z"][None, :]) / g["s"][None, :]
    return x



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



def _gpu_arch() -> int:
    import paddle

    major, minor = paddle.device.cuda.get_device_capability()
    return major * 10 + minor

