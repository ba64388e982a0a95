"""Chat with a model: multi-turn prompts through the chat template, greedy or sampled answers,
streamed token by token, cancellable between tokens, and batched.

Loads what :func:`core.models.loading.load` loads: a base model, base + an unmerged adapter (LoRA,
prefix, VeRA, LoKr) or a merged model. Prompts are built by :func:`core.data.templates.prompt_ids`,
exactly as training builds them.

One generation runs on the model at a time (a lock); others queue. A generation runs
PaddleNLP's own ``model.generate`` in a worker thread: a streamer hands each new token to the
consumer, and a stopping criterion checks the cancel event after every token, so a cancelled
answer stops computing at the next token.

    engine = ChatEngine("workspace/models/demo-base")
    for delta in engine.stream([{"role": "user", "content": "What is 2 plus 3?"}], temperature=0):
        print(delta, end="", flush=True)

Inputs are checked before anything runs; a bad one raises :class:`ChatError` (a ValueError)
naming the field and what was expected (a bad value is quoted, cut short). A prompt with more
characters than the context can hold at the most characters one token stands for is refused
without tokenizing it (:func:`max_token_chars`, :func:`fold_table`).
"""

from __future__ import annotations

import math
import queue
import threading
import time
import uuid
from collections import deque
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Iterator

from core.data import templates
from core.models import layouts

DEFAULT_MAX_NEW_TOKENS = 256
ROLES = ("system", "user", "assistant")
BRIEF_CHARS = 80  # the most of a bad value an error message repeats


def brief(v) -> str:
    """``repr(v)``, cut to BRIEF_CHARS: an error names the bad value without echoing megabytes of it
    (or failing on a value nested thousands deep)."""
    try:
        r = repr(v)
    except (RecursionError, ValueError):  # deep nesting; an int past the digit limit
        return f"a {type(v).__name__}"
    return r if len(r) <= BRIEF_CHARS else r[:BRIEF_CHARS - 5] + " …" + r[-2:]


class ChatError(ValueError):
    """A request the engine refuses. ``param`` is the offending field, ``code`` a stable id."""

    def __init__(self, message: str, param: str | None = None, code: str = "invalid_value", problems=None):
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        self.problems = problems or [(param, message)]


# ---------------------------------------------------------------- parameters


