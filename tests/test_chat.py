"""core.chat.engine: parameter and message checks (fast), and the engine on the demo model (slow):
streaming equals the whole answer, cancel stops the model, batch equals one-by-one, seeds
reproduce, stop strings, limits, a prefix adapter, the `chat` CLI verb."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.chat.engine import ChatError, GenParams, messages_from, normalize_messages
from core.chat.server import ApiError, check_bind, parse_body, parse_request
from core.system import is_loopback

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ["翻译成英文：红色的苹果", "What is 3 plus 4?", "type#dress*color#red*style#casual", "把这些词倒序排列：苹果 月亮"]


def user(text):
    return [{"role": "user", "content": text}]


# ---------------------------------------------------------------- fast


def test_params_collect_every_problem():
    with pytest.raises(ChatError) as e:
        GenParams.of(temperature=-1, top_p=0, top_k=-2, max_new_tokens=0, repetition_penalty=0, seed=1.5)
    fields = [f for f, _ in e.value.problems]
    assert fields == ["max_new_tokens", "temperature", "top_p", "top_k", "repetition_penalty", "seed"]
    assert e.value.param == "max_new_tokens" and "temperature: expected a number in [0, 2]" in str(e.value)
    assert GenParams.of(temperature=0).greedy and not GenParams.of().greedy
    assert GenParams.of(stop="x").stop == ["x"]
    for bad in ({"top_p": 1.01}, {"temperature": True}, {"max_new_tokens": "3"}, {"temperature": float("nan")},
                {"stop": [""]}, {"ignore_eos": "yes"}, {"src_length": 0}):
        with pytest.raises(ChatError):
            GenParams.of(**bad)
    with pytest.raises(ChatError) as e:
        GenParams.of(beams=3)
    assert e.value.code == "unknown_parameter"


def test_messages_are_checked():
    sys_msgs = normalize_messages([{"role": "system", "content": "a"}, {"role": "developer", "content": "b"},
                                   {"role": "user", "content": [{"type": "text", "text": "hi "}, {"type": "text", "text": "you"}]}])
    assert sys_msgs == [{"role": "system", "content": "a\nb"}, {"role": "user", "content": "hi you"}]
    cases = [
        ([], "messages"),
        ("hi", "messages"),
        ([{"role": "bot", "content": "x"}], "messages[0].role"),
        ([{"role": "user", "content": "x"}, {"role": "system", "content": "late"}], "messages[1].role"),
        ([{"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}], "messages[0].role"),
        ([{"role": "user", "content": "x"}, {"role": "user", "content": "y"}], "messages[1].role"),
        ([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], "messages"),
        ([{"role": "user", "content": {"a": 1}}], "messages[0].content"),
        ([{"role": "user", "content": [{"type": "image_url"}]}], "messages[0].content"),
        (["x"], "messages[0]"),
    ]
    for msgs, param in cases:
        with pytest.raises(ChatError) as e:
            normalize_messages(msgs)
        assert e.value.param == param, (msgs, e.value.param)


def test_paddlenlp_context_and_history():
    want = [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}]
    assert messages_from("q2", ["q1", "a1"]) == want
    assert messages_from("q2", json.dumps([{"utterance": "q1"}, {"utterance": "a1"}])) == want
    assert messages_from("q", None, system="s")[0] == {"role": "system", "content": "s"}
    with pytest.raises(ChatError, match="history"):
        messages_from("q2", ["q1"])
    with pytest.raises(ChatError, match="context"):
        messages_from(None)


def test_parse_request_maps_fields():
    msgs, params, names, stream, usage = parse_request(
        {"model": "m", "messages": user("hi"), "max_tokens": 5, "max_length": 9, "top_k": 3, "temperature": None,
         "stream": True, "stream_options": {"include_usage": True}}, {"m"})
    assert params == {"max_new_tokens": 5, "top_k": 3} and names["max_new_tokens"] == "max_tokens"
    assert stream and usage and msgs == user("hi")
    _, params, names, stream, _ = parse_request({"context": "hi", "history": [], "max_length": 9, "src_length": 64}, {"m"})
    assert params == {"max_new_tokens": 9, "src_length": 64} and names["max_new_tokens"] == "max_length" and not stream
    for body, param in (({"model": "x", "messages": user("hi")}, "model"), ({"messages": user("hi"), "n": 3}, "n"),
                        ({}, "messages"), ([], None), ({"messages": user("hi"), "presence_penalty": 5}, "presence_penalty")):
        with pytest.raises(ApiError) as e:
            parse_request(body, {"m"})
        assert e.value.status == 400 and e.value.param == param


def test_hostile_fields_get_specific_errors():
    """Wrong types where a hashable was assumed, strict JSON, and bad values named briefly."""
    for body, param, words in (({"model": ["a"], "messages": user("hi")}, "model", "expected a string"),
                               ({"model": {"a": 1}, "messages": user("hi")}, "model", "got an object"),
                               ({"messages": user("hi"), "n": True}, "n", "only 1"),
                               ({"messages": user("hi"), "stream_options": []}, "stream_options", "got an array"),
                               ({"messages": user("hi"), "stream_options": {"include_usage": 1}},
                                "stream_options.include_usage", "true or false"),
                               ({"model": "x" * 100_000, "messages": user("hi")}, "model", "unknown model")):
        with pytest.raises(ApiError) as e:
            parse_request(body, {"m"})
        assert e.value.status == 400 and e.value.param == param and words in e.value.message, e.value.message
        assert len(e.value.message) < 300
    with pytest.raises(ChatError) as e:
        messages_from("hi", "[" * 100_000 + "]" * 100_000)
    assert e.value.param == "history" and "nested" in e.value.message
    with pytest.raises(ChatError) as e:
        messages_from("hi", [], system=["a"])
    assert e.value.param == "system"
    with pytest.raises(ChatError) as e:
        GenParams.of(temperature="x" * 1_000_000)
    assert len(e.value.message) < 200
    for data, words in ((b"", "empty"), (b'{"a": NaN}', "NaN is not a JSON number"), (b"[" * 100_000, "nested"),
                        (b'{"a": "\xff"}', "UTF-8"), (b"1" * 5000, "digits"), (b"{x", "not valid JSON")):
        with pytest.raises(ApiError) as e:
            parse_body(data)
        assert e.value.status == 400 and words in e.value.message, (data[:20], e.value.message)
    assert parse_body(b'{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]}


def test_worker_lifetime(monkeypatch, tmp_path):
    """Who owns a worker and when it ends by itself: a headless `serve` has no owner and no idle
    timeout; an owner is a pid and its start time, so a reused pid does not keep a worker alive."""
    from core import jobs
    from core.chat import server

    for k in (server.OWNER_ENV, server.IDLE_ENV, "STUDIO_JOB_DIR"):
        monkeypatch.delenv(k, raising=False)
    assert server.resolve_lifetime() == (None, None, None)
    me, my_start = os.getpid(), jobs.proc_start(os.getpid())
    monkeypatch.setenv(server.OWNER_ENV, str(me))
    assert server.resolve_lifetime() == (me, my_start, server.IDLE_S)
    monkeypatch.setenv(server.IDLE_ENV, "0")
    assert server.resolve_lifetime() == (me, my_start, None)
    monkeypatch.setenv(server.OWNER_ENV, "12:34.5")
    monkeypatch.setenv(server.IDLE_ENV, "90")
    assert server.resolve_lifetime() == (12, 34.5, 90.0)
    for bad in ("x", "-3", "1:y"):
        monkeypatch.setenv(server.OWNER_ENV, bad)
        with pytest.raises(ValueError, match=server.OWNER_ENV):
            server.resolve_lifetime()
    monkeypatch.delenv(server.OWNER_ENV)
    monkeypatch.delenv(server.IDLE_ENV)
    (tmp_path / "job.json").write_text(json.dumps({"params": {"owner": me, "owner_start": my_start}}))
    monkeypatch.setenv("STUDIO_JOB_DIR", str(tmp_path))  # a studio worker: its job names the owner
    assert server.resolve_lifetime() == (me, my_start, server.IDLE_S)

    w = server.Watch(me, my_start)
    assert w.why() is None
    assert server.Watch(me, my_start + 1).why()[0] == "owner_gone"  # the same pid, another process
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_start = jobs.proc_start(dead.pid)
    dead.wait()
    assert server.Watch(dead.pid, dead_start).why()[0] == "owner_gone"
    now = [0.0]
    w = server.Watch(idle_s=10, clock=lambda: now[0])
    now[0] = 9.9
    assert w.why() is None
    now[0] = 20
    assert w.why(busy=True) is None  # a generation running: never idle, and the clock starts again
    now[0] = 29.9
    assert w.why() is None
    now[0] = 30
    assert w.why() == ("idle", "no request for 10 s")
    w.touch()
    assert w.why() is None


def test_bind_rules():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost") and is_loopback("127.0.0.2")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4") and not is_loopback("example.com")
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", "key")
    with pytest.raises(ValueError, match="--api-key"):
        check_bind("0.0.0.0", None)


# ---------------------------------------------------------------- slow: the demo model


@pytest.fixture(scope="module")
def engine(demo_home):
    from core.chat.engine import ChatEngine

    return ChatEngine(demo_home / "models" / "demo-base")


@pytest.mark.slow
def test_stream_joins_to_the_answer(engine):
    for p in PROMPTS:
        for kw in ({"temperature": 0}, {"temperature": 1.0, "top_p": 0.95, "top_k": 40, "seed": 3}):
            whole = engine.chat(user(p), max_new_tokens=40, **kw)
            deltas = list(engine.stream(user(p), max_new_tokens=40, **kw))
            assert "".join(deltas) == whole.text
            assert whole.finish_reason in ("stop", "length") and 1 <= whole.completion_tokens <= 40
            assert whole.usage["total_tokens"] == whole.prompt_tokens + whole.completion_tokens
    a = engine.chat(user(PROMPTS[2]), temperature=1.2, seed=5, max_new_tokens=30, ignore_eos=True)
    b = engine.chat(user(PROMPTS[2]), temperature=1.2, seed=5, max_new_tokens=30, ignore_eos=True)
    assert a.text == b.text and a.completion_tokens == 30 and a.finish_reason == "length"


@pytest.mark.slow
def test_cancel_stops_the_model(engine):
    before = engine.snapshot()["cancelled"]
    g = engine.start(user(PROMPTS[0]), temperature=0, max_new_tokens=400, ignore_eos=True)
    for i, _ in enumerate(g):
        if i == 2:
            break
    g.close()
    assert g.finish_reason == "cancelled" and g.completion_tokens < 50
    snap = engine.snapshot()
    assert snap["cancelled"] == before + 1 and snap["active"] == 0 and snap["recent"][-1]["id"] == g.id
    # closing the stream() generator cancels too
    s = engine.stream(user(PROMPTS[1]), temperature=0, max_new_tokens=400, ignore_eos=True)
    next(s)
    s.close()
    assert engine.snapshot()["recent"][-1]["finish_reason"] == "cancelled"
    assert engine.snapshot()["recent"][-1]["completion_tokens"] < 50
    # cancel_all (what the server does on SIGTERM) stops a running and a queued answer
    g1 = engine.start(user(PROMPTS[0]), temperature=0, max_new_tokens=400, ignore_eos=True)
    g2 = engine.start(user(PROMPTS[1]), temperature=0, max_new_tokens=400, ignore_eos=True)
    next(g1)
    assert engine.cancel_all(wait=30)
    assert g1.result().finish_reason == "cancelled" and g1.completion_tokens < 50
    assert g2.result().finish_reason == "cancelled" and g2.completion_tokens == 0


@pytest.mark.slow
def test_a_prompt_surely_too_long_is_refused_before_tokenizing(engine, monkeypatch):
    """More characters than the context can hold, at the most characters one token of this tokenizer
    stands for, is refused without tokenizing; what might fit is tokenized as before (whitespace,
    marks and the like do not count: normalization may drop or merge them)."""
    import random
    import time

    from core.chat import engine as eng
    from core.data import templates

    per, limit = engine.max_token_chars, engine.max_position - 1
    assert per == max(len(p) for p in engine.tokenizer.get_vocab())
    real = templates.prompt_ids
    calls = []
    monkeypatch.setattr(templates, "prompt_ids", lambda *a, **k: calls.append(1) or real(*a, **k))
    t = time.perf_counter()
    for text in ("apple banana " * 600_000, "翻译成英文：红色的苹果" * 600_000):
        with pytest.raises(ChatError) as e:
            engine.encode(user(text))
        assert e.value.code == "context_length_exceeded" and e.value.param == "messages"
    assert calls == [] and time.perf_counter() - t < 2.0
    # over the bound in raw characters but not in kept ones: tokenized, and it fits
    ws = user("hi" + " " * (per * limit) + "\u0301" * 100)
    assert engine.encode(ws) and calls
    # random mixes just past the bound: whenever the shortcut refuses, tokenizing agrees
    rnd = random.Random(5)
    alphabet = list("ab  \n\t中文") + ["\u0301", "\u00b4", "가", "\u3131", "\u1100", "\u1161", "\u200b", "😀", "<|user|>",
                                          "material"]
    refused = 0
    for _ in range(20):
        text = "".join(rnd.choices(alphabet, [rnd.random() for _ in alphabet], k=per * limit))
        if engine._surely_over(user(text), limit) is not None:
            refused += 1
            assert len(real(engine.tokenizer, engine.template, user(text))) > limit
    print(f"\n{refused} of 20 random mixes refused without tokenizing (tokenizing agreed)")
    assert refused and eng.kept_chars_over("a b", 1) == 2 and eng.kept_chars_over(" \u0301\u200b", 0) is None


@pytest.mark.slow
def test_batch_equals_one_by_one(engine):
    convs = [user(p) for p in PROMPTS]
    batch = engine.generate_batch(convs, temperature=0, max_new_tokens=20, batch_size=3)
    for c, b in zip(convs, batch):
        one = engine.chat(c, temperature=0, max_new_tokens=20)
        assert b["text"] == one.text and b["finish_reason"] == one.finish_reason
        assert b["usage"] == one.usage


@pytest.mark.slow
def test_stop_strings_and_limits(engine):
    full = engine.chat(user(PROMPTS[2]), temperature=0, max_new_tokens=30, ignore_eos=True).text
    assert len(full) > 4
    cut = full[3:5]
    g = engine.chat(user(PROMPTS[2]), temperature=0, max_new_tokens=30, ignore_eos=True, stop=[cut])
    assert g.text == full[:full.find(cut)] and g.finish_reason == "stop"
    assert "".join(engine.stream(user(PROMPTS[2]), temperature=0, max_new_tokens=30, ignore_eos=True,
                                 stop=[cut])) == g.text
    with pytest.raises(ChatError) as e:
        engine.start(user("apple banana " * 400))
    assert e.value.code == "context_length_exceeded" and e.value.param == "messages"
    with pytest.raises(ChatError) as e:
        engine.start(user("apple banana " * 10), src_length=4)
    assert "src_length 4" in str(e.value)
    with pytest.raises(ChatError) as e:
        engine.start(user("hi"), max_new_tokens=engine.max_position)
    assert e.value.param == "max_new_tokens"
    with pytest.raises(ChatError) as e:
        engine.generate_batch([user("hi"), []])
    assert e.value.param.startswith("conversations[1]")


@pytest.mark.slow
def test_prefix_adapter(demo_home, engine, tmp_path):
    import paddle
    from paddlenlp.peft import PrefixConfig, PrefixModelForCausalLM
    from paddlenlp.peft.prefix import llama_postprocess_past_key_value

    from core.chat.engine import ChatEngine

    c = engine.model.config
    paddle.seed(3)
    cfg = PrefixConfig(num_prefix_tokens=4, num_attention_heads=c.num_attention_heads,
                       num_hidden_layers=c.num_hidden_layers, hidden_size=c.hidden_size, dtype="float32")
    import copy

    pm = PrefixModelForCausalLM(copy.deepcopy(engine.model), cfg, llama_postprocess_past_key_value)
    pm.save_pretrained(str(tmp_path / "prefix"))
    e = ChatEngine(demo_home / "models" / "demo-base", tmp_path / "prefix")
    assert e.kind == "prefix"
    one = e.chat(user(PROMPTS[0]), temperature=0, max_new_tokens=12)
    assert "".join(e.stream(user(PROMPTS[0]), temperature=0, max_new_tokens=12)) == one.text
    assert e.generate_batch([user(PROMPTS[0]), user(PROMPTS[1])], temperature=0, max_new_tokens=12)[0]["text"] == one.text


@pytest.mark.slow
def test_chat_cli(demo_home, engine):
    model = str(demo_home / "models" / "demo-base")
    run = lambda *a, **kw: subprocess.run([sys.executable, "-m", "core.cli", "chat", "--model", model, *a],  # noqa: E731
                                          cwd=ROOT, capture_output=True, text=True, timeout=120, **kw)
    r = run("--prompt", PROMPTS[0], "--max-new-tokens", "16", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["answer"] == engine.chat(user(PROMPTS[0]), temperature=0, max_new_tokens=16).text
    assert out["usage"]["completion_tokens"] >= 1 and out["finish_reason"] in ("stop", "length")
    r = run("--prompt", "x", "--temperature", "-1")
    assert r.returncode == 2 and "temperature" in r.stderr
    r = run("--max-new-tokens", "16", input=f"{PROMPTS[0]}\n/reset\n{PROMPTS[2]}\n/exit\n")
    assert r.returncode == 0, r.stderr[-2000:]
    want = [engine.chat(user(p), temperature=0, max_new_tokens=16).text for p in (PROMPTS[0], PROMPTS[2])]
    assert r.stdout == "".join(w + "\n" for w in want)


def test_max_tokens_refusal_reads_as_a_note_in_both_languages():
    """The worker's refusal of max_tokens past the room a prompt leaves (as the server words it) is
    turned into the Chat tab's note, with the numbers, in en and zh (never shown in the answer)."""
    from core.chat.engine import ChatEngine
    from core.chat.server import ServeError
    from studio.tabs.chat import refusal_text

    eng = ChatEngine.__new__(ChatEngine)
    eng.max_position = 512
    with pytest.raises(ChatError) as e:
        eng._max_new(20, GenParams.of(max_new_tokens=505))
    # the server names the field as the client sent it (max_tokens)
    err = ServeError(e.value.message.replace("max_new_tokens", "max_tokens", 1), 400, "max_tokens", e.value.code)
    en, zh = refusal_text(err, "demo-base", "en"), refusal_text(err, "demo-base", "zh")
    assert "Not sent" in en and "505" in en and "at most 492" in en and "512" in en, en
    assert "未发送" in zh and "492" in zh and "505" in zh, zh
    other = refusal_text(ServeError("top_p: must be > 0", 400, "top_p", "invalid_value"), "m", "zh")
    assert other.startswith("未发送") and "top_p: must be > 0" in other
