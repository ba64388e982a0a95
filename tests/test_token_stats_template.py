"""Issue 35 item 3: the Dataset tab's token statistics count what training sees.

The lengths are those of the example core.data.templates.build_example makes of each record with
the model's tokenizer and chat template (system prompt, template markers, every round, EOS), and
"truncated" counts the records build_example cuts or drops. build_example returns the sequence
shifted by one (input_ids = ids[:-1], labels = labels[1:]), so for a record it does not cut:
    total == len(ex["input_ids"]) + 1
    src   == ex["labels"].count(-100) + 1   (the first token is a prompt token, masked, shifted out)
"""

from __future__ import annotations

import json

import pytest

from core.data import datasets, templates

SYSTEM = ("You are a careful arithmetic tutor. Always explain every step of the calculation in plain words, "
          "check the result twice, and answer politely in the language of the question.")


def _write(path, recs):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
    return path


def _sharegpt(tmp_path):
    recs = [
        {"conversations": [
            {"from": "system", "value": SYSTEM},
            {"from": "human", "value": "What is 1 plus 2?"},
            {"from": "gpt", "value": "1 + 2 = 3"},
            {"from": "human", "value": "And plus 3?"},
            {"from": "gpt", "value": "3 + 3 = 6"},
        ]},
        {"conversations": [{"from": "human", "value": "计算 1 + 2 等于多少？"}, {"from": "gpt", "value": "1 + 2 = 3"}]},
    ]
    return _write(tmp_path / "chat.jsonl", recs)


def _messages(tmp_path):
    recs = [
        {"messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "What is 12 plus 7?"},
            {"role": "assistant", "content": "12 + 7 = 19"},
            {"role": "user", "content": "Minus 5?"},
            {"role": "assistant", "content": "19 - 5 = 14"},
        ]},
        {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! What shall we compute?"}]},
    ]
    return _write(tmp_path / "msgs.jsonl", recs)


@pytest.fixture(scope="module")
def model(demo_home):
    return demo_home / "models" / "demo-base"


@pytest.fixture(scope="module")
def tok(model):
    return datasets.load_tokenizer(model)


def _truth(tok, template, f, src_length, max_length):
    """Per record: (uncut length, uncut prompt tokens, trained example or None) as training builds them."""
    out = []
    for rec in datasets.iter_records(f):
        turns = templates.turns_ids(tok, template, templates.messages_of(rec))
        kept = turns if template else turns[:1]
        out.append((sum(len(p) + len(a) for p, a in kept), sum(len(p) for p, _ in kept),
                    templates.build_example(tok, template, rec, src_length, max_length)))
    return out


@pytest.mark.parametrize("make", [_sharegpt, _messages])
def test_token_stats_total_is_build_example_length_with_system_prompt_and_template(make, model, tok, tmp_path):
    f = make(tmp_path)
    template = templates.load_template(tok, model)
    assert template and "<|system|>" in template  # the demo model has a chat template
    st = datasets.token_stats(f, model, src_length=4096, max_length=4096, bins=5)
    exs = [templates.build_example(tok, template, r, 4096, 4096) for r in datasets.iter_records(f)]
    totals = [len(e["input_ids"]) + 1 for e in exs]
    srcs = [e["labels"].count(templates.IGNORE) + 1 for e in exs]
    assert st["records"] == 2
    assert st["total"]["max"] == max(totals) and st["total"]["mean"] == pytest.approx(sum(totals) / 2)
    assert st["src"]["max"] == max(srcs) and st["src"]["mean"] == pytest.approx(sum(srcs) / 2)
    assert st["truncated_total"] == st["truncated_src"] == st["dropped"] == 0 and st["template"] is True
    # the system prompt alone is longer than what today's code reported for the whole record
    n_sys = len(tok.encode(SYSTEM, add_special_tokens=False)["input_ids"])
    assert st["total"]["max"] > n_sys + 10


@pytest.mark.parametrize("src_length,max_length", [(32, 48), (8, 24), (48, 64), (4, 4), (2, 6)])
def test_token_stats_truncation_counts_what_build_example_cuts(src_length, max_length, model, tok, tmp_path):
    f = _sharegpt(tmp_path)
    template = templates.load_template(tok, model)
    truth = _truth(tok, template, f, src_length, max_length)
    st = datasets.token_stats(f, model, src_length=src_length, max_length=max_length)
    dropped = sum(ex is None for _, _, ex in truth)
    cut = sum(ex is not None and len(ex["input_ids"]) + 1 < total for total, _, ex in truth)
    assert st["total"]["max"] == max(total for total, _, _ in truth)
    assert st["src"]["max"] == max(src for _, src, _ in truth)
    assert st["truncated_total"] == cut + dropped
    assert st["dropped"] == dropped
    # build_example cuts a prompt to src_length only when the last round alone is longer than max_length
    last = [templates.turns_ids(tok, template, templates.messages_of(r))[-1] for r in datasets.iter_records(f)]
    assert st["truncated_src"] == sum(ex is not None and len(p) > src_length and len(p) + len(a) > max_length
                                      for (p, a), (_, _, ex) in zip(last, truth))
    if (src_length, max_length) == (32, 48):  # the setting: the system-prompt record is cut
        assert st["truncated_total"] == 1 and st["dropped"] == 0
    if (src_length, max_length) == (4, 4):  # no answer token fits: build_example drops both records
        assert st["dropped"] == st["truncated_total"] == 2
    if (src_length, max_length) == (2, 6):  # both prompts cut to 2 tokens
        assert st["truncated_src"] == 2


def test_token_stats_without_template_follow_build_example(model, tok, tmp_path):
    """chat_template "none" (a run's value): upstream's first round only, BOS + prompt, answer + EOS."""
    f = _sharegpt(tmp_path)
    for src_length, max_length in [(4096, 4096), (8, 20), (40, 44)]:
        truth = _truth(tok, None, f, src_length, max_length)
        st = datasets.token_stats(f, model, src_length=src_length, max_length=max_length, chat_template="none")
        assert st["total"]["max"] == max(total for total, _, _ in truth)
        assert st["template"] is False
        cut = sum(ex is not None and len(ex["input_ids"]) + 1 < total for total, _, ex in truth)
        dropped = sum(ex is None for _, _, ex in truth)
        assert st["truncated_total"] == cut + dropped
        assert st["truncated_src"] == sum(ex is not None and len(ex["input_ids"]) + 1 < total and src > src_length
                                          for total, src, ex in truth)
        if src_length == 4096:
            exs = [ex for _, _, ex in truth]
            assert st["total"]["max"] == max(len(e["input_ids"]) + 1 for e in exs)
