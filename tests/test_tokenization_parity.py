"""The studio tokenizes training records as upstream PaddleNLP's llm/utils/data.py does (read at
commit 40ab77e, the version of paddlenlp 3.0.0b4), checked on every demo dev record, single- and
multi-turn, with and without a chat template, at default and at cutting lengths.

The reference below vendors nothing: with a template it calls the wheel's own
``tokenizer.encode_chat_inputs`` (what data.py's tokenize_rounds_example calls) and applies
data.py's round truncation (tokenize_rounds_example, lines ~170-189); without one it follows
tokenize_example (lines ~95-126) with the wheel's tokenizer call (whose truncation keeps the
beginning: the wheel ignores the truncation_side data.py passes, tokenizer_utils_base.py:1400).
Labels are shifted as convert_example_common does (lines ~229-233).
"""

import json

import pytest

from core.data import templates

IGNORE = -100


def upstream_rounds(tok, rec, src_length, max_length):
    src = rec["src"] if isinstance(rec["src"], list) else [rec["src"]]
    tgt = rec["tgt"] if isinstance(rec["tgt"], list) else [rec["tgt"]]
    convs = tok.encode_chat_inputs([[q, a] for q, a in zip(src, tgt)], context_data={"is_training": True})["conversations"]
    ids, labels = [], []
    for i in range(len(convs) - 1, -1, -1):
        user, bot = convs[i]
        if len(ids) + len(user) + len(bot) > max_length:
            if i < len(convs) - 1:
                break
            user = user[:src_length]
            bot = bot[:max_length - len(user)]
            ids, labels = user + bot, [IGNORE] * len(user) + bot
            break
        ids = user + bot + ids
        labels = [IGNORE] * len(user) + bot + labels
    return ids[:-1], labels[1:]


def upstream_plain(tok, rec, src_length, max_length):
    src = rec["src"][0] if isinstance(rec["src"], list) else rec["src"]
    tgt = rec["tgt"][0] if isinstance(rec["tgt"], list) else rec["tgt"]
    s = tok(src, max_length=src_length, truncation=True, add_special_tokens=True)["input_ids"]
    room = max_length - len(s)
    t = tok(tgt, max_length=room, truncation=True, add_special_tokens=False)["input_ids"]
    if len(t) < room:
        t = t + [tok.eos_token_id]
    ids, labels = s + t, [IGNORE] * len(s) + t
    return ids[:-1], labels[1:]


@pytest.fixture(scope="module")
def demo(demo_home):
    from paddlenlp.transformers import AutoTokenizer

    model = demo_home / "models" / "demo-base"
    tok = AutoTokenizer.from_pretrained(str(model))
    tpl = templates.load_template(tok, model)
    recs = [json.loads(x) for x in (demo_home / "datasets" / "demo" / "dev.json").read_text(encoding="utf-8").splitlines()]
    return tok, tpl, recs


@pytest.mark.parametrize("with_template", [True, False])
@pytest.mark.parametrize("src_length, max_length", [(1024, 2048), (8, 16), (4, 12)])
def test_same_ids_and_labels_as_upstream(demo, with_template, src_length, max_length):
    tok, tpl, recs = demo
    assert tpl, "the demo tokenizer carries a chat template"
    multi = sum(isinstance(r["src"], list) and len(r["src"]) > 1 for r in recs)
    assert multi > 20 and len(recs) == 200
    same = dropped = 0
    for r in recs:
        ours = templates.build_example(tok, tpl if with_template else None, r, src_length, max_length)
        want = (upstream_rounds if with_template else upstream_plain)(tok, r, src_length, max_length)
        if ours is None:  # the studio's one difference: no answer token fits, nothing to learn
            assert all(x == IGNORE for x in want[1]), r
            dropped += 1
            continue
        assert (ours["input_ids"], ours["labels"]) == want, r
        same += 1
    print(f"template={with_template} src/max={src_length}/{max_length}: {same} identical, {dropped} dropped")
    if max_length == 2048:
        assert same == 200


def test_no_bos_and_no_newline_between_rounds_with_a_template(demo):
    tok, tpl, recs = demo
    r = next(r for r in recs if isinstance(r["src"], list) and len(r["src"]) > 1)
    ex = templates.build_example(tok, tpl, r, 1024, 2048)
    assert ex["input_ids"][0] != tok.bos_token_id or tpl.lstrip().startswith("{{ bos_token")
    newline = tok.encode("\n", add_special_tokens=False)["input_ids"]
    ids = ex["input_ids"]
    for i, x in enumerate(ids[:-1]):
        if x == tok.eos_token_id:
            assert ids[i + 1:i + 1 + len(newline)] != newline or not newline


def test_chat_prompts_match_what_training_saw(demo):
    """A chat prompt is the training sequence of the same conversation up to where the answer starts."""
    tok, tpl, recs = demo
    for r in recs[:60]:
        msgs = templates.messages_of(r)
        turns = templates.turns_ids(tok, tpl, msgs)
        seq = [x for p, a in turns for x in p + a]
        prompt = templates.prompt_ids(tok, tpl, msgs[:-1])
        assert prompt == seq[:len(prompt)] and len(prompt) == len(seq) - len(turns[-1][1]), r
