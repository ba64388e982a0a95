"""Continued pretraining on raw text: a .txt file imported as a text dataset (one document per
line), refused by every method but pretrain, trained with packed max_length blocks and the loss on
every token, and measured on held-out text: dev perplexity goes down."""

import json

import pytest

from core import demo
from core.data import datasets, templates
from core.train import config, runs
from tests.conftest import link_demo
from tests.test_runs import cli, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def home(demo_home, tmp_path_factory):
    home = link_demo(tmp_path_factory.mktemp("pretrain") / "ws", demo_home)
    lines = demo.text_corpus(7, 1500)
    src = home / "uploads" / "rooms.txt"
    src.parent.mkdir()
    src.write_text("\n\n".join(lines[:40]) + "\n" + "\n".join(lines[40:]) + "\n", encoding="utf-8")  # blank lines too
    r = cli("data", "import", str(src), "--name", "rooms", "--dev-ratio", "0.1", "--json", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    meta = json.loads(r.stdout)
    assert meta["format"] == "text" and meta["train"] + meta["dev"] == 1500
    return home


def test_text_records_validated_line_by_line(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text('{"text": "a red cup"}\n{"text": ""}\n{"text": 3}\n{"txt": "x"}\n', encoding="utf-8")
    rep = datasets.validate(f)
    assert rep.format == "text" and rep.good == 1 and rep.bad == 3
    got = {(p.line, p.field, p.code) for p in rep.problems}
    assert got == {(2, "text", "empty_text"), (3, "text", "wrong_type"), (4, "text", "missing_field")}


def test_blocks_cover_every_token():
    from paddlenlp.transformers import AutoTokenizer

    from tests.conftest import ROOT

    tok = AutoTokenizer.from_pretrained(str(ROOT / ".cache" / "demo-ws" / "models" / "demo-base"))
    texts = demo.text_corpus(1, 50)
    blocks = templates.text_blocks(tok, texts, 32)
    stream = []
    for t in texts:
        stream += [tok.bos_token_id] + tok.encode(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert all(len(b["input_ids"]) == 32 for b in blocks[:-1])
    assert [x for b in blocks for x in b["input_ids"]] == stream[:-1]  # packed across documents, nothing lost
    assert [x for b in blocks for x in b["labels"]] == stream[1:]  # every token is a target (no -100)


def test_sft_on_text_refused_pretrain_lowers_dev_perplexity(home, monkeypatch):
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(home))
    ds = str(home / "datasets" / "rooms")
    cfg = config.load_preset("demo-lora", home)
    cfg.data.dataset_name_or_path = ds
    problems = [config.check_message(p) for p in config.check(cfg, has_gpu=False)]
    assert any("holds raw text" in p and "pretrain" in p for p in problems), problems
    cfg.name = "rooms-pretrain"
    cfg.method.method = "pretrain"
    cfg.training.max_steps = 120
    cfg.training.learning_rate = 0.002
    cfg.training.per_device_train_batch_size = 8
    cfg.training.evaluation_strategy = "no"
    cfg.training.save_strategy = "no"
    cfg.data.src_length, cfg.data.max_length = 32, 64
    assert not config.check(cfg, has_gpu=False)
    run_id = runs.create(cfg)
    runs.start(run_id)
    wait_for(lambda: runs.status(run_id)["state"] not in ("queued", "running"), 600, 0.5)
    assert runs.status(run_id)["state"] == "succeeded", runs.status(run_id)

    def ppl(model):
        r = cli("eval", "--model", model, "--data", ds, "--max-length", "64", "--json", home=home)
        assert r.returncode == 0, r.stderr[-2000:]
        out = json.loads(r.stdout)
        assert "exact_match" not in out  # raw text has no answers to match
        return out["perplexity"]

    before = ppl(str(home / "models" / "demo-base"))
    after = ppl(str(runs.run_dir(run_id) / "output"))
    print(f"\nraw-text pretraining, 120 steps: held-out perplexity {before:.4g} -> {after:.4g}")
    assert after < before * 0.6
