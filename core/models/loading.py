"""Loading a model folder for inference: base or merged models, base + adapter (LoRA, prefix,
VeRA, LoKr, ReFT; unmerged) and quantized folders (dequantized on load on CPU, the GPU weight-only
kernel where a GPU is visible).
"""

from __future__ import annotations

import json
from pathlib import Path

from core.data import templates
from core.models import layouts
from core.quant.algorithms import (_gpu_arch, _gpu_visible, _parent, _require_gpu, _set_norm_bias, _weight_only_linear_cls,
                                   dequant, pack, unpack)
from core.workspace import MODEL_MARKER, QUANT_MARKER

ADAPTER_FILES = {
    "lora_config.json": "lora",
    "prefix_config.json": "prefix",
    "vera_config.json": "vera",
    "lokr_config.json": "lokr",
}


def logits_of(out):
    """The logits of a causal LM's forward, whatever it returns (an output object, a tuple, or, as
    PaddleNLP's GPT and OPT do without labels, the logits tensor itself)."""
    if isinstance(out, (tuple, list)):
        return out[0]
    return getattr(out, "logits", out)


def adapter_kind(path: str | Path) -> str | None:
    for f, kind in ADAPTER_FILES.items():
        if (Path(path) / f).is_file():
            return kind
    from core.models import reft

    if reft.is_reft(path):  # ReFTModel.save_pretrained: config.json with representations, intkey_*.bin
        return "reft"
    return None


MERGEABLE = ("lora", "lokr", "vera")
NOT_MERGEABLE = {
    "prefix": "prefix tuning adds trained key/value states in front of every layer's attention: nothing to fold into "
              "weights; chat and evaluate load it with its base",
    "reft": "ReFT edits hidden states at the prompt's first and last tokens while the model runs; no weight changes, "
            "so there is nothing to merge: chat and evaluate load it with its base",
}


