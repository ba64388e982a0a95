"""The demo workspace: deterministic data, a working tokenizer with its chat template, a tiny model."""

import json
import subprocess
import sys

from core import demo
from core.data import datasets


def test_generator_is_deterministic_bilingual_and_checkable():
    a, b = demo.generate_records(500, seed=3), demo.generate_records(500, seed=3)
    assert a == b and a != demo.generate_records(500, seed=4)
    assert len({json.dumps(r, sort_keys=True) for r in a}) == 500
    multi = [r for r in a if isinstance(r["src"], list)]
    assert multi and all(len(r["src"]) == len(r["tgt"]) == 2 for r in multi)
    texts = " ".join(str(r["src"]) for r in a)
    assert "类型#" in texts and "type#" in texts and "计算" in texts and "What is" in texts
    for r in a:  # answers are exactly derivable from the question
        if isinstance(r["src"], str) and r["src"].startswith("What is") and " plus " in r["src"]:
            x, y = r["src"][8:-1].split(" plus ")
            assert r["tgt"] == f"{x} + {y} = {int(x) + int(y)}"
        if isinstance(r["src"], str) and r["src"].startswith("Reverse the order"):
            assert r["tgt"].split() == r["src"].split(": ")[1].split()[::-1]


def test_demo_init_builds_everything_and_is_idempotent(demo_home):
    ds = demo_home / "datasets" / "demo"
    model = demo_home / "models" / "demo-base"
    rep = datasets.validate(ds)
    assert rep.ok and rep.good == 3200 and rep.multi_turn > 100 and rep.duplicates == 0
    info = json.loads((model / "studio_model.json").read_text())
    assert 1_000_000 < info["parameters"] < 10_000_000
    assert info["pretrain"]["last_loss"] < info["pretrain"]["first_loss"] / 3
    cfg = json.loads((model / "tokenizer_config.json").read_text())
    assert cfg["chat_template"] == demo.CHAT_TEMPLATE
    assert (model / "model.safetensors").is_file() and (model / "config.json").is_file()
    before = (ds / "train.json").stat().st_mtime_ns, (model / "model.safetensors").stat().st_mtime_ns
    r = subprocess.run(
        [sys.executable, "-m", "core.cli", "demo", "init", "--json"],
        env={"PADDLE_STUDIO_HOME": str(demo_home), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["created"] == []
    assert before == ((ds / "train.json").stat().st_mtime_ns, (model / "model.safetensors").stat().st_mtime_ns)


def test_demo_dataset_has_one_shape_upstream_reads(demo_home):
    """Every demo record has list-valued src/tgt, so upstream's JSON loader (pyarrow) reads the
    files, which it cannot when string and list src are mixed."""
    from paddlenlp.datasets import load_dataset

    ds = demo_home / "datasets" / "demo"
    recs = [json.loads(x) for p in ("train.json", "dev.json") for x in (ds / p).read_text(encoding="utf-8").splitlines()]
    assert all(type(r["src"]) is list and type(r["tgt"]) is list for r in recs)
    assert json.loads((ds / "meta.json").read_text())["shape"] == "list"
    assert len(load_dataset("json", data_files=str(ds / "dev.json"), lazy=False)[0]) == 200


def test_an_older_demo_dataset_is_rewritten_and_the_model_kept(demo_home, tmp_path, monkeypatch):
    """A version-2 demo dataset (mixed shapes) is rewritten in the list shape; the model, built from
    the same records and text, is not rebuilt."""
    home = tmp_path / "ws"
    (home / "models").mkdir(parents=True)
    (home / "models" / "demo-base").symlink_to(demo_home / "models" / "demo-base")
    old = home / "datasets" / "demo"
    old.mkdir(parents=True)
    recs = demo.generate_records(3200, seed=1234)
    (old / "dev.json").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs[:200]), encoding="utf-8")
    (old / "train.json").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs[200:]), encoding="utf-8")
    (old / "meta.json").write_text(json.dumps({"name": "demo", "demo_version": 2, "seed": 1234}))
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(home))
    out = demo.init(log=lambda m: None)
    assert out["created"] == ["dataset"] and out["dataset"] and out["model"]
    new = (old / "dev.json").read_text(encoding="utf-8")
    assert new == (demo_home / "datasets" / "demo" / "dev.json").read_text(encoding="utf-8")
    assert [demo.as_lists(r) for r in recs[:200]] == [json.loads(x) for x in new.splitlines()]