@dataclass
class GenParams:
    """How to generate one answer. Defaults follow the OpenAI API (sampling at temperature 1)."""

    max_new_tokens: int | None = None
    """Most tokens to generate; None: up to 256, within the model's context."""
    temperature: float = 1.0
    """0 means greedy decoding; otherwise sampling at this temperature (0 to 2)."""
    top_p: float = 1.0
    """Nucleus sampling: keep the smallest set of tokens whose probability reaches top_p, in (0, 1]."""
    top_k: int = 0
    """Keep the k most likely tokens when sampling; 0 turns it off."""
    repetition_penalty: float = 1.0
    """Above 1 discourages tokens already in the prompt or answer (PaddleNLP/CTRL style); 1 is off."""
    seed: int | None = None
    """Seed for sampling: the same seed, prompt and parameters give the same answer."""
    src_length: int | None = None
    """Longest prompt in tokens (PaddleNLP's src_length); None: the model's context less one."""
    stop: list[str] | None = None
    """Up to 4 strings; the answer ends before the first of them (not included)."""
    ignore_eos: bool = False
    """Keep generating past the end-of-sequence token until max_new_tokens (for benchmarks)."""

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def problems(self) -> list[tuple[str, str]]:
        """Every (field, message) problem; empty when the parameters are usable."""
        out: list[tuple[str, str]] = []

        def num(name, v, lo, hi, lo_open=False, integer=False, allow_none=False):
            if v is None and allow_none:
                return
            what = "an integer" if integer else "a number"
            ok_type = isinstance(v, int) if integer else isinstance(v, (int, float))
            if isinstance(v, bool) or not ok_type or (isinstance(v, float) and not math.isfinite(v)):
                out.append((name, f"{name}: expected {what}, got {brief(v)}"))
                return
            low_bad = v <= lo if lo_open else v < lo
            if low_bad or (hi is not None and v > hi):
                rng = f"{'(' if lo_open else '['}{lo}, {hi if hi is not None else 'inf'}{']' if hi is not None else ')'}"
                out.append((name, f"{name}: expected {what} in {rng}, got {brief(v)}"))

        num("max_new_tokens", self.max_new_tokens, 1, None, integer=True, allow_none=True)
        num("temperature", self.temperature, 0, 2)
        num("top_p", self.top_p, 0, 1, lo_open=True)
        num("top_k", self.top_k, 0, None, integer=True)
        num("repetition_penalty", self.repetition_penalty, 0, 10, lo_open=True)
        num("seed", self.seed, 0, 2**63 - 1, integer=True, allow_none=True)
        num("src_length", self.src_length, 1, None, integer=True, allow_none=True)
        if self.stop is not None:
            if not isinstance(self.stop, list) or not all(isinstance(s, str) and s for s in self.stop) \
                    or len(self.stop) > 4:
                out.append(("stop", f"stop: expected up to 4 non-empty strings, got {brief(self.stop)}"))
        if not isinstance(self.ignore_eos, bool):
            out.append(("ignore_eos", f"ignore_eos: expected true or false, got {brief(self.ignore_eos)}"))
        return out

    def check(self) -> "GenParams":
        probs = self.problems()
        if probs:
            raise ChatError("; ".join(m for _, m in probs), probs[0][0], problems=probs)
        return self

    @classmethod
    def of(cls, params: "GenParams | dict | None" = None, **kw) -> "GenParams":
        """GenParams from a GenParams, a dict and/or keywords (keywords win); unknown names are refused."""
        d = asdict(params) if isinstance(params, GenParams) else dict(params or {})
        d.update(kw)
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ChatError(f"{unknown[0]}: unknown generation parameter (known: {', '.join(sorted(names))})",
                            unknown[0], code="unknown_parameter")
        if isinstance(d.get("stop"), str):
            d["stop"] = [d["stop"]]
        return cls(**d).check()


# ---------------------------------------------------------------- messages


