"""ChatGLM-6B v1 fills a blank: its prompt ends with [gMASK]<sop>, the context before <sop> is read
both ways, and positions come in two rows. The studio builds those inputs itself
(core.models.layouts) for training, evaluation, generation, the merge check and calibration; here
they are compared with what the wheel's own ChatGLMTokenizer builds (its ``_pad``, which upstream's
collator calls), on every demo dev record, alone and in padded batches, and the token ids and
labels with upstream's data code (tests/test_tokenization_parity.py's reference)."""

import json

import numpy as np
import pytest

from core.data import templates
from core.models import layouts
from core.train import config
from tests.test_tokenization_parity import upstream_rounds


@pytest.fixture(scope="module")
def glm1(demo_home, tmp_path_factory):
    from core import demo

    preset = config.family_preset("chatglm")
    recs = [json.loads(x) for x in (demo_home / "datasets" / "demo" / "dev.json").read_text(encoding="utf-8").splitlines()]
    train = [json.loads(x) for x in (demo_home / "datasets" / "demo" / "train.json").read_text(encoding="utf-8").splitlines()]
    tok, tok_dir = demo.train_tokenizer(demo._sentences(train + recs), tmp_path_factory.mktemp("chatglm-tok"), 1234,
                                        markers=preset["template_markers"], chat_template=preset["chat_template"],
                                        eos=preset["eos_token"], kind=preset["tokenizer"])
    spec = layouts.resolve(layouts.layout(preset), tok)
    return tok, templates.load_template(tok, tok_dir), recs, spec


def test_the_tokenizer_is_chatglms_and_keeps_chinese_whole(glm1):
    tok, tpl, recs, spec = glm1
    assert type(tok).__name__ == "ChatGLMTokenizer"
    assert len(tok) > 4000  # the demo's text and GB2312's 3,755 common characters
    text = "你好，今天天气怎么样？"
    pieces = tok.convert_ids_to_tokens(tok.encode(text, add_special_tokens=False)["input_ids"])
    assert not any(p.startswith("<0x") for p in pieces), pieces  # no character split into bytes
    first = [r["src"] if isinstance(r["src"], str) else r["src"][0] for r in recs]
    zh = [z for z in first if any("\u4e00" <= c <= "\u9fff" for c in z)]
    byte_pieces = sum(p.startswith("<0x") for z in zh for p in tok.convert_ids_to_tokens(tok.encode(z, add_special_tokens=False)["input_ids"]))
    assert zh and byte_pieces == 0
    assert tok.decode(tok.encode(text, add_special_tokens=False)["input_ids"]) == text
    # the prompt ends as ChatGLM's own build_inputs_with_special_tokens ends it: [gMASK] <sop>
    ids = templates.prompt_ids(tok, tpl, [{"role": "user", "content": text}])
    assert ids[-2:] == [tok.gmask_token_id, tok.bos_token_id]
    assert spec == {"layout": "blank_infilling", "mask_ids": [tok.mask_token_id, tok.gmask_token_id], "start_id": tok.bos_token_id}


def test_ids_labels_masks_and_positions_are_upstreams(glm1):
    tok, tpl, recs, spec = glm1
    turns = [len(templates.messages_of(r)) // 2 for r in recs]
    assert turns.count(1) > 50 and max(turns) > 1  # single- and multi-turn records
    examples = []
    for rec in recs:
        ex = templates.build_example(tok, tpl, rec, 1024, 2048)
        ref_ids, ref_labels = upstream_rounds(tok, rec, 1024, 2048)
        assert (ex["input_ids"], ex["labels"]) == (ref_ids, ref_labels)
        examples.append(ex)
        # the wheel's ChatGLMTokenizer._pad on the one unpadded row
        ref = tok.pad({"input_ids": [ex["input_ids"]]}, padding=True, return_attention_mask=True)
        got = layouts.model_inputs(spec, np.array([ex["input_ids"]]), np.ones((1, len(ex["input_ids"])), dtype="int64"))
        assert (np.asarray(ref["attention_mask"])[0, 0].astype(bool) == got["attention_mask"][0, 0]).all()
        assert (np.asarray(ref["position_ids"])[0] == got["position_ids"][0]).all()
    # padded batches: the tokenizer pads on the left; the studio's collator on the right. The real
    # tokens' rows, columns and positions are the same either way.
    from core.train.entry import LayoutCollator

    for i in range(0, 64, 8):
        chunk = examples[i:i + 8]
        ref = tok.pad({"input_ids": [e["input_ids"] for e in chunk]}, padding=True, return_attention_mask=True)
        batch = LayoutCollator(tok.pad_token_id, spec)(chunk)
        n = batch["input_ids"].shape[1]
        for k, e in enumerate(chunk):
            m = len(e["input_ids"])
            rm, rp = np.asarray(ref["attention_mask"])[k, 0, n - m:, n - m:].astype(bool), np.asarray(ref["position_ids"])[k, :, n - m:]
            assert (batch["attention_mask"][k, 0, :m, :m] == rm).all() and (batch["position_ids"][k, :, :m] == rp).all()
            assert not batch["attention_mask"][k, 0, :m, m:].any()  # no real token sees padding
            assert list(batch["labels"][k, :m]) == e["labels"] and (batch["labels"][k, m:] == -100).all()


def test_zero_padding_and_preference_methods_are_refused_with_the_reason(demo_home, tmp_path, monkeypatch):
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(demo_home))
    model = tmp_path / "glm1"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "chatglm"}))
    for method, packing, field in (("lora", True, "data.zero_padding"), ("dpo", False, "method.method"),
                                   ("kto", False, "method.method")):
        cfg = config.load_preset("demo-lora", demo_home)
        cfg.model.model_name_or_path = str(model)
        cfg.method.method = method
        cfg.data.zero_padding = packing
        found = [p for p in config.check(cfg, has_gpu=False) if p["code"] == "layout_unsupported"]
        assert [p["field"] for p in found] == [field], found
        assert "4-D blank-infilling mask" in config.check_message(found[0])
    cfg = config.load_preset("demo-lora", demo_home)
    cfg.data.zero_padding = True  # the demo LLaMA packs
    assert not [p for p in config.check(cfg, has_gpu=False) if p["code"] == "layout_unsupported"]
