"""Zero padding: packed sequences give the same loss as the same examples padded, on the demo model."""

import json

import numpy as np
import pytest

from core.data import templates
from core.train import entry

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(demo_home):
    import paddle
    from paddlenlp.transformers import AutoModelForCausalLM, AutoTokenizer

    d = demo_home / "models" / "demo-base"
    tok = AutoTokenizer.from_pretrained(str(d))
    model = AutoModelForCausalLM.from_pretrained(str(d), dtype="float32")
    model.eval()
    template = templates.load_template(tok, d)
    recs = [json.loads(line) for line in (demo_home / "datasets" / "demo" / "dev.json").read_text().splitlines()[:6]]
    examples = [templates.build_example(tok, template, r, 64, 128) for r in recs]
    return paddle, tok, model, [e for e in examples if e]


def _loss(paddle, model, batch):
    with paddle.no_grad():
        out = model(**{k: paddle.to_tensor(v) for k, v in batch.items()})
    return float((out[0] if isinstance(out, (tuple, list)) else out.loss).item())


def test_packed_loss_equals_padded_loss(demo):
    paddle, tok, model, examples = demo
    assert len(examples) == 6
    padded = entry.padding_collator(tok)([dict(e) for e in examples])
    assert padded["input_ids"].shape[0] == 6 and (padded["attention_mask"] == 0).any()  # really padded
    packs = entry.pack_examples(examples, max_length=10_000)
    assert len(packs) == 1
    packed = entry.PackedCollator(tok.pad_token_id)(packs)
    assert packed["input_ids"].shape == (1, sum(len(e["input_ids"]) for e in examples))
    a, b = _loss(paddle, model, padded), _loss(paddle, model, packed)
    assert np.isfinite(a) and abs(a - b) < 1e-4 * max(1.0, abs(a)), (a, b)


def test_two_packs_in_one_batch_pad_to_the_longer(demo):
    """Packs of different lengths batch together; the shorter pack's padding does not change its loss."""
    paddle, tok, model, examples = demo
    packs = entry.pack_examples(examples, max_length=sum(len(e["input_ids"]) for e in examples[:3]))
    assert len(packs) >= 2
    col = entry.PackedCollator(tok.pad_token_id)
    both = col(packs[:2])
    n = both["input_ids"].shape[1]
    assert n == max(len(p["input_ids"]) for p in packs[:2])
    short = min(packs[:2], key=lambda p: len(p["input_ids"]))
    alone = col([short])
    # the loss over both packs, weighted by label counts, equals the per-pack losses combined
    counts = [int((np.array(p["labels"]) != templates.IGNORE).sum()) for p in packs[:2]]
    l0, l1 = _loss(paddle, model, col([packs[0]])), _loss(paddle, model, col([packs[1]]))
    combined = (l0 * counts[0] + l1 * counts[1]) / sum(counts)
    assert abs(_loss(paddle, model, both) - combined) < 1e-4
    assert alone["input_ids"].shape[1] == len(short["input_ids"])


def test_greedy_packing_fills_packs_at_least_as_well(demo):
    _, tok, _, examples = demo
    limit = 2 * max(len(e["input_ids"]) for e in examples)
    plain = entry.pack_examples(examples, limit)
    greedy = entry.pack_examples(examples, limit, greedy=True)
    assert sum(len(p["input_ids"]) for p in plain) == sum(len(p["input_ids"]) for p in greedy)
    assert len(greedy) <= len(plain)
    assert all(len(p["input_ids"]) <= limit for p in plain + greedy)