def _content_text(content, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: only text parts are understood
        parts = []
        for k, part in enumerate(content):
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise ChatError(f"{where}.content[{k}]: expected a text part {{\"type\": \"text\", \"text\": ...}}",
                                f"{where}.content")
            parts.append(part["text"])
        return "".join(parts)
    raise ChatError(f"{where}.content: expected a string, got {type(content).__name__}", f"{where}.content")


def normalize_messages(messages) -> list[dict]:
    """[{role, content}] checked: optional system first, then user/assistant turns ending with user."""
    if not isinstance(messages, list) or not messages:
        raise ChatError("messages: expected a non-empty list of {role, content}", "messages")
    out: list[dict] = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise ChatError(f"{where}: expected an object with role and content", where)
        role = m.get("role")
        if role == "developer":
            role = "system"
        if role not in ROLES:
            raise ChatError(f"{where}.role: expected one of system, user, assistant, got {brief(role)}",
                            f"{where}.role")
        text = _content_text(m.get("content", ""), where)
        if role == "system":
            if out and out[-1]["role"] != "system":
                raise ChatError(f"{where}.role: a system message must come before the conversation", f"{where}.role")
            if out:  # several leading system messages: one system prompt
                out[-1]["content"] += "\n" + text
                continue
        else:
            prev = out[-1]["role"] if out and out[-1]["role"] != "system" else "assistant"
            if role == prev:
                want = "assistant" if prev == "user" else "user"
                raise ChatError(f"{where}.role: expected {want} (user and assistant turns alternate, starting "
                                f"with user), got {role}", f"{where}.role")
        out.append({"role": role, "content": text})
    if out[-1]["role"] != "user":
        raise ChatError("messages: the last message must be from the user", "messages")
    return out


def messages_from(prompt: str | None = None, history=None, system: str | None = None) -> list[dict]:
    """Messages from PaddleNLP-style fields: ``history`` as alternating user/assistant texts
    (strings, {"utterance": ...} objects or a JSON string of them) and the new ``prompt``."""
    import json

    if prompt is None or not isinstance(prompt, str):
        raise ChatError(f"context: expected a string, got {type(prompt).__name__}", "context")
    if system is not None and not isinstance(system, str):
        raise ChatError(f"system: expected a string, got {type(system).__name__}", "system")
    if isinstance(history, str):
        try:
            history = json.loads(history) if history.strip() else []
        except RecursionError:
            raise ChatError("history: a JSON string nested too deeply", "history") from None
        except ValueError:  # not JSON: one text
            history = [history]
    history = history or []
    if not isinstance(history, list):
        raise ChatError("history: expected a list of alternating user and assistant texts", "history")
    if len(history) % 2:
        raise ChatError(f"history: expected user/assistant pairs (an even number of texts), got {len(history)}",
                        "history")
    msgs = [{"role": "system", "content": system}] if system else []
    for k, h in enumerate(history):
        text = h.get("utterance") if isinstance(h, dict) else h
        if not isinstance(text, str):
            raise ChatError(f"history[{k}]: expected a string or {{\"utterance\": ...}}", "history")
        msgs.append({"role": "user" if k % 2 == 0 else "assistant", "content": text})
    msgs.append({"role": "user", "content": prompt})
    return normalize_messages(msgs)


# ---------------------------------------------------------------- a prompt surely too long, told before tokenizing

# Tokenizing megabytes takes seconds (7 MB: ~6-17 s), all to refuse a prompt over a context of a few
# thousand tokens. For tokenizers where one token provably stands for at most K characters, a prompt
# keeping more than K x limit characters after normalization is refused without tokenizing it.

_CONJOINING_JAMO = ((0x1100, 0x11FF), (0xA960, 0xA97F), (0xD7B0, 0xD7FF))
_FOLDED_CATEGORIES = {"Cc", "Cf", "Cs", "Mn", "Mc", "Me", "Zs", "Zl", "Zp"}
_FOLDABLE: dict | None = None
_COUNT_CHUNK = 1 << 16


def fold_table() -> dict:
    """A ``str.translate`` table deleting every character that normalization may drop or fold into a
    neighbour: whitespace (collapsed), control and format characters (some tokenizers remove them),
    combining marks (NFC/NFKC compose them into the character before; some tokenizers strip them),
    surrogates, Hangul jamo (two or three compose into one syllable) and every character whose NFKC
    form is only such characters (spacing accents: a space and a mark) or holds a conjoining jamo
    (circled Hangul). Each character left keeps one of its own through NFC/NFKC, lower-casing and
    whitespace handling: Unicode's other compositions all join a mark to the character before.
    Built once (~0.3 s): by ``serve`` as it starts, else by the first prompt long enough to need it."""
    global _FOLDABLE
    if _FOLDABLE is None:
        import unicodedata

        jamo = {cp for a, b in _CONJOINING_JAMO for cp in range(a, b + 1)}
        drop = set(jamo) | set(range(0x3130, 0x3190)) | set(range(0xFFA0, 0xFFDD))  # + compatibility jamo
        for cp in range(0x110000):
            c = chr(cp)
            if unicodedata.category(c) in _FOLDED_CATEGORIES or c.isspace():
                drop.add(cp)
        for cp in range(0x110000):
            c = chr(cp)
            if cp not in drop and unicodedata.decomposition(c):
                nf = [ord(x) for x in unicodedata.normalize("NFKC", c)]
                if all(x in drop for x in nf) or any(x in jamo for x in nf):
                    drop.add(cp)
        _FOLDABLE = dict.fromkeys(drop)
    return _FOLDABLE


def kept_chars_over(text: str, bound: int) -> int | None:
    """How many characters of ``text`` survive any normalization (see :func:`fold_table`), counted
    only until the count passes ``bound``; None when it never does."""
    table, kept = fold_table(), 0
    for i in range(0, len(text), _COUNT_CHUNK):
        kept += len(text[i:i + _COUNT_CHUNK].translate(table))
        if kept > bound:
            return kept
    return None


def max_token_chars(tokenizer) -> int | None:
    """The most characters of normalized text one token can stand for; None when unbounded or unknown.

    Bounded for a sentencepiece model with byte fallback (an unknown character becomes byte pieces;
    without it, sentencepiece folds a run of unknown characters into one <unk>) and for byte-level
    BPE (GPT-2, Qwen2: every byte is in the vocabulary, and a piece is written one character per
    byte). Every token is then a vocabulary piece or an added token standing for at most as many
    characters as it has (a byte piece such as <0xE4> for less than one), so the longest one bounds it.
    """
    try:
        sp = getattr(tokenizer, "sp_model", None)
        if sp is not None:
            unk = sp.unk_id()
            if any(sp.piece_to_id(f"<0x{b:02X}>") == unk for b in range(256)):
                return None
        elif len(getattr(tokenizer, "byte_encoder", None) or ()) != 256:
            return None
        pieces = [*tokenizer.get_vocab(), *(getattr(tokenizer, "added_tokens_encoder", None) or {}),
                  *map(str, getattr(tokenizer, "all_special_tokens", None) or [])]
    except Exception:  # noqa: BLE001 - a tokenizer we cannot inspect gets no shortcut
        return None
    return max(map(len, pieces), default=0) or None


# ---------------------------------------------------------------- generation


class _Cancelled:
    """A PaddleNLP stopping criterion: true once the event is set. Survives generate's deepcopy."""

    def __init__(self, event: threading.Event):
        self.event = event

    def __call__(self, input_ids, scores, **kw) -> bool:
        return self.event.is_set()

    def __deepcopy__(self, memo):
        return self


class _QueueStreamer:
    """A PaddleNLP streamer: puts each new token id (batch of one) on a queue."""

    def __init__(self, q: queue.Queue):
        self.q = q

    def put(self, value):
        self.q.put(("tok", int(value.reshape([-1])[0])))

    def end(self):
        pass


class Generation:
    """One answer being generated. Iterate it for text deltas; then read ``text``,
    ``finish_reason`` ("stop", "length" or "cancelled") and ``usage``.

    ``cancel()`` (or ``close()``, or closing the iteration early) stops the model at the next
    token. Deltas joined are exactly ``text``.
    """

    def __init__(self, engine: "ChatEngine", prompt: list[int], params: GenParams, max_new: int,
                 gen_id: str | None = None):
        self.engine = engine
        self.id = gen_id or f"gen-{uuid.uuid4().hex[:16]}"
        self.params = params
        self.prompt_tokens = len(prompt)
        self.max_new_tokens = max_new
        self.completion_tokens = 0
        self.finish_reason: str | None = None
        self.text = ""
        self.created = time.time()
        self.first_token_at: float | None = None
        self.finished_at: float | None = None
        self._prompt = prompt
        self._cancel = threading.Event()
        self._q: queue.Queue = queue.Queue()
        self._ids: list[int] = []
        self._prefix = self._read = 0  # incremental detokenization window
        self._sent = 0  # chars of self.text handed out
        self._stop_hit = False
        self._eos_hit = False
        self._done = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"generate-{self.id}", daemon=True)
        engine._stat("queued", +1)
        with engine._stats_lock:
            engine._live.add(self)
        self._thread.start()

    # -- the worker thread
    def _run(self) -> None:
        eng = self.engine
        try:
            with eng._lock:
                eng._stat("queued", -1)
                eng._stat("active", +1)
                try:
                    if not self._cancel.is_set():
                        eng._generate_ids([self._prompt], self.params, self.max_new_tokens,
                                          streamer=_QueueStreamer(self._q), cancel=self._cancel)
                finally:
                    eng._stat("active", -1)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            self._q.put(("error", e))
        finally:
            with eng._stats_lock:
                eng._live.discard(self)
            self._q.put(("end", None))

    # -- the consumer
    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        d = self.next_delta()
        if d is None:
            raise StopIteration
        return d

    def next_delta(self, timeout: float | None = None) -> str | None:
        """The next text delta; None at the end; "" when ``timeout`` seconds pass without one
        (a chance for a server to probe its client while the answer waits in the queue)."""
        while True:
            if self._done:
                return None
            try:
                kind, val = self._q.get(timeout=timeout)
            except queue.Empty:
                return ""
            toks = []
            ended = False
            while True:  # take every token already there: one decode for several
                if kind == "tok":
                    toks.append(val)
                elif kind == "error":
                    self._finish("error")
                    raise val
                else:
                    ended = True
                    break
                try:
                    kind, val = self._q.get_nowait()
                except queue.Empty:
                    break
            delta = self._take(toks, ended)
            if delta:
                return delta

    def _take(self, toks: list[int], ended: bool) -> str:
        """Add new tokens; the text that became final."""
        eos = self.engine.eos_id
        for t in toks:
            if self._eos_hit or self._stop_hit:
                continue
            if self.first_token_at is None:
                self.first_token_at = time.perf_counter()
            self.completion_tokens += 1
            if t == eos and not self.params.ignore_eos:
                self._eos_hit = True
                continue
            self._ids.append(t)
        if toks and not self._stop_hit:
            dec = self.engine._decode
            before = dec(self._ids[self._prefix:self._read])
            after = dec(self._ids[self._prefix:])
            if len(after) > len(before) and not after.endswith("\ufffd"):
                self.text += after[len(before):]
                self._prefix, self._read = self._read, len(self._ids)
        if ended and not self._stop_hit:  # flush what an incomplete byte sequence held back
            rest = self.engine._decode(self._ids[self._prefix:])[len(self.engine._decode(self._ids[self._prefix:self._read])):]
            self.text += rest
        hold = 0
        if self.params.stop and not self._stop_hit:
            start = max(0, self._sent - max(len(s) for s in self.params.stop))
            hits = [i for i in (self.text.find(s, start) for s in self.params.stop) if i >= 0]
            if hits:
                self.text = self.text[:min(hits)]
                self._stop_hit = True
                self._cancel.set()
            elif not ended:
                hold = max(len(s) for s in self.params.stop) - 1
        upto = max(self._sent, len(self.text) - hold)
        out = self.text[self._sent:upto]
        self._sent = upto
        if ended:
            reason = "cancelled" if self._cancel.is_set() and not self._stop_hit else (
                "stop" if self._eos_hit or self._stop_hit else "length")
            if self._closed:
                reason = "cancelled"
            self._finish(reason)
        return out

    def _finish(self, reason: str) -> None:
        if self._done:
            return
        self._done = True
        self.finish_reason = reason
        self.finished_at = time.perf_counter()
        self.engine._record(self)

    def cancel(self) -> None:
        """Stop generating at the next token (the text so far stays)."""
        self._cancel.set()

    def close(self) -> None:
        """Cancel and wait for the model to stop; finish_reason becomes "cancelled" unless it had ended."""
        if self._done:
            return
        self._closed = True
        self._cancel.set()
        for _ in self:  # drain until the worker ends
            pass

    def result(self) -> "Generation":
        """Run to the end; returns self (text, finish_reason, usage filled)."""
        for _ in self:
            pass
        return self

    @property
    def usage(self) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if not self._done:
                self._cancel.set()
        except Exception:  # noqa: BLE001
            pass


