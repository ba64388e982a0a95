"""Datasets: PaddleNLP's src/tgt JSON-lines layout, streaming validation, conversion, stats, import,
paged preview (:func:`preview_page`) and what a run records of its dataset (:func:`provenance`).
Mixing datasets is :mod:`core.data.mix`.

PaddleNLP's fine-tuning reads JSON lines ``{"src": ..., "tgt": ...}`` where each field is a
string (one turn) or a list of strings (multi-turn, same length). A dataset is one file, or a
folder with ``train.json``/``dev.json``, or ``train/*.json``/``dev/*.json``.

Every problem found is a :class:`Problem` with file, line, field, a stable ``code`` and
``params``; :data:`MESSAGES` holds the English text (the studio translates codes itself).
Validation streams the file line by line, never holding it in memory, and keeps going past
errors.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import json
import os
import random
import re
import shutil
import stat
import sys
import time
from array import array
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from core import workspace

# text: raw text for continued pretraining ({"text": ...} lines, or a .txt file: one document per line)
FORMATS = ("paddlenlp", "alpaca", "sharegpt", "messages", "text", "preference", "chosen_rejected", "kto")
PREFERENCE_FORMATS = ("preference", "chosen_rejected")  # pairs, for DPO
# kto: one answer a record, marked desirable (sort [1]) or undesirable (sort [0]), for KTO (the records
# of llm/alignment/kto/run_kto.py: {src, tgt, response: [answer], sort: [1 or 0]})
KTO_SORTS = (0, 1)
MAX_LINE_BYTES = 1_000_000
MAX_ERRORS = 50
BOM = b"\xef\xbb\xbf"

# English text for every problem code; ``{name}`` placeholders come from Problem.params.
MESSAGES = {
    "mixed_shapes": ("{strings} records have src/tgt strings and {lists} have lists: PaddleNLP's JSON loader "
                     "needs one shape per file (Column(/src) changed from string to array), so import writes "
                     "every record with lists (a one-turn list means the same as a string)"),
    "bom": "file starts with a UTF-8 byte order mark (BOM); it is skipped when reading",
    "crlf": "line ends with CRLF (\\r\\n); Windows line ends",
    "cr_line_ends": "the file ends lines with a bare CR (\\r, classic Mac line ends); each CR is read as a line break",
    "blank_line": "blank line",
    "line_too_long": "line is {length} bytes, longer than the limit of {limit} bytes; skipped",
    "not_utf8": "bytes that are not UTF-8 at byte {position}",
    "invalid_json": "invalid JSON: {detail} (column {column})",
    "not_object": "expected a JSON object, got {got}",
    "missing_field": "missing field",
    "wrong_type": "expected {expected}, got {got}",
    "turns_mismatch": "src has {src} turns but tgt has {tgt}",
    "mixed_types": "src and tgt must both be strings or both be lists",
    "empty_text": "empty text",
    "bad_role": "unknown role {role!r}; expected one of {expected}",
    "bad_order": "turns must alternate user then assistant; found {role!r} at position {index}",
    "no_assistant_reply": "conversation does not end with an assistant reply",
    "too_deep": "JSON nested too deeply to read (more than about {limit} levels)",
    "lone_surrogate": "text holds an unpaired UTF-16 surrogate escape (\\ud800-\\udfff) that cannot be written as UTF-8",
    "response_count": "expected a list of 2 answers (the two compared), got {got}",
    "sort_tie": "sort ranks both answers the same ({value}); one of them must be preferred",
    "kto_response_count": "expected a list of 1 answer (a KTO record holds one answer, marked by sort), got {got}",
    "kto_sort_value": ("expected [1] (desirable) or [0] (undesirable), got {value}: upstream's KTO loss counts only "
                       "1 and 0, and would skip this answer without a word"),
    "history_mismatch": "src has {src} turns, so tgt (the answers before the last turn) must have {expected}, got {tgt}",
    "no_prompt": "missing field: the prompt (one of prompt, question, instruction)",
    "array_too_large": "a JSON array file of {size} bytes is too large to read at once; convert it to JSON lines",
    "number_too_long": ("a number of {digits} digits at column {column}: Python's JSON reader refuses integers of more "
                        "than {limit} digits; write it as a string"),
    "empty_file": "no records: the file is empty (0 bytes)",
    "only_blank_lines": "no records: the file holds only blank lines ({lines})",
    "empty_array": "no records: the file is an empty JSON array",
    # dataset-level errors
    "name_empty": "dataset name is empty",
    "name_unsafe": "dataset name {name!r} is not allowed: use letters, digits, '-', '_' or '.', no path separators or '..'",
    "dataset_exists": "a dataset named {name!r} already exists",
    "not_found": "no such file or folder: {path}",
    "symlink_loop": ("{path} is a loop of symbolic links (following them leads back to a link already seen), not a "
                     "file or folder"),
    "dangling_link": "{path} is a symbolic link to {target}, which does not exist",
    "is_fifo": ("{path} is a FIFO (named pipe), not a regular file: it is not read (reading would wait for a writer); "
                "give a file or a folder"),
    "is_device": ("{path} is a device ({target}), not a regular file: it is not read (a device such as /dev/zero never "
                  "ends); give a file or a folder"),
    "is_socket": "{path} is a socket, not a regular file: give a file or a folder",
    "no_data_files": "no train.json/dev.json or train/*.json in {path}",
    "has_bad_records": "{bad} of {total} records have errors; fix them or allow skipping bad records",
    "no_records": "no usable records",
    "bad_dev_ratio": "dev ratio must be between 0 and 0.5, got {ratio}",
    "unknown_format": "unknown format {fmt!r}; expected auto or one of {expected}",
    "no_split": "{path} has no {split} split (it has: {splits})",
    "mix_too_few": "a mix needs at least 2 datasets, got {n}",
    "mix_same_part": "dataset {dataset!r} is named twice in the mix",
    "mix_bad_ratio": "ratio of {dataset!r} must be a number above 0 and at most {limit}, got {value}",
    "mix_bad_count": "record count of {dataset!r} must be a whole number of at least 1, got {value}",
    "mix_incompatible": ("cannot mix {a!r} ({a_kind}) with {b!r} ({b_kind}): a training set holds one kind of "
                         "record (chat src/tgt, preference pairs, KTO answers or raw text)"),
    "mix_empty_part": "dataset {dataset!r} has no usable training records",
}

# a BOM is skipped when reading (every record is still read): a warning, like Windows line ends
WARNING_CODES = {"crlf", "cr_line_ends", "blank_line", "bom", "mixed_shapes"}
LINE_ERRORS = ("line_too_long", "not_utf8", "invalid_json", "too_deep", "lone_surrogate", "number_too_long")
EMPTY_CODES = ("empty_file", "only_blank_lines", "empty_array")  # a training file without one record


def message(code: str, params: dict | None = None) -> str:
    template = MESSAGES.get(code, code)
    try:
        return template.format(**(params or {}))
    except (KeyError, IndexError, ValueError):
        return template


@dataclass
class Problem:
    """One thing wrong with one line of one file."""

    file: str
    line: int | None  # 1-based line; None for a whole-file problem or a JSON-array item
    field: str  # "src", "tgt[2]", "conversations[3].from", "" for the whole line
    code: str
    params: dict = field(default_factory=dict)

    @property
    def severity(self) -> str:
        return "warning" if self.code in WARNING_CODES else "error"

    @property
    def message(self) -> str:
        return message(self.code, self.params)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["severity"] = self.severity
        d["message"] = self.message
        return d


class DatasetError(Exception):
    """A dataset operation refused, with a code and params the studio can translate."""

    def __init__(self, code: str, **params):
        self.code = code
        self.params = params
        super().__init__(message(code, params))


class RecordError(Exception):
    def __init__(self, field: str, code: str, **params):
        self.field = field
        self.code = code
        self.params = params
        super().__init__(code)


# ---------------------------------------------------------------- layout


def path_problem(path: str | Path) -> tuple[str, dict]:
    """Why ``path`` is neither a regular file nor a folder, as (code, params): a symlink loop, a
    link to nothing, a FIFO, a device, a socket, or nothing there. Only ``stat`` is asked: the path
    is never opened (a FIFO would block the reader, /dev/zero never ends)."""
    p = str(path)
    try:
        st = os.stat(p)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "symlink_loop", {"path": p}
        if os.path.islink(p):
            try:
                target = os.readlink(p)
            except OSError:
                target = "?"
            return "dangling_link", {"path": p, "target": target}
        return "not_found", {"path": p}
    if stat.S_ISFIFO(st.st_mode):
        return "is_fifo", {"path": p}
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        return "is_device", {"path": p, "target": os.path.realpath(p)}
    if stat.S_ISSOCK(st.st_mode):
        return "is_socket", {"path": p}
    return "not_found", {"path": p}


def _refuse_path(path) -> DatasetError:
    code, params = path_problem(path)
    return DatasetError(code, **params)


def resolve_files(path: str | Path) -> dict[str, list[Path]]:
    """Map split name to files for a file or a PaddleNLP dataset folder.

    A single file is returned as split ``"data"``. A path that is not a regular file or folder (a
    FIFO, a device, a symlink loop) is refused with what it is, never opened.
    """
    p = Path(path)
    if p.is_file():
        return {"data": [p]}
    if not p.is_dir():
        raise _refuse_path(p)
    out: dict[str, list[Path]] = {}
    for split in ("train", "dev"):
        single = p / f"{split}.json"
        folder = p / split
        files = []
        if single.is_file():
            files.append(single)
        elif os.path.lexists(single):
            raise _refuse_path(single)
        if folder.is_dir():
            for f in sorted(folder.glob("*.json")):
                if f.is_file():
                    files.append(f)
                elif not f.is_dir():
                    raise _refuse_path(f)
        if files:
            out[split] = files
    if "train" not in out:
        raise DatasetError("no_data_files", path=str(p))
    return out


# ---------------------------------------------------------------- record schemas


def _is_blank(s: str) -> bool:
    return not s.strip()


def _check_text(value, name: str) -> None:
    if isinstance(value, str):
        if _is_blank(value):
            raise RecordError(name, "empty_text")
        return
    raise RecordError(name, "wrong_type", expected="string", got=type(value).__name__)


def check_src_tgt(rec) -> tuple[int, list[RecordError]]:
    """Check one PaddleNLP record; returns (turns, problems)."""
    problems: list[RecordError] = []
    if not isinstance(rec, dict):
        return 0, [RecordError("", "not_object", got=type(rec).__name__)]
    turns = {}
    for name in ("src", "tgt"):
        if name not in rec:
            problems.append(RecordError(name, "missing_field"))
            continue
        v = rec[name]
        if isinstance(v, str):
            if _is_blank(v):
                problems.append(RecordError(name, "empty_text"))
            turns[name] = 1
        elif isinstance(v, list):
            if not v:
                problems.append(RecordError(name, "empty_text"))
            for i, item in enumerate(v):
                if not isinstance(item, str):
                    problems.append(RecordError(f"{name}[{i}]", "wrong_type", expected="string", got=type(item).__name__))
                elif _is_blank(item):
                    problems.append(RecordError(f"{name}[{i}]", "empty_text"))
            turns[name] = len(v)
        else:
            problems.append(
                RecordError(name, "wrong_type", expected="string or list of strings", got=type(v).__name__)
            )
    if "src" in turns and "tgt" in turns:
        if isinstance(rec["src"], list) != isinstance(rec["tgt"], list):
            problems.append(RecordError("src/tgt", "mixed_types"))
        elif turns["src"] != turns["tgt"]:
            problems.append(RecordError("src/tgt", "turns_mismatch", src=turns["src"], tgt=turns["tgt"]))
    return max(turns.values(), default=0), problems


_USER_ROLES = {"human": "user", "user": "user"}
_ASSISTANT_ROLES = {"gpt": "assistant", "assistant": "assistant", "chatgpt": "assistant", "bot": "assistant", "model": "assistant"}


def _pairs_from_turns(turns: list[tuple[str, str, str]]) -> tuple[list[str], list[str], str | None]:
    """turns: (role, text, field) -> src list, tgt list, system prompt."""
    system = None
    src: list[str] = []
    tgt: list[str] = []
    expect = "user"
    for index, (role, text, fname) in enumerate(turns):
        if role == "system":
            if index != 0:
                raise RecordError(fname, "bad_order", role=role, index=index)
            system = text
            continue
        if role != expect:
            raise RecordError(fname, "bad_order", role=role, index=index)
        if _is_blank(text):
            raise RecordError(fname.rsplit(".", 1)[0], "empty_text")
        (src if role == "user" else tgt).append(text)
        expect = "assistant" if role == "user" else "user"
    if not tgt or len(src) != len(tgt):
        raise RecordError("", "no_assistant_reply")
    return src, tgt, system


def _from_alpaca(rec: dict) -> dict:
    for name in ("instruction", "output"):
        if name not in rec:
            raise RecordError(name, "missing_field")
        _check_text(rec[name], name)
    inp = rec.get("input") or ""
    if not isinstance(inp, str):
        raise RecordError("input", "wrong_type", expected="string", got=type(inp).__name__)
    prompt = rec["instruction"] + ("\n" + inp if inp.strip() else "")
    src, tgt = [prompt], [rec["output"]]
    history = rec.get("history") or []
    if not isinstance(history, list):
        raise RecordError("history", "wrong_type", expected="list of [question, answer]", got=type(history).__name__)
    hs, ht = [], []
    for i, pair in enumerate(history):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            raise RecordError(f"history[{i}]", "wrong_type", expected="[question, answer]", got=type(pair).__name__)
        hs.append(pair[0])
        ht.append(pair[1])
    out: dict = {"src": hs + src if hs else prompt, "tgt": ht + tgt if hs else rec["output"]}
    if isinstance(rec.get("system"), str) and rec["system"].strip():
        out["system"] = rec["system"]
    return out


def _from_sharegpt(rec: dict) -> dict:
    conv = rec.get("conversations")
    if conv is None:
        raise RecordError("conversations", "missing_field")
    if not isinstance(conv, list) or not conv:
        raise RecordError("conversations", "wrong_type", expected="non-empty list", got=type(conv).__name__)
    turns = []
    for i, t in enumerate(conv):
        f = f"conversations[{i}]"
        if not isinstance(t, dict):
            raise RecordError(f, "wrong_type", expected="object with from/value", got=type(t).__name__)
        for k in ("from", "value"):
            if k not in t:
                raise RecordError(f"{f}.{k}", "missing_field")
        if not isinstance(t["value"], str):
            raise RecordError(f"{f}.value", "wrong_type", expected="string", got=type(t["value"]).__name__)
        r = str(t["from"]).lower()
        role = _USER_ROLES.get(r) or _ASSISTANT_ROLES.get(r) or ("system" if r == "system" else None)
        if role is None:
            raise RecordError(f"{f}.from", "bad_role", role=t["from"], expected="human, gpt, system")
        turns.append((role, t["value"], f"{f}.value"))
    src, tgt, system = _pairs_from_turns(turns)
    if system is None and isinstance(rec.get("system"), str) and rec["system"].strip():
        system = rec["system"]
    return _pack(src, tgt, system)


def _from_messages(rec: dict) -> dict:
    msgs = rec.get("messages")
    if msgs is None:
        raise RecordError("messages", "missing_field")
    if not isinstance(msgs, list) or not msgs:
        raise RecordError("messages", "wrong_type", expected="non-empty list", got=type(msgs).__name__)
    turns = []
    for i, m in enumerate(msgs):
        f = f"messages[{i}]"
        if not isinstance(m, dict):
            raise RecordError(f, "wrong_type", expected="object with role/content", got=type(m).__name__)
        for k in ("role", "content"):
            if k not in m:
                raise RecordError(f"{f}.{k}", "missing_field")
        if not isinstance(m["content"], str):
            raise RecordError(f"{f}.content", "wrong_type", expected="string", got=type(m["content"]).__name__)
        role = m["role"]
        if role not in ("system", "user", "assistant"):
            raise RecordError(f"{f}.role", "bad_role", role=role, expected="system, user, assistant")
        turns.append((role, m["content"], f"{f}.content"))
    src, tgt, system = _pairs_from_turns(turns)
    return _pack(src, tgt, system)


def _pack(src: list[str], tgt: list[str], system: str | None) -> dict:
    out: dict = {"src": src[0], "tgt": tgt[0]} if len(src) == 1 else {"src": src, "tgt": tgt}
    if system and system.strip():
        out["system"] = system
    return out


_CONVERTERS = {"alpaca": _from_alpaca, "sharegpt": _from_sharegpt, "messages": _from_messages}


def check_text_record(rec) -> list[RecordError]:
    """Problems of one raw-text record ({"text": a non-blank string})."""
    if not isinstance(rec, dict):
        return [RecordError("", "not_object", got=type(rec).__name__)]
    if "text" not in rec:
        return [RecordError("text", "missing_field")]
    if not isinstance(rec["text"], str):
        return [RecordError("text", "wrong_type", expected="a string", got=type(rec["text"]).__name__)]
    if _is_blank(rec["text"]):
        return [RecordError("text", "empty_text")]
    return []


def check_preference_record(rec) -> list[RecordError]:
    """Problems of one preference record in PaddleNLP's DPO format: ``src`` the user turns (a
    string or a list), ``tgt`` the answers before the last turn (len(src) - 1), ``response`` the two
    compared answers to the last turn, ``sort`` their ranks (higher is better, not equal)."""
    if not isinstance(rec, dict):
        return [RecordError("", "not_object", got=type(rec).__name__)]
    problems = _history_problems(rec)
    resp = rec.get("response")
    if "response" not in rec:
        problems.append(RecordError("response", "missing_field"))
    elif not isinstance(resp, list) or len(resp) != 2:
        problems.append(RecordError("response", "response_count",
                                    got=f"{len(resp)} items" if isinstance(resp, list) else type(resp).__name__))
    else:
        for i, item in enumerate(resp):
            try:
                _check_text(item, f"response[{i}]")
            except RecordError as e:
                problems.append(e)
    sort = rec.get("sort")
    if "sort" not in rec:
        problems.append(RecordError("sort", "missing_field"))
    elif (not isinstance(sort, list) or len(sort) != 2
          or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in sort)):
        problems.append(RecordError("sort", "wrong_type", expected="a list of 2 numbers (higher = better)",
                                    got=json.dumps(sort)[:40]))
    elif sort[0] == sort[1]:
        problems.append(RecordError("sort", "sort_tie", value=sort[0]))
    return problems


def check_kto_record(rec) -> list[RecordError]:
    """Problems of one KTO record (llm/alignment/kto/run_kto.py's data): ``src`` and ``tgt`` as in a
    preference record, ``response`` a list of the one answer to the last turn, ``sort`` [1] when that
    answer is desirable, [0] when undesirable. Upstream's loss sorts answers by ``sort == 1`` and
    ``sort == 0``: any other value would drop the answer from the loss silently, so it is refused here."""
    if not isinstance(rec, dict):
        return [RecordError("", "not_object", got=type(rec).__name__)]
    problems = _history_problems(rec)
    resp = rec.get("response")
    if "response" not in rec:
        problems.append(RecordError("response", "missing_field"))
    elif not isinstance(resp, list) or len(resp) != 1:
        problems.append(RecordError("response", "kto_response_count",
                                    got=f"{len(resp)} items" if isinstance(resp, list) else type(resp).__name__))
    else:
        try:
            _check_text(resp[0], "response[0]")
        except RecordError as e:
            problems.append(e)
    sort = rec.get("sort")
    if "sort" not in rec:
        problems.append(RecordError("sort", "missing_field"))
    elif (not isinstance(sort, list) or len(sort) != 1
          or not isinstance(sort[0], (int, float)) or isinstance(sort[0], bool)):
        problems.append(RecordError("sort", "wrong_type", expected="a list of 1 number: [1] (desirable) or [0] "
                                    "(undesirable)", got=json.dumps(sort)[:40]))
    elif sort[0] not in KTO_SORTS:
        problems.append(RecordError("sort", "kto_sort_value", value=json.dumps(sort)[:40]))
    return problems


def normalize_kto(rec) -> dict:
    """A checked KTO record (src and tgt as lists, sort as [1] or [0]); raises RecordError."""
    problems = check_kto_record(rec)
    if problems:
        raise problems[0]
    src = [rec["src"]] if isinstance(rec["src"], str) else list(rec["src"])
    tgt = rec.get("tgt", [])
    tgt = [tgt] if isinstance(tgt, str) else list(tgt)
    out = {"src": src, "tgt": tgt, "response": [rec["response"][0]], "sort": [int(rec["sort"][0])]}
    if isinstance(rec.get("system"), str):
        out["system"] = rec["system"]
    return out


def _history_problems(rec: dict) -> list[RecordError]:
    """Problems of a preference or KTO record's ``src`` (the user turns) and ``tgt`` (the answers
    before the last turn: one fewer)."""
    problems: list[RecordError] = []
    src = rec.get("src")
    if "src" not in rec:
        problems.append(RecordError("src", "missing_field"))
        src = None
    elif isinstance(src, str):
        if _is_blank(src):
            problems.append(RecordError("src", "empty_text"))
        src = [src]
    elif isinstance(src, list) and src:
        for i, item in enumerate(src):
            try:
                _check_text(item, f"src[{i}]")
            except RecordError as e:
                problems.append(e)
    else:
        problems.append(RecordError("src", "wrong_type", expected="a string or a non-empty list of strings",
                                    got=type(src).__name__ if not isinstance(src, list) else "an empty list"))
        src = None
    tgt = rec.get("tgt", [])
    if isinstance(tgt, str):
        tgt = [tgt]
    if not isinstance(tgt, list):
        problems.append(RecordError("tgt", "wrong_type", expected="a list of strings", got=type(tgt).__name__))
    else:
        for i, item in enumerate(tgt):
            try:
                _check_text(item, f"tgt[{i}]")
            except RecordError as e:
                problems.append(e)
        if src is not None and len(tgt) != len(src) - 1:
            problems.append(RecordError("src/tgt", "history_mismatch", src=len(src), expected=len(src) - 1, tgt=len(tgt)))
    return problems


def _preference(src: list[str], tgt: list[str], chosen: str, rejected: str) -> dict:
    return {"src": list(src), "tgt": list(tgt), "response": [chosen, rejected], "sort": [1, 0]}


def _from_chosen_rejected(rec: dict) -> dict:
    """{prompt|question|instruction(+input), chosen, rejected} with strings, or chosen/rejected as
    whole conversations (lists of {role, content} messages ending with the compared answer, the
    form of Anthropic HH and UltraFeedback) -> a PaddleNLP preference record."""
    chosen, rejected = rec.get("chosen"), rec.get("rejected")
    for name, v in (("chosen", chosen), ("rejected", rejected)):
        if v is None:
            raise RecordError(name, "missing_field")
    if isinstance(chosen, list) and isinstance(rejected, list):
        convs = []
        for name, conv in (("chosen", chosen), ("rejected", rejected)):
            try:
                r = _from_messages({"messages": conv})
            except RecordError as e:
                raise RecordError(name + e.field[len("messages"):], e.code, **e.params) from None
            src = [r["src"]] if isinstance(r["src"], str) else r["src"]
            tgt = [r["tgt"]] if isinstance(r["tgt"], str) else r["tgt"]
            convs.append((src, tgt))
        (src_c, tgt_c), (src_r, tgt_r) = convs
        if src_c != src_r or tgt_c[:-1] != tgt_r[:-1]:
            raise RecordError("rejected", "wrong_type", expected="the same conversation as chosen up to its last answer",
                              got="a different conversation")
        return _preference(src_c, tgt_c[:-1], tgt_c[-1], tgt_r[-1])
    prompt = next((rec[k] for k in ("prompt", "question", "instruction") if k in rec), None)
    if prompt is None:
        raise RecordError("prompt", "no_prompt")
    if isinstance(prompt, str) and isinstance(rec.get("input"), str) and rec["input"].strip():
        prompt = prompt + "\n" + rec["input"]
    return _preference([prompt] if isinstance(prompt, str) else prompt, [], chosen, rejected)


def is_preference_dataset(records: list[dict]) -> bool:
    return bool(records) and "response" in records[0]


def is_text_dataset(records: list[dict]) -> bool:
    return bool(records) and "text" in records[0] and "src" not in records[0]


def detect_record_format(rec) -> str | None:
    if not isinstance(rec, dict):
        return None
    if "response" in rec and "src" in rec:  # one answer: KTO's; two (or a broken pair): DPO's
        resp = rec["response"]
        return "kto" if isinstance(resp, list) and len(resp) == 1 else "preference"
    if "chosen" in rec and "rejected" in rec:
        return "chosen_rejected"
    if "src" in rec or "tgt" in rec:
        return "paddlenlp"
    if isinstance(rec.get("text"), str):
        return "text"
    if "messages" in rec:
        return "messages"
    if "conversations" in rec:
        return "sharegpt"
    if "instruction" in rec or "output" in rec:
        return "alpaca"
    return None


def normalize_preference(rec, fmt: str = "preference") -> dict:
    """A checked preference record (src and tgt as lists, the preferred answer first); raises RecordError."""
    if fmt == "chosen_rejected":
        if not isinstance(rec, dict):
            raise RecordError("", "not_object", got=type(rec).__name__)
        rec = _from_chosen_rejected(rec)
    problems = check_preference_record(rec)
    if problems:
        raise problems[0]
    src = [rec["src"]] if isinstance(rec["src"], str) else list(rec["src"])
    tgt = rec.get("tgt", [])
    tgt = [tgt] if isinstance(tgt, str) else list(tgt)
    a, b = rec["response"]
    if rec["sort"][1] > rec["sort"][0]:
        a, b = b, a
    out = _preference(src, tgt, a, b)
    if isinstance(rec.get("system"), str):
        out["system"] = rec["system"]
    return out


def to_src_tgt(rec, fmt: str) -> dict:
    """Convert one parsed record of ``fmt`` to a checked PaddleNLP record; raises RecordError."""
    if fmt == "text":
        problems = check_text_record(rec)
        if problems:
            raise problems[0]
        return {"text": rec["text"]}
    if fmt in PREFERENCE_FORMATS:
        return normalize_preference(rec, fmt)
    if fmt == "kto":
        return normalize_kto(rec)
    if fmt != "paddlenlp":
        if not isinstance(rec, dict):
            raise RecordError("", "not_object", got=type(rec).__name__)
        rec = _CONVERTERS[fmt](rec)
    _, problems = check_src_tgt(rec)
    if problems:
        raise problems[0]
    return rec


# ---------------------------------------------------------------- streaming reader


def _first_byte(path: Path) -> bytes:
    with open(path, "rb") as f:
        head = f.read(4096)
    return head.removeprefix(BOM).lstrip()[:1]


def _is_json_array(path: Path) -> bool:
    return _first_byte(path) == b"["


MAX_ARRAY_BYTES = 256 * 1024 * 1024
_SCAN_ONCE = json.JSONDecoder().scan_once


def _iter_parsed(path: Path, max_line_bytes: int, problems: list):
    """Yield (line_number, parsed_value) for each parseable line; append line-level problems.

    ``problems`` receives (line, field, code, params) tuples. A JSON-array file yields each item
    keyed (line it starts on, "[index]").
    """
    fname = str(path)
    if path.suffix.lower() == ".txt":
        yield from _text_lines(path, problems)
        return
    if _is_json_array(path):
        size = path.stat().st_size
        if size > MAX_ARRAY_BYTES:
            problems.append((None, "", "array_too_large", {"size": size}))
            return
        data = path.read_bytes()
        if data.startswith(BOM):
            problems.append((1, "", "bom", {}))
            data = data[3:]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            problems.append((data.count(b"\n", 0, e.start) + 1, "", "not_utf8", {"position": e.start}))
            return
        yield from _array_items(text, problems)
        return
    scan = _SCAN_ONCE
    limit = max_line_bytes + 2
    with open(fname, "rb") as f:
        readline = f.readline
        number = 0
        split = None  # once a bare CR (classic Mac line end) is seen: the rest, split at every line end
        while True:
            if split is None:
                raw = readline(limit)  # bounded: a huge line never sits in memory whole
                if not raw:
                    return
                if b"\r" in raw and (len(raw) == limit or _BARE_CR.search(raw)):
                    split = _split_lines(f, raw, limit)
                    said_cr = False
                    continue
                if len(raw) == limit and raw[-1:] != b"\n":
                    length = len(raw)
                    while True:
                        chunk = readline(1 << 20)
                        length += len(chunk)
                        if not chunk or chunk[-1:] == b"\n":
                            break
                    raw = None
            else:
                raw, length = next(split, (b"", 0))
                if raw == b"":
                    return
                if not said_cr and raw is not None and raw[-1:] == b"\r":
                    said_cr = True
                    problems.append((number + 1, "", "cr_line_ends", {}))
            number += 1
            if raw is None:
                problems.append((number, "", "line_too_long", {"length": length, "limit": max_line_bytes}))
                continue
            if number == 1 and raw.startswith(BOM):
                problems.append((1, "", "bom", {}))
                raw = raw[3:]
            if raw.endswith(b"\r\n"):
                problems.append((number, "", "crlf", {}))
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                problems.append((number, "", "not_utf8", {"position": e.start + 1}))
                continue
            try:
                # scan_once is json.loads without its per-call wrapper; it needs no leading
                # whitespace and we check that only whitespace follows the value.
                value, end = scan(text, 0)
                if end != len(text) and not text[end:].isspace():
                    raise json.JSONDecodeError("Extra data", text, end)
            except StopIteration:
                if not text.strip():
                    problems.append((number, "", "blank_line", {}))
                    continue
                # leading whitespace, or not JSON at all: let json.loads give its own message
                try:
                    value = json.loads(text)
                except json.JSONDecodeError as e2:
                    problems.append((number, "", "invalid_json", {"detail": e2.msg, "column": e2.colno}))
                    continue
                except ValueError:
                    problems.append((number, "", "number_too_long", _long_number(text)))
                    continue
            except json.JSONDecodeError as e:
                problems.append((number, "", "invalid_json", {"detail": e.msg, "column": e.colno}))
                continue
            except RecursionError:
                problems.append((number, "", "too_deep", {"limit": sys.getrecursionlimit()}))
                continue
            except ValueError:  # int() past sys.get_int_max_str_digits(): "Exceeds the limit (4300 digits)"
                problems.append((number, "", "number_too_long", _long_number(text)))
                continue
            if "\\u" in text and _has_surrogate(value):
                problems.append((number, "", "lone_surrogate", {}))
                continue
            yield number, value


# a CR not followed by LF: a classic-Mac line end. JSON cannot hold a raw CR inside a string, so a
# CR always ends a line of JSON lines; splitting there is safe.
_BARE_CR = re.compile(rb"\r(?!\n)")
_AFTER_BARE_CR = re.compile(rb"(?<=\r)(?!\n)")
_EOL = re.compile(rb"\r\n|\r|\n")


def _split_lines(f, buf: bytes, limit: int):
    """The rest of a file (``buf`` read already) split at LF, CRLF and bare CR, in bounded chunks."""
    skipping = 0  # > 0: inside a line too long to keep, this many bytes of it so far
    eof = False
    while True:
        pos = 0
        while True:
            m = _EOL.search(buf, pos)
            if m is None or (not eof and m.end() == len(buf) and m.group() == b"\r"):  # CR: LF may follow
                break
            line = buf[pos:m.end()]
            pos = m.end()
            if skipping:
                yield None, skipping + len(line)
                skipping = 0
            elif len(line) >= limit:
                yield None, len(line)
            else:
                yield line, 0
        rest = buf[pos:]
        if skipping or len(rest) >= limit:
            skipping += len(rest)
            rest = b""
        if eof:
            if skipping:
                yield None, skipping
            elif rest:
                yield rest, 0
            return
        chunk = f.read(1 << 20)
        eof = not chunk
        buf = rest + chunk


def _long_number(text: str) -> dict:
    """Where the over-long integer of a line is, and how long."""
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300
    m = re.search(r"\d{%d,}" % (limit + 1), text)
    return {"digits": len(m.group()) if m else limit + 1, "column": m.start() + 1 if m else 1, "limit": limit}


def _text_lines(path: Path, problems: list):
    """A plain text file: one document per non-blank line, as {"text": line}."""
    with open(path, "rb") as f:
        lines = (piece for raw in f for piece in (_AFTER_BARE_CR.split(raw) if b"\r" in raw else (raw,)) if piece)
        for number, raw in enumerate(lines, 1):
            if number == 1 and raw.startswith(BOM):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                problems.append((number, "", "not_utf8", {"position": e.start + 1}))
                continue
            if text.strip():
                yield number, {"text": text}


def _has_surrogate(value) -> bool:
    """Whether any string in a parsed JSON value holds an unpaired surrogate (from a \\udXXX escape)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


