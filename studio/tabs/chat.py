"""Chat tab: a client of `paddle-studio serve` workers (the studio never holds model weights).

Load starts a serve worker job for the picked model (workspace models, merged and quantized
models, run outputs and adapters); Unload stops it. Workers are jobs (core.chat.workers), so a
reload and the Jobs tab see the same ones; a worker ends by itself once the studio that loaded it
is gone, or after 30 min without a request. Answers
stream token by token over HTTP; Stop closes the stream, which makes the worker stop
generating, and the answer ends there with the "Stopped." note (Stop cancels no event: a cancelled
event never sent its last update, so the note and the last words were lost). Compare sends one
prompt to two models side by side. A stream that fails shows a plain message, never Python's.
"""

from __future__ import annotations

import json
import queue
import re
import shlex
import sys
import threading
import time
import traceback

import gradio as gr

from core import catalog, workspace
from core.chat import server as serve
from core.chat.workers import context_at, load, loaded, unload, worker_for
from core.data import preferences
from studio.locales import TEXT, t

UPDATE_S = 0.1  # the most often a streaming answer is sent to the page

_lock = threading.Lock()
_turns: dict[str, list[Turn]] = {}  # browser session -> the answers it streams (Stop closes their streams)

# A stream's failure as the answer shows it (a locale key). The worker's own message is shown only
# for a request it refused (4xx, written for clients).
FAILURES = {"worker_unreachable": "chat.worker_unreachable", "connection_lost": "chat.connection_lost",
            "failed": "chat.answer_failed"}


# ---------------------------------------------------------------- models and workers


def model_choices(lang: str = "en") -> list[tuple[str, str]]:
    """(label, key) for every model a worker can serve; key is "model:DIR" or "adapter:DIR". The
    label's kind ("base", "merged", …) in ``lang`` (an adapter's kind, "lora", … is its name)."""
    out = []
    for m in catalog.models():
        label = m["label"]
        if lang != "en" and not m.get("adapter") and f"models.kind_{m['kind']}" in TEXT:
            label = f"{label.rsplit(' (', 1)[0]} ({t('models.kind_' + m['kind'], lang)})"
        out.append((label, f"adapter:{m['path']}" if m["kind"] == "adapter" else f"model:{m['path']}"))
    return out


# ---------------------------------------------------------------- requests


def gen_params(temperature, top_p, top_k, repetition_penalty, max_tokens, seed, ignore_eos=False) -> dict:
    p = {"temperature": float(temperature or 0), "top_p": float(top_p or 1), "top_k": int(top_k or 0),
         "repetition_penalty": float(repetition_penalty or 1), "max_tokens": int(max_tokens or 64)}
    if ignore_eos:
        p["ignore_eos"] = True
    if seed is not None and str(seed).strip() != "" and int(seed) >= 0:
        p["seed"] = int(seed)
    return p