def base_of(adapter_dir: str | Path) -> str | None:
    """The base model of an adapter: what studio training recorded (studio_model.json), else what
    PaddleNLP's PEFT config beside it says (``base_model_name_or_path`` of lora_config.json,
    prefix_config.json, vera_config.json or lokr_config.json: an adapter trained upstream)."""
    d = Path(adapter_dir)
    for name in (MODEL_MARKER, *ADAPTER_FILES):
        try:
            info = json.loads((d / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        base = info.get("base") if name == MODEL_MARKER else info.get("base_model_name_or_path")
        if isinstance(base, str) and base.strip():
            return base
    return None


def model_class(model_dir: str | Path):
    """The Auto class a model folder loads with: its family preset's ``auto_class`` (GLM is a
    conditional-generation model to PaddleNLP, which AutoModelForCausalLM refuses), else
    AutoModelForCausalLM."""
    import paddlenlp.transformers as T

    from core.train.config import family_of_type

    try:
        mtype = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8")).get("model_type", "")
    except (OSError, ValueError, AttributeError):
        mtype = ""
    fam = family_of_type(mtype) if isinstance(mtype, str) else None
    return getattr(T, (fam or {}).get("auto_class", "AutoModelForCausalLM"))


def load_tokenizer(tok_dir: str | Path):
    from core.data.datasets import load_tokenizer as load

    return load(tok_dir)


def load(model_dir: str | Path | None, adapter_dir: str | Path | None = None):
    """(model, tokenizer, template) in eval mode on CPU or the default device."""
    if model_dir and not adapter_dir and (Path(model_dir) / QUANT_MARKER).is_file():
        return load_quantized(model_dir)
    import logging

    logging.getLogger("paddlenlp").setLevel(logging.WARNING)

    if adapter_dir and not model_dir:
        model_dir = base_of(adapter_dir)
    if not model_dir:
        raise ValueError("no base model: pass --model (the adapter does not record its base)")
    model = model_class(model_dir).from_pretrained(str(model_dir), dtype="float32")
    tok_dir = adapter_dir if adapter_dir and (Path(adapter_dir) / "tokenizer_config.json").is_file() else model_dir
    tokenizer = load_tokenizer(tok_dir)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    layouts.attach(model, model_dir, tokenizer)
    if adapter_dir:
        model = attach_adapter(model, str(model_dir), str(adapter_dir))
    model.eval()
    return model, tokenizer, templates.load_template(tokenizer, tok_dir)


VERA_RANDOM_A = ("{path}: this VeRA adapter was trained with a random frozen matrix vera_A, which PaddleNLP does not "
                 "save (vera_model_state.pdparams holds only vera_B, vera_b and vera_d): every load would draw another "
                 "one and give another model. Train it again (the studio now builds VeRA with pissa_init, as upstream "
                 "does, so the frozen matrices come from the base weights and reload exactly)")


def _vera_rebuildable(adapter_dir) -> bool:
    """A VeRA adapter whose frozen matrices a load rebuilds exactly: built with pissa_init (from the
    base weights' SVD), or saved with its vera_A."""
    try:
        cfg = json.loads((Path(adapter_dir) / "vera_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if cfg.get("pissa_init"):
        return True
    import paddle

    try:
        state = paddle.load(str(Path(adapter_dir) / "vera_model_state.pdparams"), return_numpy=True)
    except Exception:  # noqa: BLE001 - unreadable: the load itself will say why
        return True
    return any(k.endswith("vera_A") for k in state)


def restore_pissa(model):
    """A PiSSA adapter comes back as it was trained. PiSSA trains on the residual W - A0·B0 (A0, B0:
    the base weight's top singular vectors) and saves only the trained A and B; PaddleNLP's
    LoRALinear recomputes the residual lazily at the first forward *and overwrites A and B with the
    SVD start*, so a loaded PiSSA adapter was silently the base model again. Here the residual is
    computed from the loaded base weights now and the trained A and B are put back."""
    import paddle

    for layer in model.sublayers():
        if getattr(layer, "pissa", False) and not getattr(layer, "apply_pissa", True):
            a, b = layer.lora_A.numpy().copy(), layer.lora_B.numpy().copy()
            layer.pissa_init(layer.r)
            layer.lora_A.set_value(paddle.to_tensor(a, dtype=layer.lora_A.dtype))
            layer.lora_B.set_value(paddle.to_tensor(b, dtype=layer.lora_B.dtype))
            layer.apply_pissa = True
    return model


def attach_adapter(model, model_dir: str, adapter_dir: str):
    kind = adapter_kind(adapter_dir)
    if kind == "lora":
        from paddlenlp.peft import LoRAModel

        return restore_pissa(LoRAModel.from_pretrained(model, adapter_dir))
    if kind == "prefix":
        from paddlenlp.peft import PrefixModelForCausalLM
        from paddlenlp.peft.prefix import utils as prefix_utils

        from core.train.config import model_family

        post = getattr(prefix_utils, model_family(model_dir).get("prefix_postprocess", "llama_postprocess_past_key_value"))
        return PrefixModelForCausalLM.from_pretrained(model, adapter_dir, postprocess_past_key_value=post)
    if kind == "vera":
        from paddlenlp.peft import VeRAModel

        if not _vera_rebuildable(adapter_dir):
            raise ValueError(VERA_RANDOM_A.format(path=adapter_dir))
        return VeRAModel.from_pretrained(model, adapter_dir)
    if kind == "lokr":
        from paddlenlp.peft import LoKrModel

        return LoKrModel.from_pretrained(model, adapter_dir)
    if kind == "reft":
        from core.models import reft

        return reft.load(model, adapter_dir)
    raise ValueError(f"{adapter_dir} holds no adapter (no lora/prefix/vera/lokr/ReFT config)")



def is_quantized(model_dir) -> bool:
    return model_dir is not None and (Path(model_dir) / QUANT_MARKER).is_file()


def load_quantized(model_dir, kernel: str = "auto"):
    """(model, tokenizer, template) of a quantized folder. kernel: auto (GPU kernel where a GPU is
    visible, else paddle ops), paddle (dequantize on load; any device), gpu (weight_only_linear; fails on CPU)."""
    import logging

    import numpy as np
    import paddle
    from paddlenlp.quantization.quantization_config import QuantizationConfig
    from paddlenlp.transformers import AutoConfig
    from safetensors import safe_open

    logging.getLogger("paddlenlp").setLevel(logging.WARNING)
    model_dir = Path(model_dir)
    marker = json.loads((model_dir / QUANT_MARKER).read_text(encoding="utf-8"))
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
    model = model_class(model_dir).from_config(cfg, dtype="float32")
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
    own = model.state_dict()
    for key in marker.get("norm_bias", []):
        if key in own:  # the norm's own bias (LayerNorm families): loaded with the other weights
            continue
        norm = layers[key[: -len(".bias")]]
        _set_norm_bias(norm, paddle.to_tensor(state.pop(key).astype(np.float32)))
    missing = [k for k in own if k not in state and not k.endswith(".studio_bias")
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
    tokenizer = load_tokenizer(model_dir)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    layouts.attach(model, model_dir, tokenizer)
    return model, tokenizer, templates.load_template(tokenizer, model_dir)