def _array_items(text: str, problems: list):
    """Yield (line, item) for each item of a JSON-array file, with the line where the item starts."""
    ws = " \t\r\n"
    n = len(text)
    pos = 0
    while pos < n and text[pos] in ws:
        pos += 1
    pos += 1  # the "["
    line, counted = 1, 0

    def line_at(i):
        nonlocal line, counted
        line += text.count("\n", counted, i)
        counted = i
        return line

    def bad(i, msg):
        ln = line_at(i)
        col = i - (text.rfind("\n", 0, i) + 1) + 1
        problems.append((ln, "", "invalid_json", {"detail": msg, "column": col}))

    first, index = True, -1
    while True:
        while pos < n and text[pos] in ws:
            pos += 1
        if pos >= n:
            return bad(pos, "the array is not closed with ]")
        if text[pos] == "]":
            rest = text[pos + 1:]
            if rest.strip():
                bad(pos + 1 + (len(rest) - len(rest.lstrip())), "Extra data")
            return
        if not first:
            if text[pos] != ",":
                return bad(pos, "Expecting ',' delimiter")
            pos += 1
            while pos < n and text[pos] in ws:
                pos += 1
        first = False
        index += 1
        start = pos
        try:
            value, pos = _SCAN_ONCE(text, pos)
        except StopIteration:
            return bad(start, "Expecting value")
        except json.JSONDecodeError as e:
            return bad(e.pos, e.msg)
        except RecursionError:
            problems.append((line_at(start), f"[{index}]", "too_deep", {"limit": sys.getrecursionlimit()}))
            return
        except ValueError:  # an integer longer than Python reads (sys.get_int_max_str_digits)
            where = _long_number(text[start:start + (64 << 20)])
            at = start + where["column"] - 1
            where["column"] = at - text.rfind("\n", 0, at)
            problems.append((line_at(at), f"[{index}]", "number_too_long", where))
            return
        ln = line_at(start)
        if "\\u" in text[start:pos] and _has_surrogate(value):
            problems.append((ln, f"[{index}]", "lone_surrogate", {}))
            continue
        yield (ln, f"[{index}]"), value