def _text(content) -> str:
    """A Chatbot message's content as text (the browser may send a list of content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return str(content.get("text") or content.get("content") or "")
    if isinstance(content, (list, tuple)):
        return "".join(_text(c) for c in content)
    return "" if content is None else str(content)


def plain(history) -> list[dict]:
    return [{"role": m["role"], "content": _text(m.get("content"))} for m in (history or []) if m.get("role") in ("user", "assistant")]


def request_messages(history: list[dict], system: str) -> list[dict]:
    msgs = [{"role": "system", "content": system}] if (system or "").strip() else []
    return msgs + [{"role": m["role"], "content": m["content"]} for m in history if m.get("role") in ("user", "assistant")]


def api_snippet(w: serve.Worker | None, messages: list[dict], params: dict) -> str:
    """The same request as curl and as the openai Python client."""
    if w is None:
        return ""
    body = {"model": w.name, "messages": messages, **params}
    py_params = "".join(f", {k}={v!r}" for k, v in params.items() if k in ("temperature", "top_p", "max_tokens", "seed"))
    extra = {k: v for k, v in params.items() if k in ("top_k", "repetition_penalty")}
    return (
        f"# curl (streaming)\ncurl -N {w.url}/v1/chat/completions -H 'Content-Type: application/json' \\\n"
        f"  -d {shlex.quote(json.dumps({**body, 'stream': True}, ensure_ascii=False))}\n\n"
        "# Python (pip install openai)\nfrom openai import OpenAI\n"
        f"client = OpenAI(base_url='{w.url}/v1', api_key='none')\n"
        f"stream = client.chat.completions.create(model={w.name!r}, messages={messages!r}{py_params}, stream=True"
        + (f", extra_body={extra!r}" if extra else "") + ")\n"
        "for chunk in stream:\n    print(chunk.choices[0].delta.content or '', end='', flush=True)\n"
    )


class Turn:
    """One answer of a browser session: its streams, and whether Stop was clicked."""

    def __init__(self):
        self.streams: list = []
        self.stopped = False


def failure_text(e: Exception, lang: str) -> str:
    """What the answer says when its stream failed (Python's own text goes to the studio's log)."""
    if isinstance(e, serve.ServeError) and e.status is not None and 400 <= e.status < 500:
        return e.message  # a request the worker refused: its message is written for clients
    code = e.code if isinstance(e, serve.ServeError) and e.code in FAILURES else "failed"
    if code == "failed":  # not foreseen: the details are for the studio's log
        sys.stderr.write("paddle-studio: a chat answer failed:\n"
                         + "".join(traceback.format_exception(type(e), e, e.__traceback__)))
    return t(FAILURES[code], lang)


def refused(e: Exception) -> bool:
    """Whether a stream's failure is the worker refusing the request (4xx: nothing was generated)."""
    return isinstance(e, serve.ServeError) and e.status is not None and 400 <= e.status < 500


_ROOM = re.compile(r"the prompt is (\d+) tokens and the model's context is (\d+), so at most (-?\d+) new tokens fit, "
                   r"got (\S+)")


def refusal_text(e: serve.ServeError, model: str, lang: str) -> str:
    """A request the worker refused, as the page's note says it (in ``lang`` where the refusal is known)."""
    m = _ROOM.search(e.message or "") if e.code == "context_length_exceeded" else None
    if m:  # max_tokens (max_new_tokens) past the room the prompt leaves
        return t("chat.max_tokens_room", lang, prompt=m[1], ctx=m[2], room=max(0, int(m[3])), got=m[4], model=model)
    if e.code == "context_length_exceeded" and e.param in ("messages", "history"):
        return t("chat.prompt_too_long", lang, model=model)
    return t("chat.refused", lang, model=model, detail=e.message)


def over_context(workers: list, max_tokens, lang: str) -> str | None:
    """The note refusing ``max_tokens`` before anything is sent, when it is over what a loaded model's
    context holds (its prompt needs one token at least); None when it may fit (the worker then checks
    it against the prompt, and a refusal goes to the note as well)."""
    for w in workers:
        ctx = context_at(w.url) if w is not None else None
        if ctx and int(max_tokens or 0) >= ctx:
            return t("chat.max_tokens_over", lang, got=int(max_tokens), model=w.name or "", ctx=ctx, most=ctx - 1)
    return None


def shown(on: bool, n: int = 4) -> list[dict]:
    """Show or hide ``n`` components that stay in the page (the compare-mode parts)."""
    return [gr.update(visible=True if on else "hidden")] * n


def _read(stream, side: int, q: queue.Queue) -> None:
    try:
        for delta in stream:
            q.put((side, "delta", delta))
        q.put((side, "done", stream.finish_reason))
    except Exception as e:  # noqa: BLE001 - shown in the chat as a plain message, never raised into the UI
        q.put((side, "error", e))