class ChatEngine:
    """A model loaded for chat. Thread-safe: generations queue on one lock.

    ``model_dir``: a model folder (base or merged); ``adapter_dir``: an unmerged adapter
    (LoRA/prefix/VeRA/LoKr) on top of it (its recorded base when ``model_dir`` is None).
    ``loaded``: an already loaded (model, tokenizer, template) triple.
    """

    def __init__(self, model_dir: str | Path | None, adapter_dir: str | Path | None = None, loaded=None,
                 name: str | None = None):
        from core.models import loading

        if adapter_dir and not Path(adapter_dir).is_dir():
            raise FileNotFoundError(f"adapter folder not found: {adapter_dir}")
        if model_dir and not Path(model_dir).is_dir():
            raise FileNotFoundError(f"model folder not found: {model_dir}")
        if adapter_dir and not model_dir:
            model_dir = loading.base_of(adapter_dir)
        self.model_dir = str(model_dir) if model_dir else None
        self.adapter_dir = str(adapter_dir) if adapter_dir else None
        self.kind = (loading.adapter_kind(adapter_dir) if adapter_dir else None) or "model"
        from core.models.static import is_static

        self.static = None  # a static export runs in Paddle Inference (core.models.static)
        if model_dir and not loaded and is_static(model_dir):
            if adapter_dir:
                raise ValueError(f"{model_dir} is a static export: it takes no adapter (export the merged model instead)")
            from core.models.static import StaticEngine

            self.static = StaticEngine(model_dir)
            self.kind = "static"
            self.model, self.tokenizer, self.template = None, self.static.tokenizer, self.static.template
            self.own_positions = False
        else:
            self.model, self.tokenizer, self.template = loaded or loading.load(model_dir, adapter_dir)
            from core.models.evaluate import padded_positions_matter

            self.own_positions = padded_positions_matter(self.model)
        self.name = name or Path(self.adapter_dir or self.model_dir or "model").name
        cfg = getattr(self.model, "config", None) or getattr(getattr(self.model, "model", None), "config", None)
        self.max_position = self.static.max_length if self.static else int(getattr(cfg, "max_position_embeddings", 0) or 2048)
        self.vocab_size = self.static.vocab_size if self.static else int(getattr(cfg, "vocab_size", 0) or len(self.tokenizer))
        self.eos_id = self.tokenizer.eos_token_id
        self.max_token_chars = max_token_chars(self.tokenizer)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_id
        self._lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self.stats = {"queued": 0, "active": 0, "generations": 0, "cancelled": 0, "generated_tokens": 0,
                      "prompt_tokens": 0}
        self.recent: deque = deque(maxlen=50)
        self._live: set = set()  # generations queued or running

    # -- bookkeeping
    def _stat(self, key: str, delta: int) -> None:
        with self._stats_lock:
            self.stats[key] += delta

    def _record(self, g: Generation) -> None:
        with self._stats_lock:
            self.stats["generations"] += 1
            self.stats["generated_tokens"] += g.completion_tokens
            self.stats["prompt_tokens"] += g.prompt_tokens
            if g.finish_reason == "cancelled":
                self.stats["cancelled"] += 1
            self.recent.append({"id": g.id, "finish_reason": g.finish_reason, "prompt_tokens": g.prompt_tokens,
                                "completion_tokens": g.completion_tokens,
                                "seconds": round((g.finished_at or time.perf_counter()) - (g.first_token_at or g.finished_at or 0), 4)
                                if g.first_token_at else 0.0})

    def cancel_all(self, wait: float = 0) -> bool:
        """Cancel every queued or running generation; with ``wait``, wait up to that many
        seconds for the model to be idle. True when it is."""
        with self._stats_lock:
            live = list(self._live)
        for g in live:
            g.cancel()
        if not wait:
            return not live
        if self._lock.acquire(timeout=wait):
            self._lock.release()
            return True
        return False

    def snapshot(self) -> dict:
        """Counters (queued, active, generations, cancelled, generated_tokens) and recent generations."""
        with self._stats_lock:
            return {**self.stats, "recent": list(self.recent)}

    def info(self) -> dict:
        return {"name": self.name, "model": self.model_dir, "adapter": self.adapter_dir, "kind": self.kind,
                "max_position": self.max_position, "chat_template": bool(self.template),
                "vocab_size": self.vocab_size}

    def _decode(self, ids: list[int]) -> str:
        if not ids:
            return ""
        return self.tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    # -- prompts
    def encode(self, messages, src_length: int | None = None) -> list[int]:
        """Prompt token ids of checked messages; ChatError when longer than the limit."""
        msgs = normalize_messages(messages)
        limit = min(src_length or self.max_position - 1, self.max_position - 1)
        why = f"src_length {src_length}" if src_length and src_length < self.max_position - 1 else \
            f"the model's context of {self.max_position} tokens, less one for the answer"
        if self._surely_over(msgs, limit) is not None:
            per = self.max_token_chars
            raise ChatError(f"messages: the prompt is over the limit of {limit} tokens ({why}): it holds more "
                            f"than {per * limit} characters, and one token of this model stands for at most {per}; "
                            f"shorten the conversation", "messages", code="context_length_exceeded")
        ids = templates.prompt_ids(self.tokenizer, self.template, msgs)
        if len(ids) > limit:
            raise ChatError(f"messages: the prompt is {len(ids)} tokens, over the limit of {limit} ({why}); "
                            f"shorten the conversation", "messages", code="context_length_exceeded")
        return ids

    def _surely_over(self, msgs: list[dict], limit: int) -> int | None:
        """Characters the prompt keeps after any normalization, when that many cannot fit in ``limit``
        tokens (at most ``max_token_chars`` each); None when it may fit (tokenize to know). Counts the
        text the tokenizer will see: the rendered template (a template may leave a message out), or
        every message (prompts without a template hold them all)."""
        per = self.max_token_chars
        if not per or sum(len(m["content"]) for m in msgs) <= per * limit:
            return None  # short enough that only tokenizing can tell
        if self.template:
            try:
                text = templates.render(self.template, msgs, self.tokenizer, add_generation_prompt=True)
            except Exception:  # noqa: BLE001 - a template that refuses these messages: tokenizing says how
                return None
        else:
            text = "\n".join(m["content"] for m in msgs)
        return kept_chars_over(text, per * limit)

    def _max_new(self, n_prompt: int, p: GenParams) -> int:
        room = self.max_position - n_prompt
        if p.max_new_tokens is None:
            return max(1, min(DEFAULT_MAX_NEW_TOKENS, room))
        if p.max_new_tokens > room:
            raise ChatError(f"max_new_tokens: the prompt is {n_prompt} tokens and the model's context is "
                            f"{self.max_position}, so at most {room} new tokens fit, got {brief(p.max_new_tokens)}",
                            "max_new_tokens", code="context_length_exceeded")
        return p.max_new_tokens

    def prepare(self, messages, params: GenParams | dict | None = None, **kw) -> tuple[list[int], GenParams, int]:
        """(prompt ids, checked params, max new tokens); raises ChatError before anything runs."""
        p = GenParams.of(params, **kw)
        ids = self.encode(messages, p.src_length)
        return ids, p, self._max_new(len(ids), p)

    # -- generation
    def _generate_ids(self, prompts: list[list[int]], p: GenParams, max_new: int, streamer=None, cancel=None):
        """model.generate on left-padded prompts; the caller holds the lock."""
        if self.static is not None:
            return self._static_ids(prompts, p, max_new, streamer)
        import numpy as np
        import paddle
        from paddlenlp.generation import GenerationConfig
        from paddlenlp.generation.stopping_criteria import StoppingCriteriaList

        n = max(len(x) for x in prompts)
        ids = np.full((len(prompts), n), self.pad_id, dtype="int64")
        att = np.zeros((len(prompts), n), dtype="int64")
        for k, x in enumerate(prompts):
            ids[k, n - len(x):], att[k, n - len(x):] = x, 1
        if p.seed is not None:
            paddle.seed(p.seed)
        cfg = GenerationConfig(
            max_new_tokens=max_new,
            min_new_tokens=max_new if p.ignore_eos else 0,
            decode_strategy="greedy_search" if p.greedy else "sampling",
            temperature=1.0 if p.greedy else float(p.temperature),
            top_k=min(int(p.top_k), self.vocab_size),  # more than the vocabulary is all of it
            top_p=float(p.top_p),
            repetition_penalty=float(p.repetition_penalty),
            eos_token_id=self.eos_id,
            pad_token_id=self.pad_id,
            bos_token_id=self.tokenizer.bos_token_id,
            use_cache=True,
        )
        crit = StoppingCriteriaList([_Cancelled(cancel)]) if cancel is not None else None
        with paddle.no_grad():
            res = self.model.generate(**layouts.generation_inputs(self.model, ids, att, self.own_positions, max_new),
                                      generation_config=cfg, streamer=streamer, stopping_criteria=crit,
                                      use_cache=True)
        gen = res[0] if isinstance(res, (tuple, list)) else res
        return gen.numpy().tolist()

    def _static_ids(self, prompts: list[list[int]], p: GenParams, max_new: int, streamer=None) -> list[list[int]]:
        """The static graph's answers: one run gives the whole answer (no token-by-token stream and no
        stop between tokens; a streamer gets the tokens at the end, then the EOS where the graph ended)."""
        import numpy as np

        rows = self.static.generate(prompts, max_new, greedy=p.greedy, temperature=float(p.temperature or 1.0),
                                    top_k=int(p.top_k), top_p=float(p.top_p), seed=p.seed,
                                    repetition_penalty=float(p.repetition_penalty),
                                    min_new_tokens=max_new if p.ignore_eos else 0)
        if streamer is not None:
            for t in rows[0] + ([self.eos_id] if len(rows[0]) < max_new else []):
                streamer.put(np.array([t]))
            streamer.end()
        return [r + ([self.eos_id] if len(r) < max_new else []) for r in rows]

    def start(self, messages, params: GenParams | dict | None = None, gen_id: str | None = None, **kw) -> Generation:
        """Check the request and start generating; returns the Generation (iterate it for deltas)."""
        ids, p, max_new = self.prepare(messages, params, **kw)
        return Generation(self, ids, p, max_new, gen_id)

    def stream(self, messages, params: GenParams | dict | None = None, **kw) -> Iterator[str]:
        """Text deltas of the answer; closing the generator (or breaking out of a for loop) cancels it."""
        g = self.start(messages, params, **kw)

        def deltas():
            try:
                yield from g
            finally:
                g.close()

        return deltas()

    def chat(self, messages, params: GenParams | dict | None = None, **kw) -> Generation:
        """The whole answer (a finished Generation: text, finish_reason, usage)."""
        return self.start(messages, params, **kw).result()

    def generate_batch(self, conversations: list, params: GenParams | dict | None = None,
                       batch_size: int = 16, **kw) -> list[dict]:
        """Answers for many conversations, batched (left padded): [{text, finish_reason, usage}].

        Sampling in a batch draws from one random stream, so answers can differ from one-by-one
        runs with the same seed; greedy answers are the same.
        """
        p = GenParams.of(params, **kw)
        if not isinstance(conversations, list) or not conversations:
            raise ChatError("conversations: expected a non-empty list of message lists", "conversations")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ChatError(f"batch_size: expected an integer >= 1, got {batch_size!r}", "batch_size")
        prompts = []
        for i, c in enumerate(conversations):
            try:
                prompts.append(self.encode(c, p.src_length))
            except ChatError as e:
                raise ChatError(f"conversations[{i}]: {e.message}", f"conversations[{i}].{e.param}", e.code) from e
        out: list[dict] = []
        if self.static is None:
            from core.models.evaluate import unpadded_only

            if unpadded_only(self.model):  # GPT's generate attends the padding of a batch: one at a time
                batch_size = 1
        for i in range(0, len(prompts), batch_size):
            chunk = prompts[i:i + batch_size]
            max_new = self._max_new(max(len(x) for x in chunk), p)
            self._stat("queued", +1)
            with self._lock:
                self._stat("queued", -1)
                self._stat("active", +1)
                try:
                    rows = self._generate_ids(chunk, p, max_new)
                finally:
                    self._stat("active", -1)
            for prompt, row in zip(chunk, rows):
                stop = self.eos_id in row and not p.ignore_eos
                toks = row[: row.index(self.eos_id) + 1] if stop else row[:max_new]
                ans = toks[:-1] if stop else toks
                text = self._decode(ans)
                reason = "stop" if stop else "length"
                if p.stop:
                    hits = [j for j in (text.find(s) for s in p.stop) if j >= 0]
                    if hits:
                        text, reason = text[:min(hits)], "stop"
                out.append({"text": text, "finish_reason": reason,
                            "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(toks),
                                      "total_tokens": len(prompt) + len(toks)}})
        with self._stats_lock:
            self.stats["generations"] += len(out)
            self.stats["generated_tokens"] += sum(o["usage"]["completion_tokens"] for o in out)
        return out

