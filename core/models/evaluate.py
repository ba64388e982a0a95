"""Evaluation on dev: eval loss, perplexity, token accuracy; generation exact match, BLEU-4, ROUGE-L.

Works on a base model, base + adapter (LoRA, prefix, VeRA, LoKr, unmerged) and a merged model.
Multi-turn records are judged on their last answer, with the gold earlier turns as history.
Prompts are built by core.data.templates exactly as training builds them.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from pathlib import Path

from core.data import templates
from core.models import layouts, loading

# ---------------------------------------------------------------- scores


_TOKEN_RE = re.compile(r"[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]|[A-Za-z0-9_]+|[^\sA-Za-z0-9_]")


def text_tokens(s: str) -> list[str]:
    """Words for English, characters for Chinese, punctuation apart: one tokenization for both scores."""
    return _TOKEN_RE.findall(s)


def bleu4(hyps: list[str], refs: list[str]) -> float:
    """Corpus BLEU-4 with brevity penalty (uniform weights), on text_tokens."""
    clipped = [0] * 4
    total = [0] * 4
    hyp_len = ref_len = 0
    for h, r in zip(hyps, refs):
        ht, rt = text_tokens(h), text_tokens(r)
        hyp_len += len(ht)
        ref_len += len(rt)
        for n in range(1, 5):
            hc = Counter(tuple(ht[i:i + n]) for i in range(len(ht) - n + 1))
            rc = Counter(tuple(rt[i:i + n]) for i in range(len(rt) - n + 1))
            clipped[n - 1] += sum(min(c, rc[g]) for g, c in hc.items())
            total[n - 1] += max(len(ht) - n + 1, 0)
    if hyp_len == 0 or min(clipped) == 0:
        return 0.0
    log_p = sum(math.log(c / t) for c, t in zip(clipped, total)) / 4
    bp = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return bp * math.exp(log_p)


def rouge_l(hyps: list[str], refs: list[str]) -> float:
    """Mean ROUGE-L F1 (LCS based) on text_tokens."""
    scores = []
    for h, r in zip(hyps, refs):
        ht, rt = text_tokens(h), text_tokens(r)
        if not ht or not rt:
            scores.append(float(ht == rt))
            continue
        prev = [0] * (len(rt) + 1)
        for a in ht:
            cur = [0]
            for j, b in enumerate(rt):
                cur.append(prev[j] + 1 if a == b else max(prev[j + 1], cur[j]))
            prev = cur
        lcs = prev[-1]
        if lcs == 0:
            scores.append(0.0)
            continue
        p, rc = lcs / len(ht), lcs / len(rt)
        scores.append(2 * p * rc / (p + rc))
    return sum(scores) / max(len(scores), 1)


# ---------------------------------------------------------------- model passes


def loss_and_accuracy(model, tokenizer, template, records, src_length=1024, max_length=2048, batch_size=16) -> dict:
    """Mean token loss, perplexity and next-token accuracy over the answer tokens of ``records``."""
    from core.data import datasets

    if datasets.is_text_dataset(records):  # raw text: every token of max_length blocks, as pretraining sees it
        exs = templates.text_blocks(tokenizer, [r["text"] for r in records], max_length)
    else:
        exs = [e for e in (templates.build_example(tokenizer, template, r, src_length, max_length) for r in records) if e]
    res = examples_loss(model, exs, tokenizer.pad_token_id, batch_size)
    return {**res, "examples": len(exs)}


def examples_loss(model, exs: list[dict], pad: int, batch_size: int = 16) -> dict:
    """Mean token loss, perplexity and next-token accuracy over the label tokens of tokenized
    examples ({input_ids, labels}, labels already shifted), in right-padded batches."""
    import numpy as np
    import paddle
    import paddle.nn.functional as F

    total_loss = 0.0
    total_tok = correct = 0
    with paddle.no_grad():
        for i in range(0, len(exs), batch_size):
            chunk = exs[i:i + batch_size]
            n = max(len(e["input_ids"]) for e in chunk)
            ids = np.full((len(chunk), n), pad, dtype="int64")
            lab = np.full((len(chunk), n), templates.IGNORE, dtype="int64")
            att = np.zeros((len(chunk), n), dtype="int64")
            for k, e in enumerate(chunk):
                m = len(e["input_ids"])
                ids[k, :m], lab[k, :m], att[k, :m] = e["input_ids"], e["labels"], 1
            extra = {}
            if hasattr(model, "reft_model"):  # ReFT edits each example's own prompt positions
                from core.models import reft

                extra["prompt_lengths"] = [reft.prompt_length(e["labels"]) for e in chunk]
            out = model(input_ids=paddle.to_tensor(ids), **layouts.inputs(model, ids, att), **extra)
            logits = loading.logits_of(out)
            logits = logits.astype("float32")
            labels = paddle.to_tensor(lab)
            mask = labels != templates.IGNORE
            safe = paddle.where(mask, labels, paddle.zeros_like(labels))
            logp = F.log_softmax(logits, axis=-1)
            tok_logp = paddle.take_along_axis(logp, safe.unsqueeze(-1), axis=-1).squeeze(-1)
            maskf = mask.astype("float32")
            total_loss += float(-(tok_logp * maskf).sum())
            correct += int(((logits.argmax(-1) == labels) & mask).astype("int64").sum())
            total_tok += int(mask.astype("int64").sum())
    loss = total_loss / max(total_tok, 1)
    return {"eval_loss": loss, "perplexity": math.exp(min(loss, 50)), "token_accuracy": correct / max(total_tok, 1),
            "tokens": total_tok, "examples": len(exs)}


def padded_positions_matter(model) -> bool:
    """Whether left-padded generation must be given each row's own position ids. Without them the
    families below number positions from the batch's first column, pads included: rotary families
    (LLaMA, Qwen2, ChatGLM2) do not care, as a shift of every query and key cancels, except that a
    prefix adapter's trained keys carry no position, so a shifted row saw them from elsewhere (a
    prefix adapter answered 7 of 40 dev prompts as it does one at a time); GPT's learned absolute
    positions move outright. The family preset says it (``generate_position_ids``)."""
    from core.train.config import family_of_type

    inner = getattr(model, "model", model)
    cfg = getattr(inner, "config", None) or getattr(model, "config", None)
    fam = family_of_type(getattr(cfg, "model_type", "") or "") or {}
    return bool(fam.get("generate_position_ids"))


def unpadded_only(model) -> bool:
    """Whether the family's generation ignores the padding mask (its preset's ``generate_unpadded``
    says why): such prompts are generated one at a time."""
    from core.train.config import family_of_type

    inner = getattr(model, "model", model)
    cfg = getattr(inner, "config", None) or getattr(model, "config", None)
    return bool((family_of_type(getattr(cfg, "model_type", "") or "") or {}).get("generate_unpadded"))


def generate(model, tokenizer, template, conversations: list[list[dict]], max_new_tokens=64, batch_size=32,
             src_length: int | None = None) -> list[str]:
    """Greedy answers for conversations that end with a user message (batched, left padded)."""
    import numpy as np
    import paddle

    if unpadded_only(model):  # GPT: a padded batch would attend its padding
        batch_size = 1

    prompts = [templates.prompt_ids(tokenizer, template, c, src_length) for c in conversations]
    own_positions = padded_positions_matter(model)
    pad = tokenizer.pad_token_id
    eos = tokenizer.eos_token_id
    out: list[str] = []
    with paddle.no_grad():
        for i in range(0, len(prompts), batch_size):
            chunk = prompts[i:i + batch_size]
            n = max(len(p) for p in chunk)
            ids = np.full((len(chunk), n), pad, dtype="int64")
            att = np.zeros((len(chunk), n), dtype="int64")
            for k, p in enumerate(chunk):
                ids[k, n - len(p):], att[k, n - len(p):] = p, 1
            res = model.generate(
                **layouts.generation_inputs(model, ids, att, own_positions, max_new_tokens),
                max_new_tokens=max_new_tokens,
                decode_strategy="greedy_search",
                eos_token_id=eos,
                pad_token_id=pad,
                use_cache=True,
            )
            gen = res[0] if isinstance(res, (tuple, list)) else res
            for row in gen.numpy().tolist():
                if eos in row:
                    row = row[: row.index(eos)]
                out.append(tokenizer.decode(row, skip_special_tokens=True).strip())
    return out


def evaluate(model_dir=None, adapter_dir=None, data=None, limit: int | None = None, max_new_tokens: int = 64,
             src_length: int = 1024, max_length: int = 2048, with_generation: bool = True, loaded=None) -> dict:
    """Every metric on a dev file (or a dataset folder's dev split)."""
    from core.data import datasets

    t0 = time.perf_counter()
    path = Path(data)
    if path.is_dir():
        path = datasets.resolve_files(path).get("dev", [None])[0] or path
    fmt = "text" if datasets.detect_format(path) == "text" else "paddlenlp"
    records = list(datasets.iter_records(path, fmt))
    if limit:
        records = records[:limit]
    if not records:
        raise ValueError(f"{data}: no records to evaluate")
    from core.models.static import is_static

    static = None
    if not loaded and is_static(model_dir):  # Paddle Inference: answers only, the graph gives no logits
        if adapter_dir:
            raise ValueError(f"{model_dir} is a static export: it takes no adapter")
        from core.models.static import StaticEngine

        static = StaticEngine(model_dir)
        model, tok, tpl = None, static.tokenizer, static.template
    else:
        model, tok, tpl = loaded or loading.load(model_dir, adapter_dir)
    res = {"model": str(model_dir) if model_dir else None, "adapter": str(adapter_dir) if adapter_dir else None,
           "data": str(path), "records": len(records)}
    if static is not None:
        res["note"] = ("a static export runs only its generation loop: loss, perplexity and token accuracy need "
                       "the model's logits (evaluate the model it was exported from for those)")
    else:
        res.update(loss_and_accuracy(model, tok, tpl, records, src_length, max_length))
    if with_generation and fmt != "text":  # raw text has no questions to answer
        convs, refs = [], []
        for r in records:
            msgs = templates.messages_of(r)
            convs.append(msgs[:-1])
            refs.append(msgs[-1]["content"])
        hyps = (static.answers(convs, max_new_tokens, src_length=src_length) if static is not None
                else generate(model, tok, tpl, convs, max_new_tokens, src_length=src_length))
        res["exact_match"] = sum(h.strip() == r.strip() for h, r in zip(hyps, refs)) / len(refs)
        res["bleu4"] = bleu4(hyps, refs)
        res["rouge_l"] = rouge_l(hyps, refs)
        res["samples"] = [{"prompt": c[-1]["content"], "reference": r, "output": h}
                          for c, r, h in list(zip(convs, refs, hyps))[:5]]
    res["seconds"] = round(time.perf_counter() - t0, 2)
    return res


METRICS = ("eval_loss", "perplexity", "token_accuracy", "exact_match", "bleu4", "rouge_l")


def compare(targets: list[tuple[str, str | None, str | None]], data, limit: int | None = None, **kw) -> dict:
    """Evaluate several (label, model, adapter) targets on the same records, one after another."""
    from core.jobs import report_progress

    rows = []
    for i, (label, model, adapter) in enumerate(targets):
        report_progress(i / len(targets), f"evaluating {label} ({i + 1}/{len(targets)})")
        res = evaluate(model, adapter, data, limit=limit, **kw)
        rows.append({"label": label, **{k: res.get(k) for k in (*METRICS, "records", "seconds")},
                     "samples": res.get("samples", [])[:3]})
    return {"data": str(data), "limit": limit, "rows": rows}


def parse_target(spec: str) -> tuple[str, str | None, str | None]:
    """LABEL=MODEL, LABEL=MODEL+ADAPTER or LABEL=+ADAPTER (the adapter's recorded base)."""
    label, sep, rest = spec.partition("=")
    if not sep or not label or not rest:
        raise ValueError(f"--target {spec!r}: expected LABEL=MODEL[+ADAPTER]")
    model, _, adapter = rest.partition("+")
    return label, model or None, adapter or None


def submit_compare(adapter: str | Path, merged: str | Path | None = None, limit: int = 200) -> str:
    """Start a job that evaluates base, base + adapter and (when given) the merged model on the dev
    split of the dataset the adapter was trained on; returns the job id."""
    from core import jobs

    adapter = Path(adapter)
    base = loading.base_of(adapter)
    if not loading.adapter_kind(adapter) or not base:
        raise jobs.Refused("no_adapter", f"{adapter} holds no adapter with a recorded base", path=str(adapter))
    flat = jobs.read_json(adapter.parent / "config.json", {}) or {}
    data = flat.get("dataset_name_or_path")
    if not data:
        raise jobs.Refused("no_data", f"{adapter.parent / 'config.json'} names no dataset_name_or_path", path=str(adapter))
    args = ["eval", "--data", str(data), "--limit", str(int(limit or 200)), "--src-length", str(flat.get("src_length", 1024)),
            "--max-length", str(flat.get("max_length", 2048)), "--json",
            "--target", f"base={base}", "--target", f"base+adapter={base}+{adapter}"]
    if merged and (Path(merged) / "config.json").is_file():
        args += ["--target", f"merged={merged}"]
    return jobs.submit("eval", args, title=adapter.parent.name, params={"adapter": str(adapter), "merged": str(merged or "")})
