"""Evaluation on dev: eval loss, perplexity, token accuracy; generation exact match, BLEU-4, ROUGE-L.

Works on a base model, base + adapter (LoRA, prefix, VeRA, LoKr, unmerged), a merged, a quantized
model and a static export (answers only). Multi-turn records are judged on their last answer, with
the gold earlier turns as history. Prompts are built by core.data.templates exactly as training
builds them.

Predictions on any data (a dataset's dev or train split, or a file): ``evaluate(...,
predictions=True)`` keeps every record's prompt, reference, answer and per-record scores;
``submit_predict`` runs that as an eval job that writes ``predictions.jsonl`` into the job's folder
(``python -m core.models.evaluate`` is the job's command: the flags of ``paddle-studio eval`` plus
``--split`` and ``--predictions FILE``). A score that says nothing on these answers (BLEU-4 on
answers of under 4 tokens) is reported with a note (a code, its parameters and English text).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
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


BLEU_ORDER = 4  # BLEU-4 needs 4-grams: shorter texts have none to match


def record_scores(hyp: str, ref: str) -> dict:
    """One record's scores: exact match, ROUGE-L F1, and sentence BLEU-4 (unsmoothed; None when the
    answer or the reference has fewer than 4 tokens, where it is 0 whatever the answer)."""
    short = min(len(text_tokens(hyp)), len(text_tokens(ref))) < BLEU_ORDER
    return {"exact_match": hyp.strip() == ref.strip(), "rouge_l": rouge_l([hyp], [ref]),
            "bleu4": None if short else bleu4([hyp], [ref])}


def score_notes(hyps: list[str], refs: list[str]) -> list[dict]:
    """What the scores do not mean on these answers: {code, params, message} (English message; the
    studio shows the code's own text)."""
    n = len(refs)
    short_refs = sum(len(text_tokens(r)) < BLEU_ORDER for r in refs)
    short_any = sum(min(len(text_tokens(h)), len(text_tokens(r))) < BLEU_ORDER for h, r in zip(hyps, refs))
    notes = []
    if n and short_refs * 2 > n:
        notes.append({"code": "bleu4_short_answers", "params": {"short": short_refs, "records": n},
                      "message": f"BLEU-4 is not meaningful here: {short_refs} of {n} references have fewer than 4 "
                                 "tokens, so they hold no 4-gram to match; judge by exact match and ROUGE-L"})
    if short_any:
        notes.append({"code": "bleu4_short_records", "params": {"short": short_any, "records": n},
                      "message": f"per-record BLEU-4 is left empty for {short_any} of {n} records whose answer or "
                                 "reference has fewer than 4 tokens (it would be 0 whatever the answer)"})
    return notes


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
             src_length: int | None = None, on_batch=None) -> list[str]:
    """Greedy answers for conversations that end with a user message (batched, left padded);
    ``on_batch(done, total)`` after each batch."""
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
            if on_batch:
                on_batch(len(out), len(prompts))
    return out


SPLITS = ("dev", "train")
ANSWERABLE = ("paddlenlp", "alpaca", "sharegpt", "messages")  # formats whose records end with an answer


def data_files(data, split: str | None = None) -> list[Path]:
    """The files to evaluate: a file as it is; a dataset folder's ``split`` ("dev" or "train"; None:
    its dev split, or the whole folder when it has none)."""
    from core.data import datasets

    files = datasets.resolve_files(data)  # refuses what is neither a file nor a dataset folder, saying what it is
    if "data" in files:  # a single file
        return files["data"]
    if split is None:
        return files.get("dev") or [f for fs in files.values() for f in fs]
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: expected one of {', '.join(SPLITS)}")
    if split not in files:
        raise ValueError(f"{data} has no {split} split")
    return files[split]


def data_format(files: list[Path]) -> str:
    """How to read ``files``: raw text, a chat format converted to src/tgt, or PaddleNLP's src/tgt."""
    from core.data import datasets

    fmt = datasets.detect_format(files[0])
    return fmt if fmt in ("text", *ANSWERABLE) else "paddlenlp"


def read_records(data, split: str | None = None, limit: int | None = None) -> tuple[list[Path], str, list[dict]]:
    """(files, format, the first ``limit`` good records as src/tgt dicts) of a file or a dataset split."""
    from core.data import datasets

    files = data_files(data, split)
    fmt = data_format(files)
    records: list[dict] = []
    for f in files:
        for r in datasets.iter_records(f, fmt):
            records.append(r)
            if limit and len(records) >= limit:
                return files, fmt, records
    return files, fmt, records


