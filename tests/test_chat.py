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
from core.chat.server import ApiError, check_bind, parse_request
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