def _where(key) -> tuple[int | None, str]:
    """A yielded key is a line number, or (line, "[i]") for a JSON-array item."""
    if isinstance(key, tuple):
        return key
    return key, ""


_ITEM_FIELD = re.compile(r"\[(\d+)\](?:\.(.*))?\Z", re.S)


def split_item_field(fld: str) -> tuple[int | None, str]:
    """A problem's field as (JSON-array item index, the field inside the item): "[61]" -> (61, ""),
    "[1].tgt" -> (1, "tgt"), "tgt" -> (None, "tgt") (a JSON-lines record has no item index)."""
    m = _ITEM_FIELD.match(fld or "")
    if m is None:
        return None, fld or ""
    return int(m.group(1)), m.group(2) or ""


def _join_field(prefix: str, name: str) -> str:
    if not prefix:
        return name
    return f"{prefix}.{name}" if name else prefix


# ---------------------------------------------------------------- validation


@dataclass
class Report:
    """Validation result for one or more files."""

    files: list[str] = field(default_factory=list)
    format: str | None = None
    records: int = 0
    good: int = 0
    bad: int = 0
    warnings: int = 0
    duplicates: int = 0
    multi_turn: int = 0
    list_records: int = 0  # good records whose src/tgt are lists (the rest have strings)
    with_system: int = 0
    bytes: int = 0
    seconds: float = 0.0
    by_code: dict = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    problems_omitted: int = 0
    duplicate_examples: list = field(default_factory=list)  # [file, line, first_file, first_line]

    @property
    def ok(self) -> bool:
        return self.bad == 0 and self.good > 0 and not any(
            p.severity == "error" and p.line is None for p in self.problems
        )

    def to_dict(self) -> dict:
        d = asdict(self)
        d["problems"] = [p.to_dict() for p in self.problems]
        d["ok"] = self.ok
        return d


