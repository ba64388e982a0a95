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
import os
from pathlib import Path

IGNORE = -100


def load_template(tokenizer, model_dir: str | Path | None = None, path: str | Path | None = None) -> str | None:
    """The jinja template: an explicit file, the tokenizer's own, or a legacy chat_template.json."""
    if path:
        text = Path(path).read_text(encoding="utf-8")
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            return text
        if isinstance(obj, dict) and isinstance(obj.get("chat_template"), str):
            return obj["chat_template"]
        if isinstance(obj, dict):  # never "no template" by accident: say what the file is
            raise ValueError(
                f"{path}: " + ("PaddleNLP's older chat template format (system / conversation / query), which the "
                               "studio does not read" if {"conversation", "query"} & set(obj) else
                               "a JSON object without a \"chat_template\" text")
                + "; give a jinja template: a text file, or {\"chat_template\": \"...\"}")
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


def no_template(value) -> bool:
    """Whether a run's ``chat_template`` value means "train without a template" to upstream: "none"
    in any case, or JSON null (upstream's parse_json_file_and_cmd_lines hands every JSON value to
    argparse as text, so null arrives as "None")."""
    return value is None or str(value).lower() == "none"


def template_for_run(tokenizer, tok_dir: str | Path, flat: dict) -> str | None:
    """The template a training config names, read as upstream's llm/run_finetune.py reads it
    (paddlenlp.trl.llm_utils.init_chat_template after AutoTokenizer.from_pretrained):

    - no ``chat_template`` key: the tokenizer's own template (tokenizer_config.json / chat_template.json);
    - "none" or null: no template (upstream sets ``tokenizer.chat_template = None``): the prompt is the
      bare text, BOS first, and the answer ends with EOS;
    - the model folder itself: the tokenizer's own;
    - another folder: its chat_template.json when it has one, else the tokenizer's own (upstream warns);
    - a file: that file; a path that is not there: the tokenizer's own (upstream warns; the studio's
      check refuses it before a run).
    """
    if "chat_template" not in flat:
        return load_template(tokenizer, tok_dir)
    value = flat["chat_template"]
    if no_template(value):
        return None
    if value == flat.get("model_name_or_path") or not str(value):
        return load_template(tokenizer, tok_dir)
    path = Path(str(value))
    if path.is_dir():
        if not (path / "chat_template.json").is_file():
            return load_template(tokenizer, tok_dir)  # upstream: a folder without one means the tokenizer's own
        path = path / "chat_template.json"
    if path.is_file():
        return load_template(tokenizer, path=path)
    # upstream warns and falls back to the tokenizer's own; the config check refuses it, so a run never
    # gets here from the studio, and never trains with a template nobody asked for
    raise FileNotFoundError(f"chat_template: no such file or folder {value!r} (from {os.getcwd()})")


def keep_with_tokenizer(tokenizer, template: str | None) -> None:
    """Make ``tokenizer.save_pretrained`` write the template training used (none: none), so chat,
    evaluation and the round-trip check of the saved model tokenize as training did. PaddleNLP
    writes tokenizer_config.json's chat_template from the tokenizer's init kwargs: clearing
    ``tokenizer.chat_template`` alone (what upstream does for "none") still saves the old one."""
    kwargs = getattr(tokenizer, "init_kwargs", None)
    if not isinstance(kwargs, dict):
        return
    if template:
        kwargs["chat_template"] = template
    else:
        kwargs.pop("chat_template", None)
        tokenizer.chat_template = None


_COMPILED: dict[str, object] = {}


def compiled(template: str):
    """The template compiled the way PaddleNLP compiles a tokenizer's chat template (a sandboxed
    jinja environment with trim_blocks, lstrip_blocks and keep_trailing_newline)."""
    tpl = _COMPILED.get(template)
    if tpl is None:
        from paddlenlp.transformers.tokenizer_utils import ChatTemplate

        tpl = _COMPILED[template] = ChatTemplate._compile_jinja_template(template)
    return tpl


def render(template: str, messages: list[dict], tokenizer, add_generation_prompt: bool = True) -> str:
    special = dict(getattr(tokenizer, "special_tokens_map", None) or {})
    special.setdefault("eos_token", tokenizer.eos_token or "")
    special.setdefault("bos_token", tokenizer.bos_token or "")
    return compiled(template).render(messages=messages, add_generation_prompt=add_generation_prompt, **special)


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


def round_texts(tokenizer, template: str, messages: list[dict]) -> list[tuple[str, str]]:
    """(prompt text, answer text) per round, as PaddleNLP's encode_chat_inputs cuts a conversation
    (llm/utils/data.py tokenize_rounds_example -> tokenizer_utils._encode_chat_inputs): a round's
    answer is what the template renders for it after its user turn (the answer, its end-of-text and
    whatever the template puts after it); the prompts are what lies between the answers when the
    whole conversation is rendered. A system message, which upstream cannot pass, leads every render.
    """
    sys_msgs = [m for m in messages if m["role"] == "system"]
    convo = [m for m in messages if m["role"] != "system"]
    answers, prompts = [], []
    whole = render(template, sys_msgs + convo, tokenizer, add_generation_prompt=False)
    for i in range(0, len(convo) - 1, 2):
        with_answer = render(template, sys_msgs + convo[i:i + 2], tokenizer, add_generation_prompt=False)
        without = render(template, sys_msgs + convo[i:i + 1], tokenizer, add_generation_prompt=True)
        answers.append(with_answer[len(without):])
    pos = 0
    for i, ans in enumerate(answers):
        at = whole.find(ans, pos) if ans else -1
        if at < 0:  # the template renders this round differently in context: fall back to the prefix
            upto = render(template, sys_msgs + convo[: 2 * i + 1], tokenizer, add_generation_prompt=True)
            at = len(upto)
        prompts.append(whole[pos:at])
        pos = at + len(ans)
    return list(zip(prompts, answers))