def stream_both(session: str, histories: list[list[dict]], workers: list, system: str, params: dict, lang: str,
                turn: Turn | None = None):
    """Yield (history A, history B, status) while both answers stream; the last user turn is already in.
    ``turn``: the session's answer (begin() made it), so a Stop clicked meanwhile reaches it."""
    turn = turn or begin(session)
    q: queue.Queue = queue.Queue()
    live = 0
    notes = []
    try:
        for side, (hist, w) in enumerate(zip(histories, workers)):
            if w is None:
                continue
            hist.append({"role": "assistant", "content": ""})
            s = serve.stream_chat(w.url, request_messages(hist[:-1], system), **params)
            with _lock:
                stopped = turn.stopped
                if not stopped:
                    turn.streams.append(s)
            if stopped:  # Stop came before the request went out
                q.put((side, "done", "cancelled"))
            else:
                threading.Thread(target=_read, args=(s, side, q), daemon=True).start()
            live += 1
        yield histories[0], histories[1], ""
        # Deltas are gathered and sent at most every UPDATE_S: a page re-rendering the chat for every
        # token keeps the browser's main thread so busy that a click on Stop waits for the stream to end.
        last, pending = time.monotonic(), False
        while live:
            wait = max(0.0, last + UPDATE_S - time.monotonic()) if pending else None
            try:
                side, what, val = q.get(timeout=wait)
            except queue.Empty:
                last, pending = time.monotonic(), False
                yield histories[0], histories[1], " ".join(dict.fromkeys(notes))
                continue
            pending = True
            if what == "delta":
                histories[side][-1]["content"] += val
                if time.monotonic() - last < UPDATE_S:
                    continue
            else:
                live -= 1
                if what == "error" and refused(val) and not histories[side][-1]["content"]:
                    # refused before a word was generated: no answer bubble, the note says why
                    histories[side].pop()
                    notes.append(refusal_text(val, workers[side].name or "", lang))
                elif what == "error":
                    histories[side][-1]["content"] += f"\n\n[{t('error.prefix', lang)}{failure_text(val, lang)}]"
                elif val == "cancelled":
                    notes.append(t("chat.stopped", lang))
                elif val == "length":
                    notes.append(t("chat.length", lang))
            last, pending = time.monotonic(), False
            yield histories[0], histories[1], " ".join(dict.fromkeys(notes))
    finally:
        end(session, turn)


def begin(session: str) -> Turn:
    """Register a new answer of the session (a Stop from now on reaches it)."""
    turn = Turn()
    with _lock:
        _turns.setdefault(session, []).append(turn)
    return turn


def end(session: str, turn: Turn) -> None:
    with _lock:
        turn.stopped = True  # a stream started after this would never be read
        streams = list(turn.streams)
        left = [x for x in _turns.get(session, []) if x is not turn]
        if left:
            _turns[session] = left
        else:
            _turns.pop(session, None)
    for s in streams:
        s.close()


def stop_session(session: str) -> int:
    """Stop the session's answers: each stream ends as "cancelled" (the worker stops generating)."""
    with _lock:
        streams = []
        for turn in _turns.get(session, []):
            turn.stopped = True
            streams += turn.streams
    for s in streams:
        s.close()
    return len(streams)


# ---------------------------------------------------------------- the tab