def detect_format(path: str | Path, max_line_bytes: int = MAX_LINE_BYTES, probe: int = 20) -> str | None:
    """Guess the format from the first parseable records of a file or folder."""
    files = [f for fs in resolve_files(path).values() for f in fs]
    if files and all(f.suffix.lower() == ".txt" for f in files):
        return "text"
    scratch: list = []
    for f in files:
        for n, (_, value) in enumerate(_iter_parsed(f, max_line_bytes, scratch)):
            fmt = detect_record_format(value)
            if fmt:
                return fmt
            if n >= probe:
                break
    return None


def validate(
    path: str | Path,
    fmt: str = "auto",
    max_errors: int = MAX_ERRORS,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Report:
    """Stream-validate a file or dataset folder; every problem names file, line and field."""
    t0 = time.perf_counter()
    groups = resolve_files(path)
    files = [f for fs in groups.values() for f in fs]
    if fmt == "auto":
        fmt = detect_format(path, max_line_bytes) or "paddlenlp"
    elif fmt not in FORMATS:
        raise DatasetError("unknown_format", fmt=fmt, expected=", ".join(FORMATS))
    rep = Report(files=[str(f) for f in files], format=fmt)
    hashes = array("q")  # one hash per good record, for duplicate counting at the end
    lines = array("q")  # the line of each hash (0 for a JSON-array item)
    file_starts = []  # index into hashes where each file begins
    convert = None if fmt in ("paddlenlp", "text", "kto", *PREFERENCE_FORMATS) else _CONVERTERS[fmt]

    def add(fname, line, fld, code, params):
        rep.by_code[code] = rep.by_code.get(code, 0) + 1
        if code in WARNING_CODES:
            rep.warnings += 1
            if rep.by_code[code] > 1:  # list a warning once; counts are in by_code
                return
        if len(rep.problems) < max_errors:
            rep.problems.append(Problem(fname, line, fld, code, params))
        else:
            rep.problems_omitted += 1

    str_ = str
    records_in: dict = {}  # file -> records read from it (good, bad and unparseable lines)
    for f in files:
        fname = str(f)
        rep.bytes += f.stat().st_size
        file_starts.append(len(hashes))
        records_before = rep.records
        line_problems: list = []
        flushed = 0
        for key, value in _iter_parsed(f, max_line_bytes, line_problems):
            if len(line_problems) != flushed:  # line-level problems before this record, in order
                for lp in line_problems[flushed:]:
                    _count_bad_line(rep, lp)
                    add(fname, *lp)
                flushed = len(line_problems)
            rep.records += 1
            if fmt in PREFERENCE_FORMATS or fmt == "kto":
                line, prefix = _where(key)
                if fmt == "kto":  # every problem of the record, each with its field
                    errs = check_kto_record(value)
                    rec = None if errs else normalize_kto(value)
                else:
                    try:
                        rec = normalize_preference(value, fmt)
                        errs = []
                    except RecordError as e:
                        errs = [e]
                if fmt == "preference" and isinstance(value, dict) and not errs:
                    errs = check_preference_record(value)
                if errs:
                    rep.bad += 1
                    for e in errs:
                        add(fname, line, _join_field(prefix, e.field), e.code, e.params)
                else:
                    rep.good += 1
                    rep.list_records += 1
                    if len(rec["src"]) > 1:
                        rep.multi_turn += 1
                    hashes.append(hash((tuple(rec["src"]), tuple(rec["tgt"]), tuple(rec["response"]), tuple(rec["sort"]))))
                    lines.append(line or 0)
                continue
            if fmt == "text":
                errs = check_text_record(value)
                line, prefix = _where(key)
                if errs:
                    rep.bad += 1
                    for e in errs:
                        add(fname, line, _join_field(prefix, e.field), e.code, e.params)
                else:
                    rep.good += 1
                    hashes.append(hash(value["text"]))
                    lines.append(line or 0)
                continue
            # fast path: a plain single-turn record with two non-blank strings
            if convert is None and type(value) is dict:
                src = value.get("src")
                tgt = value.get("tgt")
                if type(src) is str_ and type(tgt) is str_ and src and tgt and not src.isspace() and not tgt.isspace():
                    rep.good += 1
                    if "system" in value:
                        rep.with_system += 1
                    hashes.append(hash((src, tgt)))
                    lines.append(_where(key)[0] or 0)
                    continue
                if (
                    type(src) is list and type(tgt) is list and len(src) == len(tgt) > 0
                    and _all_text(src) and _all_text(tgt)
                ):
                    rep.good += 1
                    rep.list_records += 1
                    if len(src) > 1:
                        rep.multi_turn += 1
                    if "system" in value:
                        rep.with_system += 1
                    hashes.append(hash((tuple(src), tuple(tgt))))
                    lines.append(_where(key)[0] or 0)
                    continue
            line, prefix = _where(key)
            try:
                rec = value if convert is None else (convert(value) if isinstance(value, dict) else _not_object(value))
                turns, errs = check_src_tgt(rec)
            except RecordError as e:
                errs = [e]
                turns = 0
            if errs:
                rep.bad += 1
                for e in errs:
                    add(fname, line, _join_field(prefix, e.field), e.code, e.params)
                continue
            rep.good += 1
            src, tgt = rec["src"], rec["tgt"]
            rep.list_records += isinstance(src, list)
            if turns > 1 or isinstance(src, list) and len(src) > 1:
                rep.multi_turn += 1
            if "system" in rec:
                rep.with_system += 1
            hashes.append(
                hash((src if isinstance(src, str) else tuple(src), tgt if isinstance(tgt, str) else tuple(tgt)))
            )
            lines.append(line or 0)
        for lp in line_problems[flushed:]:
            _count_bad_line(rep, lp)
            add(fname, *lp)
        records_in[fname] = rep.records - records_before
    # what training reads holds no record at all (blank lines only, or nothing): the run would stop
    # at its start ("num_samples=0"), so the file is refused here, by name
    trains = [f for split, fs in groups.items() if split in ("train", "data") for f in fs]
    if trains and not sum(records_in.get(str(f), 0) for f in trains):
        for f in trains:
            why = empty_reason(f)
            if why:
                add(str(f), None, "", *why)
    if 0 < rep.list_records < rep.good:
        add(str(files[0]) if files else str(path), None, "src", "mixed_shapes",
            {"strings": rep.good - rep.list_records, "lists": rep.list_records})
    _find_duplicates(rep, hashes, lines, file_starts, files)
    rep.seconds = time.perf_counter() - t0
    return rep


def empty_reason(path: str | Path) -> tuple[str, dict] | None:
    """Why a data file that yielded no record holds none, as (code, params): empty, blank lines
    only, or an empty JSON array; None when it holds something else (its own problems say what)."""
    p = Path(path)
    if p.stat().st_size == 0:
        return "empty_file", {}
    lines, last = 0, b""
    with open(p, "rb") as f:
        while chunk := f.read(1 << 20):
            if not lines and not last:
                chunk = chunk.removeprefix(BOM)
            body = chunk.strip()
            if body:
                return ("empty_array", {}) if b"".join(body.split()) == b"[]" else None
            lines += chunk.count(b"\n") + len(_BARE_CR.findall(chunk))
            last = chunk[-1:] or last
    return "only_blank_lines", {"lines": lines + (last not in (b"\n", b"\r", b""))}


def has_records(path: str | Path, fmt: str = "auto") -> bool:
    """Whether a file or dataset folder holds at least one good record (reads up to the first)."""
    return next(iter_records(path, fmt), None) is not None


def one_shape(rec: dict, lists: bool) -> dict:
    """``rec`` with src/tgt as one-element lists when ``lists`` (a file must not mix the shapes)."""
    if lists and isinstance(rec.get("src"), str):
        return {**rec, "src": [rec["src"]], "tgt": [rec["tgt"]]}
    return rec


def _all_text(items: list) -> bool:
    for x in items:
        if type(x) is not str or not x or x.isspace():
            return False
    return True


def _not_object(value):
    raise RecordError("", "not_object", got=type(value).__name__)


def _count_bad_line(rep: Report, lp) -> None:
    """Line-level errors (unparseable lines) count as bad records; warnings do not."""
    code = lp[2]
    if code in LINE_ERRORS:
        rep.records += 1
        rep.bad += 1


def _find_duplicates(rep: Report, hashes: array, lines: array, file_starts: list, files, examples: int = 10) -> None:
    """Count records equal to an earlier one: sort the hashes (8 bytes a record), compare neighbours."""
    if len(hashes) < 2:
        return
    import numpy as np

    h = np.frombuffer(hashes, dtype=np.int64)
    order = np.argsort(h, kind="stable")  # stable: within equal hashes, file order is kept
    hs = h[order]
    same = hs[1:] == hs[:-1]
    rep.duplicates = int(same.sum())
    if not rep.duplicates:
        return
    starts = np.array(file_starts)
    la = np.frombuffer(lines, dtype=np.int64)

    def where(i):
        return str(files[int(np.searchsorted(starts, i, side="right")) - 1]), int(la[i])

    for i in np.nonzero(same)[0][:examples]:
        j = i
        while j > 0 and hs[j - 1] == hs[i]:
            j -= 1
        rep.duplicate_examples.append([*where(order[i + 1]), *where(order[j])])


# ---------------------------------------------------------------- reading records


def iter_records(path: str | Path, fmt: str = "auto", max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[dict]:
    """Yield every good record of a file as a PaddleNLP dict (converted if needed), skipping bad ones."""
    p = Path(path)
    if fmt == "auto":
        fmt = detect_format(p, max_line_bytes) or "paddlenlp"
    scratch: list = []
    for f in [f for fs in resolve_files(p).values() for f in fs]:
        for _, value in _iter_parsed(f, max_line_bytes, scratch):
            try:
                yield to_src_tgt(value, fmt)
            except RecordError:
                continue


def preview(path: str | Path, n: int = 20, fmt: str = "auto") -> list[dict]:
    """The first ``n`` good records, converted to src/tgt."""
    out = []
    for rec in iter_records(path, fmt):
        out.append(rec)
        if len(out) >= n:
            break
    return out


# ---------------------------------------------------------------- paged preview

# what a record is, whatever file format it came in: records of one kind can share a training set
KINDS = {"paddlenlp": "chat", "alpaca": "chat", "sharegpt": "chat", "messages": "chat", "text": "text",
         "preference": "preference", "chosen_rejected": "preference", "kto": "kto"}
# the columns that matter for each kind (besides the line number and a problem, when the line has one)
PREVIEW_COLUMNS = {
    "chat": ("turns", "system", "src", "tgt"),
    "preference": ("turns", "src", "chosen", "rejected"),
    "kto": ("turns", "src", "answer", "label"),
    "text": ("text",),
}
MAX_CELL = 400  # characters of one cell in a preview row (the rest becomes "…")


def resolve_dataset(ref: str | Path) -> Path:
    """A workspace dataset's folder by ``name``, else ``ref`` as a path to a folder or file."""
    s = str(ref).strip()
    if s and workspace.check_name(s) is None and (workspace.datasets_dir() / s).is_dir():
        return workspace.datasets_dir() / s
    p = Path(s).expanduser()
    if not s or not (p.is_file() or p.is_dir()):
        raise _refuse_path(p)
    return p


def kind_of(path: str | Path, fmt: str = "auto") -> tuple[str, str]:
    """(format, kind) of a file or dataset folder: kind is chat, preference, kto or text."""
    if fmt == "auto":
        fmt = detect_format(path) or "paddlenlp"
    elif fmt not in FORMATS:
        raise DatasetError("unknown_format", fmt=fmt, expected=", ".join(FORMATS))
    return fmt, KINDS[fmt]


def _count_lines(path: Path) -> int:
    """Lines of a file, counted in 1 MB blocks (nothing parsed; a last line without a line end counts)."""
    n, last = 0, b"\n"
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    return n + (last != b"\n")


def _line_based(path: Path) -> bool:
    """Whether a row of the preview is a line of the file (JSON lines), so that a page can be found
    by skipping lines unparsed; a JSON array or a .txt file is read through the validator's reader."""
    return path.suffix.lower() != ".txt" and not _is_json_array(path)


def _skip_lines(f, n: int) -> None:
    for _ in range(n):
        while True:  # bounded reads: a huge line never sits in memory whole
            chunk = f.readline(1 << 20)
            if not chunk or chunk.endswith(b"\n"):
                break
        if not chunk:
            return


def _read_line(f, limit: int) -> tuple[bytes | None, int]:
    """The next line (None when longer than ``limit``), and its length; (b"", 0) at the end."""
    raw = f.readline(limit + 2)
    if len(raw) <= limit + 1 or raw.endswith(b"\n"):
        return raw, len(raw)
    length = len(raw)
    while True:
        chunk = f.readline(1 << 20)
        length += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return None, length


def _parse_line(raw: bytes | None, length: int, first: bool):
    """One line as (value, None) or (None, (code, params)) — the validator's line-level codes."""
    if raw is None:
        return None, ("line_too_long", {"length": length, "limit": MAX_LINE_BYTES})
    if first and raw.startswith(BOM):
        raw = raw[3:]
    if not raw.strip():
        return None, ("blank_line", {})
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, ("not_utf8", {"position": e.start + 1})
    try:
        return json.loads(text), None
    except RecursionError:
        return None, ("too_deep", {"limit": sys.getrecursionlimit()})
    except json.JSONDecodeError as e:
        return None, ("invalid_json", {"detail": e.msg, "column": e.colno})
    except ValueError as e:  # an over-long number
        return None, ("invalid_json", {"detail": str(e)[:80], "column": 0})


def _cell(value) -> str:
    if isinstance(value, list):
        value = "\n".join(f"[{i + 1}] {v}" for i, v in enumerate(value)) if len(value) > 1 else (value[0] if value else "")
    s = "" if value is None else str(value)
    return s if len(s) <= MAX_CELL else s[: MAX_CELL - 1] + "…"


def preview_cells(rec: dict, kind: str) -> dict:
    """The columns of :data:`PREVIEW_COLUMNS` for one converted record of ``kind``."""
    if kind == "text":
        return {"text": _cell(rec["text"])}
    src = rec["src"] if isinstance(rec["src"], list) else [rec["src"]]
    if kind == "chat":
        tgt = rec["tgt"] if isinstance(rec["tgt"], list) else [rec["tgt"]]
        return {"turns": len(src), "system": _cell(rec.get("system")), "src": _cell(src), "tgt": _cell(tgt)}
    if kind == "preference":
        return {"turns": len(src), "src": _cell(src), "chosen": _cell(rec["response"][0]),
                "rejected": _cell(rec["response"][1])}
    return {"turns": len(src), "src": _cell(src), "answer": _cell(rec["response"][0]),
            "label": "desirable" if rec["sort"][0] == 1 else "undesirable"}


def preview_page(source: str | Path, split: str = "train", page: int = 1, page_size: int = 20,
                 fmt: str = "auto") -> dict:
    """One page of a dataset (a workspace name, a folder or a file) as table rows.

    A row is a line of the split's file(s) (a JSON-array item or a .txt line for those files), so
    ``total`` counts lines, blank and broken ones included: such a row carries ``problem`` (the
    validator's text) instead of cells. Counting reads the files in 1 MB blocks without parsing
    them, and a page skips the lines before it unparsed: page 1 of a 1 GB file parses 20 lines.
    A single file has one split, ``data``, whatever ``split`` asks. ``page`` is clamped to the
    pages there are. Returns {path, split, splits, files, format, kind, columns, rows, total, page,
    pages, page_size}; each row is {file, line, problem, <column>: text}, ``problem`` None or
    {code, params, field, message}.
    """
    path = resolve_dataset(source)
    groups = resolve_files(path)
    fmt, kind = kind_of(path, fmt)
    if "data" in groups:
        split = "data"
    elif split not in groups:
        if split != "dev":
            raise DatasetError("no_split", path=str(path), split=split, splits=", ".join(groups))
        groups = {**groups, "dev": []}  # a dataset without dev records: an empty page
    files = groups[split]
    page_size = max(1, int(page_size))
    counts = []
    for f in files:
        counts.append(_count_lines(f) if _line_based(f) else sum(1 for _ in _iter_parsed(f, MAX_LINE_BYTES, [])))
    total = sum(counts)
    pages = max(1, -(-total // page_size))
    page = max(1, min(int(page), pages))
    start, want = (page - 1) * page_size, page_size
    rows: list[dict] = []
    for f, n in zip(files, counts):
        if start >= n:
            start -= n
            continue
        if _line_based(f):
            items = _page_lines(f, start, want)
        else:
            parsed = ((_where(k)[0], v, None) for k, v in _iter_parsed(f, MAX_LINE_BYTES, []))
            items = list(itertools.islice(parsed, start, start + want))
        for line, value, prob in items:
            row = {"file": f.name, "line": line, "problem": None, **{c: "" for c in PREVIEW_COLUMNS[kind]}}
            if prob is None:
                try:
                    row.update(preview_cells(to_src_tgt(value, fmt), kind))
                except RecordError as e:
                    prob = (e.code, {**e.params, "field": e.field})
                except (KeyError, IndexError, TypeError, ValueError) as e:  # a record of another kind
                    prob = ("wrong_type", {"expected": kind, "got": type(e).__name__, "field": ""})
            if prob is not None:
                code, params = prob
                row["problem"] = {"code": code, "params": params, "field": params.get("field", ""),
                                  "message": message(code, params)}
            rows.append(row)
        want -= len(items)
        start = 0
        if want <= 0:
            break
    return {"path": str(path), "split": split, "splits": list(groups), "files": [f.name for f in files],
            "format": fmt, "kind": kind,
            "columns": ["line", *PREVIEW_COLUMNS[kind]], "rows": rows, "total": total, "page": page,
            "pages": pages, "page_size": page_size}


def _page_lines(f: Path, start: int, want: int) -> list:
    out = []
    with open(f, "rb") as r:
        _skip_lines(r, start)
        for i in range(want):
            raw, length = _read_line(r, MAX_LINE_BYTES)
            if raw == b"":
                break
            value, prob = _parse_line(raw, length, start + i == 0)
            out.append((start + i + 1, value, prob))
    return out


def provenance(path: str | Path | None) -> dict | None:
    """What a run records about the dataset it trains on: the dataset folder's meta.json (its name,
    source and checksum, counts, seed, and for a mix the parts with their ratios and counts), with
    the path; None for no path or a folder the studio did not write (no meta.json). Never raises."""
    if not path:
        return None
    try:
        p = Path(path)
        d = p if p.is_dir() else p.parent
        meta = json.loads((d / workspace.DATASET_META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict):
        return None
    keep = ("name", "source", "source_sha256", "format", "train", "dev", "seed", "created", "mix")
    return {"path": str(Path(path).resolve()), **{k: meta[k] for k in keep if k in meta}}


def as_turns(rec: dict) -> list[tuple[str, str]]:
    """A record as (user, assistant) pairs."""
    src, tgt = rec["src"], rec["tgt"]
    if isinstance(src, str):
        return [(src, tgt if isinstance(tgt, str) else tgt[0])]
    return list(zip(src, tgt))


# ---------------------------------------------------------------- conversion


def convert(src_path: str | Path, out_path: str | Path, fmt: str = "auto", skip_bad: bool = True) -> dict:
    """Convert a file of any supported format to PaddleNLP JSON lines (written atomically).

    Returns a summary with the detected format, the number written and the skipped problems.
    """
    src_path, out_path = Path(src_path), Path(out_path)
    rep = validate(src_path, fmt)
    if not skip_bad and rep.bad:
        raise DatasetError("has_bad_records", bad=rep.bad, total=rep.records)
    tmp = out_path.with_name(f".{out_path.name}.tmp")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as w:
            for rec in iter_records(src_path, rep.format):
                w.write(json.dumps(rec, ensure_ascii=False) + "\n")
                written += 1
        if not written:
            raise DatasetError("no_records")
        tmp.replace(out_path)
    finally:
        tmp.unlink(missing_ok=True)
    return {"format": rep.format, "written": written, "skipped": rep.bad, "report": rep.to_dict()}


# ---------------------------------------------------------------- import


def import_dataset(
    source: str | Path,
    name: str,
    dev_ratio: float = 0.1,
    fmt: str = "auto",
    seed: int = 42,
    skip_bad: bool = False,
    original_name: str | None = None,
) -> dict:
    """Import a file or PaddleNLP folder into ``workspace/datasets/<name>/``.

    A single file is split into train/dev deterministically by ``seed``; a folder keeps its
    own split. The source is only read. Everything is written in a hidden temp folder that is
    renamed into place at the end, so a failure leaves nothing behind.
    """
    code = workspace.check_name(name)
    if code:
        raise DatasetError(code, name=name)
    if not (0.0 <= dev_ratio <= 0.5):
        raise DatasetError("bad_dev_ratio", ratio=dev_ratio)
    source = Path(source)
    groups = resolve_files(source)
    final = workspace.datasets_dir() / name
    if final.exists():
        raise DatasetError("dataset_exists", name=name)
    rep = validate(source, fmt)
    if rep.bad and not skip_bad:
        raise DatasetError("has_bad_records", bad=rep.bad, total=rep.records)
    if not rep.good:
        empty = next((p for p in rep.problems if p.code in EMPTY_CODES), None)  # why: empty, blank lines only
        raise DatasetError(empty.code, **empty.params) if empty else DatasetError("no_records")
    tmp = workspace.temp_dir_beside(final)
    try:
        counts = {}
        lists = 0 < rep.list_records  # one shape for every file of the dataset
        if "data" in groups:
            counts = _split_file(groups["data"][0], rep.format, tmp, dev_ratio, seed, lists)
        else:
            for split, files in groups.items():
                n = 0
                with open(tmp / f"{split}.json", "w", encoding="utf-8", newline="\n") as w:
                    for f in files:
                        for rec in iter_records(f, rep.format):
                            w.write(json.dumps(one_shape(rec, lists), ensure_ascii=False) + "\n")
                            n += 1
                counts[split] = n
            if "dev" not in counts:
                (tmp / "dev.json").write_text("", encoding="utf-8")
                counts["dev"] = 0
        meta = {
            "name": name,
            "source": original_name or str(source),
            "source_sha256": _sha256_of(groups),
            "format": rep.format,
            "train": counts["train"],
            "dev": counts["dev"],
            "skipped_bad": rep.bad,
            "duplicates": rep.duplicates,
            "multi_turn": rep.multi_turn,
            "shape": "list" if lists else "string",
            "dev_ratio": dev_ratio if "data" in groups else None,
            "seed": seed,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        workspace.write_json_atomic(tmp / workspace.DATASET_META, meta)
        try:
            workspace.publish_dir(tmp, final)
        except FileExistsError:  # another import took the name while this one was writing
            raise DatasetError("dataset_exists", name=name) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return meta


def _sha256_of(groups: dict[str, list[Path]]) -> str:
    h = hashlib.sha256()
    for files in groups.values():
        for f in files:
            with open(f, "rb") as r:
                for chunk in iter(lambda: r.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


def _split_file(path: Path, fmt: str, out: Path, dev_ratio: float, seed: int, lists: bool = False) -> dict:
    """Write converted records to out/all, pick dev indices with a seeded RNG, then split."""
    all_path = out / ".all.jsonl"
    n = 0
    with open(all_path, "w", encoding="utf-8", newline="\n") as w:
        for rec in iter_records(path, fmt):
            w.write(json.dumps(one_shape(rec, lists), ensure_ascii=False) + "\n")
            n += 1
    n_dev = round(n * dev_ratio)
    if dev_ratio > 0 and n >= 2:
        n_dev = max(1, n_dev)
    n_dev = min(n_dev, n - 1)
    dev_idx = set(random.Random(seed).sample(range(n), n_dev)) if n_dev > 0 else set()
    with open(all_path, encoding="utf-8") as r, open(out / "train.json", "w", encoding="utf-8", newline="\n") as tw, open(
        out / "dev.json", "w", encoding="utf-8", newline="\n"
    ) as dw:
        for i, line in enumerate(r):
            (dw if i in dev_idx else tw).write(line)
    all_path.unlink()
    return {"train": n - n_dev, "dev": n_dev}


def list_datasets() -> list[dict]:
    """Every dataset folder in the workspace with its meta (newest first)."""
    root = workspace.datasets_dir()
    out = []
    if not root.is_dir():
        return out
    for d in sorted(root.iterdir()):
        if d.name.startswith(".") or not d.is_dir():
            continue
        meta_path = d / workspace.DATASET_META
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {"name": d.name}
        except (OSError, json.JSONDecodeError):
            meta = {"name": d.name}
        meta["path"] = str(d)
        out.append(meta)
    out.sort(key=lambda m: m.get("created", ""), reverse=True)
    return out


# ---------------------------------------------------------------- token statistics


_OWN_TEMPLATE = object()


class _MemoEncode:
    """The tokenizer, with ``encode`` remembered for the texts of one record: token_stats calls
    turns_ids (the uncut example) and then build_example (the trained one), which renders and
    encodes the very same round texts again."""

    def __init__(self, tok):
        self._tok, self._memo = tok, {}

    def __getattr__(self, name):
        return getattr(self._tok, name)

    def encode(self, text, **kw):
        key = (text, tuple(sorted(kw.items())))
        if key not in self._memo:
            self._memo[key] = self._tok.encode(text, **kw)
        return self._memo[key]

    def clear(self):
        self._memo.clear()


def token_stats(
    path: str | Path,
    tokenizer_dir: str | Path,
    src_length: int = 1024,
    max_length: int = 2048,
    limit: int = 5000,
    bins: int = 20,
    fmt: str = "auto",
    chat_template=_OWN_TEMPLATE,
) -> dict:
    """Token lengths of what training sees, over up to ``limit`` records.

    Every record is tokenized as training tokenizes it (:func:`core.data.templates.turns_ids` /
    :func:`~core.data.templates.build_example` with the model's tokenizer and chat template: system
    prompt, template markers, every round, EOS). "total" is the whole uncut sequence (all rounds
    with a template; upstream's first round without one), "src" its prompt tokens (the positions
    whose label is -100), the answer tokens being the rest. For a record that is not cut,
    ``total == len(build_example(...)["input_ids"]) + 1`` (build_example shifts by one).

    ``truncated_total``: records build_example cuts (its sequence shorter than the uncut one:
    earlier rounds dropped, the prompt or the answer cut, the EOS left out) or drops entirely
    (``dropped``, also counted there); ``truncated_src``: those of them whose prompt is cut to
    ``src_length``. ``chat_template``: as a run config's value (see
    :func:`~core.data.templates.template_for_run`); left out, the tokenizer's own.
    """
    import numpy as np

    from core.data import templates

    tok = load_tokenizer(tokenizer_dir)
    flat = {} if chat_template is _OWN_TEMPLATE else {"chat_template": chat_template}
    template = templates.template_for_run(tok, tokenizer_dir, flat)
    mtok = _MemoEncode(tok)
    src_lens, total_lens = [], []
    cut_src = cut = dropped = 0
    text = False
    for rec in iter_records(path, fmt):
        mtok.clear()
        if isinstance(rec.get("text"), str) and "src" not in rec:  # raw text: every token trains, no prompt
            text = True
            src_lens.append(0)
            # text_blocks: BOS + text + EOS per document
            extra = sum(getattr(tok, k, None) is not None for k in ("bos_token_id", "eos_token_id"))
            total_lens.append(len(tok.encode(rec["text"], add_special_tokens=False)["input_ids"]) + extra)
            if len(src_lens) >= limit:
                break
            continue
        turns = templates.turns_ids(mtok, template, templates.messages_of(rec))
        kept = turns if template else turns[:1]  # without a template upstream trains the first round only
        prompt = sum(len(p) for p, _ in kept)
        total = prompt + sum(len(a) for _, a in kept)
        ex = templates.build_example(mtok, template, rec, src_length, max_length)
        if ex is None:
            dropped += 1
        elif len(ex["input_ids"]) + 1 < total:
            cut += 1
            # the one prompt build_example cuts to src_length: the last round's, when it alone is too
            # long (with a template), or the first round's (without)
            p, a = kept[-1] if template else kept[0]
            if len(p) > src_length and (len(p) + len(a) > max_length or not template):
                cut_src += 1
        src_lens.append(prompt)
        total_lens.append(total)
        if len(src_lens) >= limit:
            break
    if not src_lens:
        raise DatasetError("no_records")
    s, t = np.array(src_lens), np.array(total_lens)

    def hist(a):
        counts, edges = np.histogram(a, bins=bins, range=(0, max(int(a.max()), 1)))
        return {"counts": counts.tolist(), "edges": [float(e) for e in edges]}

    return {
        "records": len(s),
        "src": {**hist(s), "mean": float(s.mean()), "max": int(s.max()), "p95": float(np.percentile(s, 95))},
        "total": {**hist(t), "mean": float(t.mean()), "max": int(t.max()), "p95": float(np.percentile(t, 95))},
        "src_length": src_length,
        "max_length": max_length,
        # raw text is cut into blocks of max_length and packed (pretraining): nothing is lost to truncation
        "truncated_src": 0 if text else cut_src,
        "truncated_total": 0 if text else cut + dropped,
        "dropped": 0 if text else dropped,
        "template": bool(template),
        "text": text,
    }


def load_tokenizer(tokenizer_dir: str | Path):
    """PaddleNLP's AutoTokenizer on a local folder (imports paddlenlp: a few seconds)."""
    import logging

    logging.getLogger("paddlenlp").setLevel(logging.WARNING)
    import paddlenlp.transformers as T

    try:
        return T.AutoTokenizer.from_pretrained(str(tokenizer_dir))
    except ValueError as e:
        # AutoTokenizer knows GLM's tokenizers by model only (GLMTokenizer picks the class from the folder):
        # "Tokenizer class GLMChineseTokenizer does not exist or is not currently imported"
        cfg = Path(tokenizer_dir) / "tokenizer_config.json"
        name = json.loads(cfg.read_text(encoding="utf-8")).get("tokenizer_class") if cfg.is_file() else None
        if not (isinstance(name, str) and name.endswith("Tokenizer") and hasattr(T, name)):
            raise
        try:
            return getattr(T, name).from_pretrained(str(tokenizer_dir))
        except Exception:  # noqa: BLE001 - the first error says what is wrong
            raise e from None
