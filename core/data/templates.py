"""Chat templates and the tokenization of records, shared by training, evaluation and chat.

Training and inference must build the very same token sequence for a prompt, so both go
through :func:`prompt_ids`. A tokenizer's template is the jinja ``chat_template`` in its
``tokenizer_config.json`` (or a legacy ``chat_template.json`` beside it); without one, a
prompt is the bare text, as PaddleNLP does for plain src/tgt.

PaddleNLP semantics kept here: the prompt (src) is left-truncated to ``src_length`` (its end
is kept), the answer (tgt) is right-truncated to fit ``max_length``, EOS follows each answer,
prompt tokens are masked from the loss (label -100), and multi-turn records drop whole
earliest turns until they fit.
"""

from __future__ import annotations

import json
from pathlib import Path

IGNORE = -100


def load_template(tokenizer, model_dir: str | Path | None = None, path: str | Path | None = None) -> str | None:
    """The jinja template: an explicit file, the tokenizer's own, or a legacy chat_template.json."""
    if path:
        text = Path(path).read_text(encoding="utf-8")
        try:
            obj = json.loads(text)
            return obj.get("chat_template") if isinstance(obj, dict) else text
        except json.JSONDecodeError:
            return text
    tpl = getattr(tokenizer, "chat_template", None)
    if isinstance(tpl, str) and tpl:
        return tpl
    # PaddleNLP compiles the template into a jinja2.Template object on load; the text we render
    # (and the one training used) is the string in tokenizer_config.json.
    for d in (model_dir, getattr(tokenizer, "name_or_path", None)):
        cfg = Path(d) / "tokenizer_config.json" if d else None
        if cfg is not None and cfg.is_file():
            try:
                text = json.loads(cfg.read_text(encoding="utf-8")).get("chat_template")
            except (OSError, json.JSONDecodeError):
                text = None
            if isinstance(text, str) and text:
                return text
    if model_dir and (Path(model_dir) / "chat_template.json").is_file():
        return load_template(tokenizer, path=Path(model_dir) / "chat_template.json")
    return None


def render(template: str, messages: list[dict], tokenizer) -> str:
    import jinja2

    env = jinja2.Environment(trim_blocks=False, lstrip_blocks=False)
    return env.from_string(template).render(
        messages=messages,
        eos_token=tokenizer.eos_token or "",
        bos_token=tokenizer.bos_token or "",
        add_generation_prompt=True,
    )


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)["input_ids"] if text else []


def messages_of(rec: dict) -> list[dict]:
    """A src/tgt record as chat messages (system first, then user/assistant pairs)."""
    src, tgt = rec["src"], rec["tgt"]
    if isinstance(src, str):
        src, tgt = [src], [tgt]
    msgs = [{"role": "system", "content": rec["system"]}] if rec.get("system") else []
    for q, a in zip(src, tgt):
        msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    return msgs


def turns_ids(tokenizer, template: str | None, messages: list[dict]) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, answer ids + EOS) per turn; the first prompt starts with BOS when the tokenizer has one.

    With a template, the prompt of turn i is what the template renders between the end of
    answer i-1 (after its EOS) and the start of answer i.
    """
    bos = [tokenizer.bos_token_id] if getattr(tokenizer, "bos_token_id", None) is not None else []
    eos_id = tokenizer.eos_token_id
    eos = tokenizer.eos_token or ""
    out = []
    consumed = ""
    sys_msgs = [m for m in messages if m["role"] == "system"]
    convo = [m for m in messages if m["role"] != "system"]
    for i in range(0, len(convo) - 1, 2):
        user, answer = convo[i], convo[i + 1]
        if template:
            upto_user = render(template, sys_msgs + convo[: i + 1], tokenizer)
            prompt_text = upto_user[len(consumed):]
            consumed = upto_user + answer["content"] + eos
        else:
            prompt_text = ("" if not sys_msgs or i else sys_msgs[0]["content"] + "\n") + user["content"]
        p = _ids(tokenizer, prompt_text)
        out.append(((bos if i == 0 else []) + p, _ids(tokenizer, answer["content"]) + [eos_id]))
    return out


def prompt_ids(tokenizer, template: str | None, messages: list[dict], src_length: int | None = None) -> list[int]:
    """Token ids of a conversation ending with a user message, ready for generation."""
    turns = turns_ids(tokenizer, template, messages + [{"role": "assistant", "content": ""}])
    ids: list[int] = []
    for p, a in turns[:-1]:
        ids += p + a
    ids += turns[-1][0]
    if src_length and len(ids) > src_length:
        ids = ids[-src_length:]
    return ids


def build_example(tokenizer, template: str | None, rec: dict, src_length: int, max_length: int, mask_prompt: bool = True) -> dict | None:
    """input_ids/labels for one record, labels already shifted left by one (PaddleNLP's loss does not shift).

    Returns None when nothing of the answer fits.
    """
    turns = turns_ids(tokenizer, template, messages_of(rec))
    # whole-turn truncation: drop earliest turns while the rest is too long
    while len(turns) > 1 and sum(len(p) + len(a) for p, a in turns) > max_length:
        turns = turns[1:]
    ids: list[int] = []
    labels: list[int] = []
    for k, (p, a) in enumerate(turns):
        if k == len(turns) - 1:
            budget_src = min(src_length, max_length - len(ids) - 1) if len(turns) == 1 else src_length
            if len(p) > budget_src:
                p = p[len(p) - budget_src:] if budget_src > 0 else []
            room = max_length - len(ids) - len(p)
            a = a[:room]
        ids += p + a
        labels += ([IGNORE] * len(p) if mask_prompt else p) + a
    if not a or len(ids) < 2:
        return None
    return {"input_ids": ids[:-1], "labels": labels[1:]}