def evaluate(model_dir=None, adapter_dir=None, data=None, limit: int | None = None, max_new_tokens: int = 64,
             src_length: int = 1024, max_length: int = 2048, with_generation: bool = True, loaded=None,
             split: str | None = None, predictions: bool = False, on_progress=None) -> dict:
    """Every metric on a file or a dataset folder's split (default: dev). ``predictions``: also every
    record's prompt, reference, answer and scores (``record_scores``) under "predictions".
    ``on_progress(fraction, text, code=..., **params)`` while it answers."""
    t0 = time.perf_counter()
    files, fmt, records = read_records(data, split, limit)
    path = files[0]
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
    if split or len(files) > 1:
        res["split"] = split
        res["files"] = [str(f) for f in files]
    notes = []
    if static is not None:
        res["note"] = ("a static export runs only its generation loop: loss, perplexity and token accuracy need "
                       "the model's logits (evaluate the model it was exported from for those)")
        notes.append({"code": "static_no_loss", "params": {}, "message": res["note"]})
    else:
        if on_progress:
            on_progress(0.0, f"scoring the answers of {len(records)} records", code="scoring", records=len(records))
        res.update(loss_and_accuracy(model, tok, tpl, records, src_length, max_length))
    if with_generation and fmt == "text":
        notes.append({"code": "text_no_answers", "params": {},
                      "message": "raw text has no questions to answer: only loss, perplexity and token accuracy"})
    if with_generation and fmt != "text":  # raw text has no questions to answer
        convs, refs = [], []
        for r in records:
            msgs = templates.messages_of(r)
            convs.append(msgs[:-1])
            refs.append(msgs[-1]["content"])
        step = (lambda done, total: on_progress(0.1 + 0.9 * done / total, f"answered {done}/{total}", code="answered",
                                                 done=done, total=total)) if on_progress else None
        if on_progress:
            on_progress(0.1, f"answered 0/{len(convs)}", code="answered", done=0, total=len(convs))
        hyps = (static.answers(convs, max_new_tokens, src_length=src_length) if static is not None
                else generate(model, tok, tpl, convs, max_new_tokens, src_length=src_length, on_batch=step))
        res["exact_match"] = sum(h.strip() == r.strip() for h, r in zip(hyps, refs)) / len(refs)
        res["bleu4"] = bleu4(hyps, refs)
        res["rouge_l"] = rouge_l(hyps, refs)
        notes += score_notes(hyps, refs)
        res["samples"] = [{"prompt": c[-1]["content"], "reference": r, "output": h}
                          for c, r, h in list(zip(convs, refs, hyps))[:5]]
        if predictions:
            res["predictions"] = [prediction_row(i, c, r, h) for i, (c, r, h) in enumerate(zip(convs, refs, hyps))]
    if notes:
        res["notes"] = notes
    res["seconds"] = round(time.perf_counter() - t0, 2)
    return res


def prediction_row(index: int, conv: list[dict], reference: str, output: str) -> dict:
    """One line of predictions.jsonl: the record's last question, its earlier turns ([user,
    assistant] pairs), its system prompt, the reference and the model's answer, and their scores."""
    turns = [m for m in conv if m["role"] != "system"]
    system = next((m["content"] for m in conv if m["role"] == "system"), None)
    history = [[turns[i]["content"], turns[i + 1]["content"]] for i in range(0, len(turns) - 2, 2)]
    return {"index": index, "prompt": turns[-1]["content"], "history": history, "system": system,
            "reference": reference, "output": output, **record_scores(output, reference)}