def turns_ids(tokenizer, template: str | None, messages: list[dict]) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, answer ids) per round, PaddleNLP's way.

    With a template: the round texts of :func:`round_texts`, each encoded without special tokens
    (no BOS: the template says what starts a conversation; the answer's end-of-text comes from the
    template). Without one: upstream's tokenize_example, the prompt encoded with the tokenizer's
    special tokens (BOS) and the answer followed by EOS; a conversation of several rounds is joined
    (upstream trains only its first round: see :func:`build_example`).
    """
    if template:
        return [(_ids(tokenizer, p), _ids(tokenizer, a)) for p, a in round_texts(tokenizer, template, messages)]
    bos = [tokenizer.bos_token_id] if getattr(tokenizer, "bos_token_id", None) is not None else []
    sys_msgs = [m for m in messages if m["role"] == "system"]
    convo = [m for m in messages if m["role"] != "system"]
    out = []
    for i in range(0, len(convo) - 1, 2):
        user, answer = convo[i], convo[i + 1]
        prompt_text = ("" if not sys_msgs or i else sys_msgs[0]["content"] + "\n") + user["content"]
        out.append(((bos if i == 0 else []) + _ids(tokenizer, prompt_text),
                    _ids(tokenizer, answer["content"]) + [tokenizer.eos_token_id]))
    return out


def prompt_ids(tokenizer, template: str | None, messages: list[dict], src_length: int | None = None) -> list[int]:
    """Token ids of a conversation ending with a user message, ready for generation: the earlier
    rounds as training saw them, then the last prompt up to where the answer starts."""
    ids: list[int] = []
    if template:
        done = messages[:-1]  # the system message and the complete rounds before the last question
        prefix = ""
        if any(m["role"] == "assistant" for m in done):
            for p, a in turns_ids(tokenizer, template, done):
                ids += p + a
            prefix = render(template, done, tokenizer, add_generation_prompt=False)
        whole = render(template, messages, tokenizer, add_generation_prompt=True)
        ids += _ids(tokenizer, whole[len(prefix):] if whole.startswith(prefix) else whole)
    else:
        turns = turns_ids(tokenizer, None, messages + [{"role": "assistant", "content": ""}])
        for p, a in turns[:-1]:
            ids += p + a
        ids += turns[-1][0]
    if src_length and len(ids) > src_length:
        ids = ids[-src_length:]
    return ids


def build_example(tokenizer, template: str | None, rec: dict, src_length: int, max_length: int, mask_prompt: bool = True) -> dict | None:
    """input_ids/labels for one record as PaddleNLP's llm/utils/data.py builds them, labels already
    shifted left by one (PaddleNLP's loss does not shift).

    With a template (tokenize_rounds_example): rounds are taken from the last one back while they
    fit in ``max_length``; only when the last round alone is too long is it cut, its prompt to
    ``src_length`` and its answer to what is left (keeping their beginnings). Without one
    (tokenize_example): only the first round, the prompt (BOS first) cut to ``src_length``, the
    answer to ``max_length`` less the prompt, EOS when the whole answer fits. The one deliberate
    difference: a record of which no answer token fits is dropped (it would train on nothing).
    """
    turns = turns_ids(tokenizer, template, messages_of(rec))
    if not turns:
        return None
    ids: list[int] = []
    labels: list[int] = []
    if template:
        for k in range(len(turns) - 1, -1, -1):
            p, a = turns[k]
            if len(ids) + len(p) + len(a) > max_length:
                if k == len(turns) - 1:
                    p = p[:src_length]
                    a = a[:max(max_length - len(p), 0)]
                    ids, labels = p + a, ([IGNORE] * len(p) if mask_prompt else p) + a
                break
            ids = p + a + ids
            labels = ([IGNORE] * len(p) if mask_prompt else p) + a + labels
    else:
        p, a = turns[0]
        p = p[:src_length]
        room = max_length - len(p)
        a = a[:-1]  # without the EOS turns_ids put there: upstream adds it only when the answer fits
        a = a[:room] + ([tokenizer.eos_token_id] if len(a) < room else [])
        ids, labels = p + a, ([IGNORE] * len(p) if mask_prompt else p) + a
    if len(ids) < 2 or all(x == IGNORE for x in labels[1:]):
        return None
    return {"input_ids": ids[:-1], "labels": labels[1:]}


def text_blocks(tokenizer, texts: list[str], max_length: int) -> list[dict]:
    """Continued pretraining on raw text: every document as BOS + text + EOS, all of them joined
    and cut into blocks of ``max_length`` tokens; every token is a target (labels are the next
    token, shifted left by one as build_example's are). The last, shorter block is kept."""
    bos = [tokenizer.bos_token_id] if getattr(tokenizer, "bos_token_id", None) is not None else []
    eos = [tokenizer.eos_token_id] if getattr(tokenizer, "eos_token_id", None) is not None else []
    stream: list[int] = []
    for text in texts:
        stream += bos + _ids(tokenizer, text) + eos
    out = []
    for start in range(0, max(len(stream) - 1, 0), max_length):
        window = stream[start:start + max_length + 1]
        if len(window) < 2:
            break
        out.append({"input_ids": window[:-1], "labels": window[1:]})
    return out