def build_chat_tab(ctx):
    tr = ctx.tr
    with tr(gr.Tab(ctx.text("chat.tab"), id="chat", elem_id="tab-chat"), "chat.tab") as tab:
        with gr.Row():
            choices = model_choices(ctx.initial_lang)
            model_a = tr(gr.Dropdown(choices, value=None, label=ctx.text("chat.model"), elem_id="chat-model"), "chat.model")
            model_b = tr(gr.Dropdown([("—", ""), *choices], value="", label=ctx.text("chat.compare"),
                                     elem_id="chat-compare"), "chat.compare")
        with gr.Row():
            load_btn = tr(gr.Button(ctx.text("chat.load"), variant="primary", elem_id="chat-load"), "chat.load", "value")
            unload_btn = tr(gr.Button(ctx.text("chat.unload"), elem_id="chat-unload"), "chat.unload", "value")
        status = gr.Markdown(elem_id="chat-status")
        with tr(gr.Accordion(ctx.text("chat.settings"), open=False), "chat.settings"):
            system = tr(gr.Textbox(label=ctx.text("chat.system"), lines=2, elem_id="chat-system"), "chat.system")
            with gr.Row():
                temperature = tr(gr.Slider(0, 2, value=0, step=0.05, label=ctx.text("chat.temperature")), "chat.temperature")
                top_p = tr(gr.Slider(0.05, 1, value=1, step=0.05, label="top_p"), "chat.top_p")
                top_k = tr(gr.Number(0, precision=0, minimum=0, label="top_k"), "chat.top_k")
            with gr.Row():
                rep = tr(gr.Slider(1, 2, value=1, step=0.05, label=ctx.text("chat.repetition_penalty")),
                         "chat.repetition_penalty")
                # no fixed maximum: what fits is the loaded model's context (checked before sending)
                max_tokens = tr(gr.Number(64, precision=0, minimum=1, label=ctx.text("chat.max_tokens"),
                                          elem_id="chat-max-tokens"), "chat.max_tokens")
                seed = tr(gr.Number(-1, precision=0, label=ctx.text("chat.seed")), "chat.seed")
            ignore_eos = tr(gr.Checkbox(False, label=ctx.text("chat.ignore_eos"), elem_id="chat-ignore-eos"),
                            "chat.ignore_eos")
        with gr.Row():
            chat_a = gr.Chatbot(height=320, elem_id="chat-a", show_label=False)
            chat_b = gr.Chatbot(height=320, elem_id="chat-b", show_label=False)
        with gr.Row():
            msg = tr(gr.Textbox(label=ctx.text("chat.message"), scale=4, elem_id="chat-input"), "chat.message")
            send = tr(gr.Button(ctx.text("chat.send"), variant="primary", scale=0, elem_id="chat-send"), "chat.send", "value")
        with gr.Row():
            stop = tr(gr.Button(ctx.text("chat.stop"), variant="stop", elem_id="chat-stop"), "chat.stop", "value")
            regen = tr(gr.Button(ctx.text("chat.regenerate"), elem_id="chat-regen"), "chat.regenerate", "value")
            clear = tr(gr.Button(ctx.text("chat.clear"), elem_id="chat-clear"), "chat.clear", "value")
        note = gr.Markdown(elem_id="chat-note")
        # compare mode only (a second model picked): keep the better answer as a preference pair, then
        # train DPO on them. Hidden as "hidden", not False, so they stay in the page: Gradio 6.17 mounts a
        # visible=False component lazily and could then apply a stale visible=False after a later
        # visible=True (the buttons never showed); a Row takes no "hidden", so each part is hidden.
        with gr.Row(elem_id="chat-compare-row"):
            pref_name = tr(gr.Textbox("chat-prefs", label=ctx.text("chat.pref_dataset"), scale=2,
                                      elem_id="chat-pref-name", visible="hidden"), "chat.pref_dataset")
            a_better = tr(gr.Button(ctx.text("chat.a_better"), scale=1, elem_id="chat-a-better", visible="hidden"),
                          "chat.a_better", "value")
            b_better = tr(gr.Button(ctx.text("chat.b_better"), scale=1, elem_id="chat-b-better", visible="hidden"),
                          "chat.b_better", "value")
            train_dpo = tr(gr.Button(ctx.text("chat.train_dpo"), scale=1, elem_id="chat-train-dpo", visible="hidden"),
                           "chat.train_dpo", "value")
        compare_parts = [pref_name, a_better, b_better, train_dpo]
        pref_note = gr.Markdown(elem_id="chat-pref-note")
        to_train = gr.Textbox(visible=False)  # set when the Train form was filled in: the page then shows Train
        with tr(gr.Accordion(ctx.text("chat.api"), open=False), "chat.api"):
            api = gr.Code(language="shell", interactive=False, show_label=False, elem_id="chat-api")
    lang = ctx.lang
    settings = [system, temperature, top_p, top_k, rep, max_tokens, seed, ignore_eos]

    def describe(a, b, lg):
        lines = []
        for key in [a, b]:
            if not key:
                continue
            w = worker_for(key)
            label = key.partition(":")[2]
            lines.append(t("chat.loaded", lg, model=label, url=w.url, pid=w.pid) if w else t("chat.not_loaded", lg, model=label))
        # workers serving other models (loaded before a reload, or from another page) are named too
        others = [w["key"].partition(":")[2] for w in loaded() if w.get("key") and w["key"] not in (a, b)]
        if others:
            names = ", ".join(f"`{o}`" for o in others)
            lines.append(t("chat.running_also" if lines else "chat.running", lg, names=names))
        return "  \n".join(lines) or t("chat.pick_first", lg)

    def on_load(a, b, lg):
        """A reload shows the running workers at once: the first one is picked when none is."""
        c = model_choices(lg)
        keys = {k for _, k in c}
        if not a:
            a = next((w["key"] for w in loaded() if w.get("key") in keys), None)
        b = b if b and b != a else ""
        return (gr.update(choices=c, value=a), gr.update(choices=[("—", ""), *c], value=b), describe(a, b, lg),
                *shown(bool(b)))

    def do_load(a, b, lg):
        if not a:
            return t("chat.pick_first", lg)
        try:
            for key in dict.fromkeys(k for k in (a, b) if k):
                load(key)
        except Exception as e:  # noqa: BLE001 - the worker's own message (its log tail)
            return t("error.prefix", lg) + str(e)
        return describe(a, b, lg)

    def do_unload(a, b, lg):
        for key in (a, b):
            if key:
                unload(key)
        return describe(a, b, lg)

    def send_fn(text, ha, hb, a, b, sys_, temp, tp, tk, rp, mt, sd, ie, lg, request: gr.Request):
        ha, hb = plain(ha), plain(hb)
        text = (text or "").strip()
        if not text:
            yield ha, hb, t("chat.empty", lg), gr.skip(), gr.skip()
            return
        turn = begin(request.session_hash)  # before the worker lookup: a Stop from now on ends this answer
        wa, wb = worker_for(a), worker_for(b) if b else None
        if wa is None:
            end(request.session_hash, turn)
            yield ha, hb, t("chat.load_first", lg), gr.skip(), gr.skip()
            return
        over = over_context([wa, wb], mt, lg)
        if over:  # refused here, before sending: nothing enters the conversation
            end(request.session_hash, turn)
            yield ha, hb, over, gr.skip(), gr.skip()
            return
        params = gen_params(temp, tp, tk, rp, mt, sd, ie)
        ha.append({"role": "user", "content": text})
        if wb is not None:
            hb.append({"role": "user", "content": text})
        snippet = api_snippet(wa, request_messages(ha, sys_), params)
        n = ""
        for xa, xb, n in stream_both(request.session_hash, [ha, hb], [wa, wb], sys_, params, lg, turn):
            yield xa, xb, n, "", snippet
        # a side whose worker refused the request has no answer: the message leaves both sides and
        # goes back into the box, and the note says why
        if any(h and h[-1]["role"] == "user" for h in (ha, hb)):
            for h in (ha, hb):
                if h and h[-1]["role"] == "user":
                    h.pop()
            yield ha, hb, n, text, snippet

    def regen_fn(ha, hb, a, b, sys_, temp, tp, tk, rp, mt, sd, ie, lg, request: gr.Request):
        ha, hb = plain(ha), plain(hb)
        last = next((m["content"] for m in reversed(ha) if m["role"] == "user"), None)
        for h in (ha, hb):
            while h and h[-1]["role"] == "assistant":
                h.pop()
            if h and h[-1]["role"] == "user":
                h.pop()
        yield from send_fn(last, ha, hb, a, b, sys_, temp, tp, tk, rp, mt, sd, ie, lg, request)

    def stop_fn(request: gr.Request):
        stop_session(request.session_hash)

    outs = [chat_a, chat_b, note, msg, api]
    # Stop closes the answer's streams and the answer ends by itself, with its last words and the
    # "Stopped." note (cancelling the event instead dropped both, and raced the reader's end). So
    # that Stop reaches every answer, none waits in the page's queue (concurrency_limit=None): a
    # worker queues the requests it gets itself, and drops a queued one whose stream is closed.
    ev = dict(outputs=outs, show_progress="hidden", concurrency_limit=None)
    send.click(send_fn, inputs=[msg, chat_a, chat_b, model_a, model_b, *settings, lang], **ev)
    msg.submit(send_fn, inputs=[msg, chat_a, chat_b, model_a, model_b, *settings, lang], **ev)
    regen.click(regen_fn, inputs=[chat_a, chat_b, model_a, model_b, *settings, lang], **ev)
    stop.click(stop_fn, show_progress="hidden", concurrency_limit=None)
    clear.click(lambda: ([], [], ""), outputs=[chat_a, chat_b, note])
    load_btn.click(do_load, inputs=[model_a, model_b, lang], outputs=status)
    unload_btn.click(do_unload, inputs=[model_a, model_b, lang], outputs=status)
    for dd in (model_a, model_b):
        dd.change(describe, inputs=[model_a, model_b, lang], outputs=status, show_progress="hidden")
    model_b.change(lambda b: shown(bool(b)), inputs=model_b, outputs=compare_parts, show_progress="hidden")
    ctx.on_load.append((on_load, [model_a, model_b, lang], [model_a, model_b, status, *compare_parts]))

    def prefer(better, ha, hb, sys_, name, lg):
        try:
            rec = preferences.record(plain(ha), plain(hb), better, sys_)
            meta = preferences.append((name or "").strip(), rec)
        except preferences.PreferenceError as e:
            return t("error.prefix", lg) + (t(f"chat.pref_{e.code}", lg, **e.params) if f"chat.pref_{e.code}" in TEXT else str(e))
        except OSError as e:
            return t("error.prefix", lg) + t("error.unexpected", lg, detail=str(e))
        return t("chat.pref_saved", lg, side=better.upper(), name=meta["name"], n=meta["train"])

    a_better.click(lambda *v: prefer("a", *v), inputs=[chat_a, chat_b, system, pref_name, lang], outputs=pref_note,
                   show_progress="hidden")
    b_better.click(lambda *v: prefer("b", *v), inputs=[chat_a, chat_b, system, pref_name, lang], outputs=pref_note,
                   show_progress="hidden")
    run_name, spec, widgets, preset_box = ctx.train_form

    def fill_train(name, a, lg):
        from studio.tabs.train import config_to_values

        name = (name or "").strip()
        d = workspace.datasets_dir() / name
        if not name or not (d / "train.json").is_file():
            return [t("chat.pref_none", lg, name=name), ""] + [gr.skip()] * (len(widgets) + 1 + len(preset_box))
        cfg = preferences.dpo_config(d, a.partition(":")[2] if a else None)
        # no preset holds this DPO run: the preset box and its description are cleared
        return [t("chat.pref_filled", lg, name=name), "train"] + [cfg.name, *config_to_values(spec, cfg), None, ""]

    ctx.go_to(train_dpo.click(fill_train, inputs=[pref_name, model_a, lang],
                              outputs=[pref_note, to_train, run_name, *widgets, *preset_box]), "train", to_train)

    def lists(lg):
        c = model_choices(lg)
        return gr.update(choices=c), gr.update(choices=[("—", ""), *c])

    ctx.picker(tab, lists, [lang], [model_a, model_b])
    ctx.relocalize.append((lambda a, b, lg: (describe(a, b, lg), *shown(bool(b)), *lists(lg)),
                           [model_a, model_b, lang], [status, *compare_parts, model_a, model_b]))
    return model_a