def write_predictions(rows: list[dict], out: str | Path) -> Path:
    """``rows`` as JSON lines at ``out``, through a temp file in the same folder and a rename."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out


def predict(model_dir=None, adapter_dir=None, data=None, out=None, split: str | None = None, **kw) -> dict:
    """``evaluate`` with every record's prediction written to ``out`` (JSON lines, atomically); the
    result names the file and counts its lines instead of holding them."""
    from core.jobs import report_progress

    res = evaluate(model_dir, adapter_dir, data, split=split, predictions=True, on_progress=report_progress, **kw)
    rows = res.pop("predictions", [])
    if out:
        res["predictions_file"] = str(write_predictions(rows, out))
    res["predictions_count"] = len(rows)
    return res


def read_predictions(path: str | Path, page: int = 1, size: int = 10) -> tuple[list[dict], int]:
    """(the rows of page ``page`` (from 1) of ``size`` rows, how many rows there are) of a predictions file."""
    rows, total = [], 0
    lo = (max(1, int(page)) - 1) * size
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                if lo <= total < lo + size:
                    rows.append(json.loads(line))
                total += 1
    except (OSError, ValueError):
        return [], 0
    return rows, total


METRICS = ("eval_loss", "perplexity", "token_accuracy", "exact_match", "bleu4", "rouge_l")


def compare(targets: list[tuple[str, str | None, str | None]], data, limit: int | None = None, **kw) -> dict:
    """Evaluate several (label, model, adapter) targets on the same records, one after another."""
    from core.jobs import report_progress

    rows = []
    for i, (label, model, adapter) in enumerate(targets):
        report_progress(i / len(targets), f"evaluating {label} ({i + 1}/{len(targets)})", code="evaluating_target",
                        label=label, i=i + 1, n=len(targets))
        res = evaluate(model, adapter, data, limit=limit, **kw)
        rows.append({"label": label, **{k: res.get(k) for k in (*METRICS, "records", "seconds")},
                     "samples": res.get("samples", [])[:3], "notes": res.get("notes", [])})
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


# ---------------------------------------------------------------- predictions as a job

PREDICTIONS_FILE = "predictions.jsonl"


def target_of(path: str | Path) -> tuple[str | None, str | None]:
    """(model, adapter) to load for a model folder the catalog lists: an adapter goes with its
    recorded base; anything else (base, trained, merged, quantized, static) is the model itself."""
    from core import jobs

    path = Path(path)
    if not path.is_dir():
        raise jobs.Refused("no_model", f"{path}: no such model folder", path=str(path))
    if loading.adapter_kind(path):
        if not loading.base_of(path):
            raise jobs.Refused("no_base", f"{path} holds an adapter that records no base model", path=str(path))
        return None, str(path)
    if not (path / "config.json").is_file():
        raise jobs.Refused("no_model", f"{path} is not a model folder (no config.json)", path=str(path))
    return str(path), None


def submit_predict(model: str | Path, data: str | Path, split: str | None = "dev", limit: int | None = None,
                   max_new_tokens: int = 64, adapter: str | Path | None = None, src_length: int = 1024,
                   max_length: int = 2048, upload_name: str | None = None) -> str:
    """Start an eval job that evaluates ``model`` (any catalog model; an adapter with its base, or
    ``adapter`` on ``model``) on ``data`` (a dataset folder's ``split``, or a file) and writes every
    record's prediction to ``predictions.jsonl`` in the job's folder; returns the job id. An uploaded
    file (``upload_name``: its name as the person picked it) is copied into the job's folder first,
    so the job keeps the data it was judged on. Refused (with a code) before anything starts when the
    model, the data or the split is not there or holds no record to answer."""
    from core import jobs
    from core.data import datasets

    if adapter:
        model_dir, adapter_dir = (str(model) if model else None), str(adapter)
    else:
        model_dir, adapter_dir = target_of(model)
    data = Path(data)
    if not data.exists():
        raise jobs.Refused("no_data", f"{data}: no such dataset or file", path=str(data))
    if data.is_file():
        split = None
    elif split not in (None, *SPLITS):
        raise ValueError(f"split {split!r}: expected one of {', '.join(SPLITS)}")
    try:
        if split and split not in datasets.resolve_files(data):
            raise jobs.Refused("no_split", f"{data} has no {split} split", path=str(data), split=split)
        files, fmt, first = read_records(data, split, limit=1)
    except (ValueError, OSError, datasets.DatasetError) as e:
        if isinstance(e, jobs.Refused):
            raise
        raise jobs.Refused("bad_data", f"{data}: {e}", path=str(data), why=str(e)) from None
    if not first:
        raise jobs.Refused("no_records", f"{data}: no record to evaluate", path=str(data))
    if fmt == "text":
        raise jobs.Refused("text_data", f"{data} is raw text: there are no questions to answer", path=str(data))
    limit = int(limit) if limit else None
    args = ["predict", "--data", str(data), "--predictions", "{job}/" + PREDICTIONS_FILE,
            "--max-new-tokens", str(int(max_new_tokens or 64)), "--src-length", str(int(src_length)),
            "--max-length", str(int(max_length)), "--json"]
    if model_dir:
        args += ["--model", model_dir]
    if adapter_dir:
        args += ["--adapter", adapter_dir]
    if split:
        args += ["--split", split]
    if limit:
        args += ["--limit", str(limit)]
    if upload_name is not None:
        args += ["--copy-data", "{job}/data" + (data.suffix or ".json")]
    what = Path(adapter_dir or model_dir or "").parent.name if Path(adapter_dir or model_dir or "").name == "output" \
        else Path(adapter_dir or model_dir or "").name
    on = upload_name or (f"{data.name}-{split}" if split else data.name)
    params = {"predict": True, "model": model_dir, "adapter": adapter_dir, "data": str(data), "split": split,
              "limit": limit, "max_new_tokens": int(max_new_tokens or 64), "upload_name": upload_name}
    return jobs.submit("eval", args, title=f"{what} on {on}", params=params,
                       program=[sys.executable, "-m", "core.models.evaluate"])


def is_predict_job(job: dict) -> bool:
    """Whether an eval job (core.jobs.list_jobs row or job.json) is a predictions job, not a comparison."""
    return job.get("kind") == "eval" and bool((job.get("params") or {}).get("predict"))


def latest_job(predict: bool) -> str | None:
    """The newest predictions job (``predict``) or the newest comparison (what each view shows after a reload)."""
    from core import jobs

    return next((j["job_id"] for j in jobs.list_jobs("eval") if is_predict_job(j) == predict), None)


def cli_main(argv: list[str]) -> int:
    """`python -m core.models.evaluate predict ...`: the command of a predictions job (the flags of
    `paddle-studio eval`, plus --split, --predictions FILE and --copy-data FILE)."""
    import argparse
    import contextlib
    import shutil

    p = argparse.ArgumentParser(prog="python -m core.models.evaluate predict",
                                description="evaluate a model on a dataset split or a file; every prediction to a JSONL file")
    p.add_argument("verb", choices=["predict"])
    p.add_argument("--model", help="model folder (default with --adapter: its recorded base)")
    p.add_argument("--adapter")
    p.add_argument("--data", required=True, help="a dataset folder or a JSON/JSONL file")
    p.add_argument("--split", choices=SPLITS, help="a dataset folder's split (default: dev)")
    p.add_argument("--limit", type=int)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--src-length", type=int, default=1024)
    p.add_argument("--max-length", type=int, default=2048)
    p.add_argument("--no-generation", action="store_true")
    p.add_argument("--predictions", metavar="FILE", help="write every record's prediction here (JSON lines)")
    p.add_argument("--copy-data", metavar="FILE", help="copy --data (a file) here first and evaluate the copy")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    from core.data.datasets import DatasetError

    try:
        data = a.data
        if a.copy_data:
            tmp = Path(a.copy_data).with_name(f".{Path(a.copy_data).name}.tmp")
            shutil.copyfile(a.data, tmp)
            os.replace(tmp, a.copy_data)
            data = a.copy_data
        with contextlib.redirect_stdout(sys.stderr):  # stdout holds only the JSON answer
            res = predict(a.model, a.adapter, data, a.predictions, split=a.split, limit=a.limit,
                          max_new_tokens=a.max_new_tokens, src_length=a.src_length, max_length=a.max_length,
                          with_generation=not a.no_generation)
    except (DatasetError, FileNotFoundError, FileExistsError, ValueError, OSError) as e:
        sys.stderr.write(f"paddle-studio eval: {e}\n")
        return 2
    if a.json:
        sys.stdout.write(json.dumps(res, ensure_ascii=False, indent=2) + "\n")
    else:
        keys = ("eval_loss", "perplexity", "token_accuracy", *METRICS[3:])
        print("  ".join(f"{k} {res[k]:.4f}" for k in keys if res.get(k) is not None)
              + f"  ({res['records']} records, {res['seconds']} s)")
        for n in res.get("notes", []):
            print(f"note: {n['message']}")
        if res.get("predictions_file"):
            print(f"predictions: {res['predictions_file']} ({res['predictions_count']} records)")
    return 0


if __name__ == "__main__":
    from core.system import quiet_import_warnings

    quiet_import_warnings()
    sys.exit(cli_main(sys.argv[1:]))