def test_tokenizer_round_trips_bilingual_text_and_template(demo_home):
    tok = datasets.load_tokenizer(demo_home / "models" / "demo-base")
    for s in ["这款裙子是蓝色的，风格清新。", "What is 12 plus 7?", "17 - 3 = 14"]:
        ids = tok.encode(s, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids).strip() == s
    prompt = tok.apply_chat_template([{"role": "user", "content": "计算 1 + 2 等于多少？"}], tokenize=False)
    assert prompt == "<|user|>计算 1 + 2 等于多少？\n<|assistant|>"


def test_token_stats_histograms_and_truncation(demo_home, tmp_path):
    """The Dataset tab's lengths are what training tokenizes (chat template, every round, EOS): an
    example's total is build_example's length + 1 (it shifts by one), its prompt the masked positions
    + 1; truncation counts the records build_example cuts or drops at the given lengths."""
    from core.data import templates

    f = tmp_path / "d.json"
    recs = [{"src": "What is 1 plus 2?", "tgt": "1 + 2 = 3"}, {"src": ["计算 1 + 2 等于多少？", "再加 3 呢？"], "tgt": ["1 + 2 = 3", "3 + 3 = 6"]}]
    f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
    model = demo_home / "models" / "demo-base"
    tok = datasets.load_tokenizer(model)
    tpl = templates.load_template(tok, model)
    whole = [templates.build_example(tok, tpl, r, 10 ** 6, 10 ** 6) for r in recs]
    want_total = [len(e["input_ids"]) + 1 for e in whole]
    want_src = [e["labels"].count(-100) + 1 for e in whole]
    st = datasets.token_stats(f, model, src_length=8, max_length=12, bins=5)
    assert st["records"] == 2 and st["src"]["max"] == max(want_src) and st["total"]["max"] == max(want_total)
    assert sum(st["src"]["counts"]) == 2 and len(st["src"]["edges"]) == 6
    cut = [templates.build_example(tok, tpl, r, 8, 12) for r in recs]
    assert st["truncated_total"] == sum(c is None or len(c["input_ids"]) + 1 < w for c, w in zip(cut, want_total)) > 0


def test_a_new_workspace_copies_the_demo_from_the_cache(demo_home, tmp_path, monkeypatch):
    """`make run` after `make test` (or a second workspace) copies the finished demo parts from the
    shared cache instead of spending minutes building them again; nothing half-copied is left."""
    home = tmp_path / "ws"
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(home))
    monkeypatch.setenv(demo.CACHE_ENV, str(demo_home))
    out = demo.init(log=lambda m: None)
    assert out["created"] == [] and sorted(out["copied"]) == ["dataset", "model"] and out["seconds"] < 60
    for rel in ("datasets/demo/train.json", "models/demo-base/model.safetensors", "models/demo-base/studio_model.json"):
        assert (home / rel).read_bytes() == (demo_home / rel).read_bytes()
    assert not [p.name for p in (home / "models").iterdir() if p.name.startswith(".")]
    assert demo.progress()["ready"] and demo.ensure() is None  # nothing more to build


def test_a_part_built_in_a_workspace_goes_into_the_cache(demo_home, tmp_path, monkeypatch):
    """The other way round (`make run` first, then `make test`): what a workspace built is copied
    into an empty cache; a cache of another seed is not used."""
    home, cache = tmp_path / "ws", tmp_path / "cache"
    (home / "models").mkdir(parents=True)
    (home / "models" / "demo-base").symlink_to(demo_home / "models" / "demo-base")  # model there: only the dataset is built
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(home))
    monkeypatch.setenv(demo.CACHE_ENV, str(cache))
    out = demo.init(log=lambda m: None)
    assert out["created"] == ["dataset"] and out["copied"] == []
    assert (cache / "datasets" / "demo" / "dev.json").read_bytes() == (home / "datasets" / "demo" / "dev.json").read_bytes()
    seed = json.loads((cache / "datasets" / "demo" / "meta.json").read_text())["seed"]
    assert demo._current("dataset", cache, seed) and not demo._current("dataset", cache, seed + 1)  # another seed: built, not copied
