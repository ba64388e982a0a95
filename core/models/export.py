"""Export a full model (a base, imported or merged one) to a static inference folder that
:class:`core.models.static.StaticEngine` runs with Paddle Inference.

The graph is PaddleNLP's own generation loop (``sample_d2s``, what ``model.to_static`` traces),
traced once by ``paddle.jit.to_static`` with every decoding knob as a graph input, so one graph
serves greedy decoding and sampling:

    input_ids       [batch, length] int64   prompts, left padded with the pad token
    attention_mask  [batch, length] int64   1 = token, 0 = padding
    position_ids    [batch, length] int64   (families whose forward takes them) see studio_model.json
    max_new_tokens  [1] int64               tokens to generate (the loop stops sooner once every row has
                                            ended; ended rows are filled with the pad token)
    min_new_tokens  [1] int64               the end-of-text token is barred before this many (0: off)
    top_k           [1] int64               1: greedy (argmax); k > 1: sample among the k most likely
                                            (the vocabulary size: no top-k cut)
    temperature     [1] float32             divides the logits before sampling (1: off)
    top_p           [1] float32             nucleus cut over the tempered distribution (1: off)
    repetition_penalty [1] float32          PaddleNLP/CTRL style over prompt and answer (1: off)
  outputs: the new token ids [batch, max_new_tokens or fewer] int64 and their scores [batch, 1].

``model.to_static``'s own config takes only ``use_top_p`` (and dtype, logits_processors,
pad/eos ids): with ``use_top_p=True`` the graph samples with paddle's ``top_p_sampling`` op, which
has no float32 CPU kernel; with ``use_top_p=False`` it takes ``top_k`` as an input and runs
argmax for 1 and ``paddle.multinomial`` otherwise, but fixes temperature and top_p at 1. Here the
``use_top_p=False`` loop is traced with a logits processor that applies the repetition penalty,
the minimum length, the temperature and a sort-based top-p cut (plain paddle ops, CPU float32
included), each an input, each an exact no-op at its "off" value. Sampling draws from paddle's
global generator, so ``paddle.seed`` before a run repeats it.

Tracing changes the process: dygraph ``generate`` in a process that ran ``to_static`` becomes
20-30x slower. Run the export in its own process (``paddle-studio export`` or the studio's
job); the greedy answers the graph must reproduce are computed before tracing. The folder is
written beside ``out`` and renamed into place when it is complete and checked.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from pathlib import Path

from core import workspace
from core.jobs import report_progress
from core.models.static import KIND, is_static  # noqa: F401 - is_static is this module's too

GRAPH = "model"  # model.json (PIR program; model.pdmodel with the old IR) + model.pdiparams
INPUTS = ("input_ids", "attention_mask", "position_ids", "max_new_tokens", "min_new_tokens", "top_k", "temperature",
          "top_p", "repetition_penalty")
DTYPES = ("float32", "float16", "bfloat16")
CHECK_NEW_TOKENS = 8

NOT_EXPORTABLE = {
    "lora": "an unmerged LoRA adapter: merge it first (paddle-studio merge --adapter DIR --out MERGED), then export "
            "the merged folder",
    "lokr": "an unmerged LoKr adapter: merge it first (paddle-studio merge --adapter DIR --out MERGED), then export "
            "the merged folder",
    "vera": "an unmerged VeRA adapter: merge it first (paddle-studio merge --adapter DIR --out MERGED), then export "
            "the merged folder",
    "prefix": "a prefix-tuning adapter cannot be exported: its trained key/value states go in front of every layer's "
              "attention, so there are no weights to fold them into, and the traced generation graph has no input "
              "for them. Upstream has no plain export for it either: PaddleNLP exports prefix models only as its "
              "fused inference models with --export_precache (a pre_caches input per layer), which need paddlenlp_ops, a GPU build "
              "not in the CPU wheel. Chat and evaluate run it in dygraph with its base",
    "reft": "a ReFT adapter cannot be exported: it edits hidden states at the prompt's first and last positions while "
            "the model runs (no weight changes to fold in), and the traced generation graph has no place for those "
            "interventions; upstream's export has none either. Chat and evaluate run it in dygraph with its base",
}
QUANTIZED = ("{path} is a quantized folder ({algorithm}): it is not exported. On CPU paddle has no kernel for "
             "weight_only_linear / weight_dequantize, so the studio runs quantized folders by dequantizing them on "
             "load: an exported graph would hold the float weights again (no smaller, no faster than exporting the "
             "merged model it came from) and would drop the int8 activation rounding of a8w8. A quantized static "
             "graph needs PaddleNLP's fused inference models (paddlenlp_ops, GPU only). Export the merged model "
             "the quantized one was made from instead")


class ExportRefused(ValueError):
    """An export that cannot start, with a stable code (for the studio's locales) and parameters."""

    def __init__(self, code: str, message: str, **params):
        super().__init__(message)
        self.code, self.params = code, params


def check(model_dir: str | Path, out: str | Path | None = None, dtype: str = "float32") -> None:
    """Every reason an export cannot start, before anything is loaded: ExportRefused (a ValueError),
    FileNotFoundError or FileExistsError."""
    from core.models import loading

    d = Path(model_dir)
    if not d.is_dir():
        raise FileNotFoundError(f"model folder not found: {d}")
    kind = loading.adapter_kind(d)
    if kind:
        raise ExportRefused(f"adapter_{kind}", f"{d} is {NOT_EXPORTABLE[kind]}" if kind in ("lora", "lokr", "vera")
                            else f"{d}: {NOT_EXPORTABLE[kind]}", kind=kind, path=str(d))
    if is_static(d):
        raise ExportRefused("already_static", f"{d} is already a static export; export the model folder it came from",
                            path=str(d))
    if (d / workspace.QUANT_MARKER).is_file():
        try:
            algo = json.loads((d / workspace.QUANT_MARKER).read_text(encoding="utf-8")).get("algorithm", "?")
        except (OSError, ValueError, AttributeError):
            algo = "?"
        raise ExportRefused("quantized", QUANTIZED.format(path=d, algorithm=algo), path=str(d), algorithm=algo)
    if not (d / "config.json").is_file():
        raise ExportRefused("not_a_model", f"{d} holds no model (no config.json)", path=str(d))
    from core.models import layouts
    from core.train.config import family_of_type

    try:
        mtype = json.loads((d / "config.json").read_text(encoding="utf-8")).get("model_type", "")
    except (OSError, ValueError, AttributeError):
        mtype = ""
    fam = family_of_type(mtype) if isinstance(mtype, str) else None
    if layouts.layout(fam):
        raise ExportRefused("needs_4d_mask", f"{d}: the {mtype} family reads its prompt both ways (a [batch, 1, L, L] "
                            "mask and two position rows); PaddleNLP's traced generation loop takes a 2-D padding mask, "
                            "so it is not exported", path=str(d), model_type=mtype)
    if out is not None and Path(out).exists():
        raise FileExistsError(f"{out} exists; choose another output folder")
    if dtype not in DTYPES:
        raise ExportRefused("bad_dtype", f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}", dtype=dtype)
    if dtype != "float32" and not _gpu_visible():
        raise ExportRefused("dtype_needs_gpu", f"dtype {dtype} needs a GPU: paddle's CPU build has no {dtype} matmul "
                            f"kernel (\"The kernel with key (CPU, Undefined(AnyLayout), {dtype}) of kernel `matmul` is not "
                            "registered\"); export float32 on CPU", dtype=dtype)


class _Knobs:
    """The logits processor traced into the graph: repetition penalty, minimum length, temperature,
    top-p, each from a graph input and each an exact no-op at its off value (1, 0, 1, 1)."""

    def __init__(self, origin_len, min_new_tokens, temperature, top_p, penalty, eos_id):
        self.origin_len, self.min_new, self.temperature = origin_len, min_new_tokens, temperature
        self.top_p, self.penalty, self.eos_id = top_p, penalty, eos_id

    def __call__(self, input_ids, logits):
        import paddle

        cond = paddle.static.nn.cond  # only the branch taken runs: greedy pays for no sort
        logits = cond(paddle.all(self.penalty != 1.0), lambda: self._penalize(input_ids, logits), lambda: logits)
        # no end-of-text before min_new_tokens
        done = paddle.shape(input_ids)[1] - self.origin_len
        is_eos = (paddle.arange(paddle.shape(logits)[1]) == self.eos_id).unsqueeze(0)
        logits = paddle.where(is_eos & (done < self.min_new), paddle.full_like(logits, float("-inf")), logits)
        logits = logits / self.temperature
        return cond(paddle.all(self.top_p < 1.0), lambda: self._nucleus(logits), lambda: logits)

    def _penalize(self, input_ids, logits):
        """PaddleNLP/CTRL repetition penalty over every token so far (prompt, padding and answer, as
        dygraph generate does)."""
        import paddle

        seen = paddle.take_along_axis(logits, input_ids, axis=1)
        seen = paddle.where(seen < 0, seen * self.penalty, seen / self.penalty)
        return paddle.put_along_axis(logits, input_ids, seen, axis=1)

    def _nucleus(self, logits):
        """The smallest set of most likely tokens whose probability reaches top_p (the first always kept)."""
        import paddle
        import paddle.nn.functional as F

        probs = F.softmax(logits.astype("float32"), axis=-1)
        ranked = paddle.sort(probs, axis=-1, descending=True)
        keep = (paddle.cumsum(ranked, axis=-1) - ranked) < self.top_p
        floor = paddle.min(paddle.where(keep, ranked, paddle.full_like(ranked, 2.0)), axis=-1, keepdim=True)
        return paddle.where(probs >= floor, logits, paddle.full_like(logits, float("-inf")))


def _gpu_visible() -> bool:
    from core.models.static import _gpu_visible as visible

    return visible()


def _generator(model, pad_id: int, eos_id: int, with_positions: bool):
    """A Layer whose forward is PaddleNLP's sample_d2s with the knobs as inputs."""
    import paddle
    from paddlenlp.generation.logits_process import LogitsProcessorList

    class Generate(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, position_ids, max_new_tokens, min_new_tokens, top_k, temperature,
                    top_p, repetition_penalty):
            knobs = _Knobs(paddle.shape(input_ids)[1], min_new_tokens, temperature, top_p, repetition_penalty, eos_id)
            # top_k a tensor and top_p a float: sample_d2s takes its top-k path (argmax for 1, multinomial else)
            return self.model.sample_d2s(input_ids, attention_mask, position_ids if with_positions else None,
                                         LogitsProcessorList([knobs]), max_new_tokens, pad_id, eos_id, top_k, 1.0, 1.0)

    return Generate()


def _input_spec(with_positions: bool) -> list:
    import paddle

    S = paddle.static.InputSpec
    ids = [S([None, None], "int64", "input_ids"), S([None, None], "int64", "attention_mask"),
           S([None, None], "int64", "position_ids") if with_positions else None]
    return ids + [S([1], "int64", "max_new_tokens"), S([1], "int64", "min_new_tokens"), S([1], "int64", "top_k"),
                  S([1], "float32", "temperature"), S([1], "float32", "top_p"), S([1], "float32", "repetition_penalty")]


def export(model_dir: str | Path, out: str | Path, dtype: str = "float32", log=print) -> dict:
    """Export ``model_dir`` (a full model) to the static folder ``out``; returns what studio_model.json says."""
    import numpy as np
    import paddle

    from core.data import templates
    from core.models import evaluate, loading, merge, static

    t0 = time.perf_counter()
    out = Path(out)
    check(model_dir, out, dtype)
    model_dir = Path(model_dir).resolve()
    report_progress(0.05, "loading the model", code="loading_model")
    log(f"loading {model_dir}")
    model, tok, tpl = loading.load(model_dir)
    if dtype != "float32":
        model.to(dtype=dtype)
    cfg = model.config
    with_positions = "position_ids" in model._get_model_inputs_spec(dtype)
    own_positions = evaluate.padded_positions_matter(model)
    eos, pad = tok.eos_token_id, tok.pad_token_id
    max_length = int(getattr(cfg, "max_position_embeddings", 0) or getattr(cfg, "seq_length", 0) or 2048)

    # what the graph must reproduce, from dygraph before tracing (tracing slows dygraph down for good)
    report_progress(0.15, "greedy answers for the check (dygraph)", code="export_answers")
    ids = [templates.prompt_ids(tok, tpl, m) for m in merge.CHECK_PROMPTS]
    want = _dygraph_greedy(model, tok, ids, CHECK_NEW_TOKENS, own_positions)

    report_progress(0.25, "tracing the generation loop (to_static)", code="export_tracing")
    log("tracing the generation loop")
    t1 = time.perf_counter()
    gen = _generator(model, pad, eos, with_positions)
    gen.eval()
    traced = paddle.jit.to_static(gen, input_spec=_input_spec(with_positions), full_graph=True)
    tmp = workspace.temp_dir_beside(out)
    try:
        paddle.jit.save(traced, str(tmp / GRAPH))
        trace_s = time.perf_counter() - t1
        log(f"traced and saved in {trace_s:.1f} s")
        report_progress(0.7, "saving tokenizer and config", code="export_saving")
        tok.save_pretrained(str(tmp))
        cfg_path = tmp / "tokenizer_config.json"
        tcfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        if tpl and tcfg.get("chat_template") != tpl:  # the template survives only in tokenizer_config.json
            tcfg["chat_template"] = tpl
            workspace.write_json_atomic(cfg_path, tcfg)
        cfg.save_pretrained(str(tmp))
        gcfg = getattr(model, "generation_config", None)
        if gcfg is not None:
            with contextlib.suppress(Exception):  # a courtesy for upstream tools; the engine does not read it
                gcfg.save_pretrained(str(tmp))
        graph_files = sorted(p.name for p in tmp.iterdir() if p.name.startswith(GRAPH + "."))
        info = {
            "kind": KIND,
            "name": out.name,
            "exported_from": str(model_dir),
            "architecture": (getattr(cfg, "architectures", None) or [type(model).__name__])[0],
            "model_type": getattr(cfg, "model_type", None),
            "dtype": dtype,
            "max_length": max_length,
            "vocab_size": int(cfg.vocab_size),
            "parameters": int(sum(int(np.prod(w.shape)) for w in model.parameters())),
            "graph": graph_files,
            "inputs": [n for n in INPUTS if with_positions or n != "position_ids"],
            "position_ids": "own" if own_positions else "column",
            "decode_strategies": ["greedy_search", "sampling"],
            "sampling": ["top_k", "top_p", "temperature", "repetition_penalty", "min_new_tokens", "seed"],
            "eos_token_id": eos,
            "pad_token_id": pad,
            "paddle": paddle.__version__,
            "runtime": "paddle.inference with oneDNN off (oneDNN on CPU gives the first token, then <unk> and NaN "
                       "scores)",
        }
        workspace.write_json_atomic(tmp / workspace.MODEL_MARKER, info)

        report_progress(0.8, "checking the exported graph against dygraph", code="export_checking")
        engine = static.StaticEngine(tmp)
        got = engine.generate(ids, CHECK_NEW_TOKENS)
        matched = sum(a == b for a, b in zip(got, want))
        log(f"exported graph vs dygraph greedy: {matched}/{len(ids)} prompts token for token ({CHECK_NEW_TOKENS} tokens)")
        info["check"] = {"prompts": len(ids), "new_tokens": CHECK_NEW_TOKENS, "matched": matched}
        if matched < len(ids) and dtype == "float32":
            bad = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
            raise ValueError(f"the exported graph does not reproduce dygraph greedy decoding: prompt {bad} gave "
                             f"{got[bad]} where dygraph gave {want[bad]}; nothing was written")
        info["seconds"] = round(time.perf_counter() - t0, 2)
        info["trace_seconds"] = round(trace_s, 2)
        workspace.write_json_atomic(tmp / workspace.MODEL_MARKER, info)
        report_progress(0.95, "publishing", code="publishing")
        workspace.publish_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report_progress(1.0, "done", code="done")
    return {"out": str(out), **info}


def _dygraph_greedy(model, tok, prompts: list[list[int]], n: int, own_positions: bool) -> list[list[int]]:
    """Greedy new tokens of dygraph generate for left-padded prompts, cut at the first end-of-text."""
    import numpy as np
    import paddle

    from core.models import layouts

    width = max(len(p) for p in prompts)
    ids = np.full((len(prompts), width), tok.pad_token_id, dtype="int64")
    att = np.zeros((len(prompts), width), dtype="int64")
    for k, p in enumerate(prompts):
        ids[k, width - len(p):], att[k, width - len(p):] = p, 1
    with paddle.no_grad():
        res = model.generate(**layouts.generation_inputs(model, ids, att, own_positions, n), max_new_tokens=n,
                             decode_strategy="greedy_search", eos_token_id=tok.eos_token_id,
                             pad_token_id=tok.pad_token_id, use_cache=True)
    rows = (res[0] if isinstance(res, (tuple, list)) else res).numpy().tolist()
    return [r[: r.index(tok.eos_token_id)] if tok.eos_token_id in r else r for r in rows]


def submit(model_dir: str | Path, name: str) -> str:
    """Start an export job writing models/NAME (its own process: tracing slows dygraph in the process
    that traced); returns the job id. jobs.Refused, with the check's code, when it cannot start."""
    from core import jobs

    out = jobs.check_output(name, workspace.models_dir())
    try:
        check(model_dir, out)
    except ExportRefused as e:
        raise jobs.Refused(f"export_{e.code}", str(e), **e.params) from None
    except FileNotFoundError as e:
        raise jobs.Refused("export_not_a_model", str(e), path=str(model_dir)) from None
    args = ["export", "--model", str(model_dir), "--out", str(out), "--json"]
    return jobs.submit("export", args, title=out.name, params={"model": str(model_dir), "out": str(out)}, outputs=[out])
