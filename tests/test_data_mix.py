"""Paged dataset preview and dataset mixing (issue 35): counts, pages, ratios, provenance, refusals."""

import json
from pathlib import Path

import pytest

from core.data import datasets, mix
from core.data.datasets import DatasetError


def write_dataset(home: Path, name: str, train: list, dev: list, meta: bool = True) -> Path:
    d = home / "datasets" / name
    d.mkdir(parents=True)
    (d / "train.json").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in train), encoding="utf-8")
    (d / "dev.json").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in dev), encoding="utf-8")
    if meta:
        (d / "meta.json").write_text(json.dumps({"name": name, "train": len(train), "dev": len(dev)}), encoding="utf-8")
    return d


def chat(prefix: str, n: int) -> list:
    return [{"src": f"{prefix}-q{i}", "tgt": f"{prefix}-a{i}"} for i in range(n)]


def prefs(n: int) -> list:
    return [{"src": [f"p{i}"], "tgt": [], "response": [f"good{i}", f"bad{i}"], "sort": [1, 0]} for i in range(n)]


def lines(path: Path) -> list:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def ws(workspace_home):
    write_dataset(workspace_home, "alpha", chat("alpha", 30), chat("alpha-dev", 4))
    write_dataset(workspace_home, "beta", [{"src": [f"b-q{i}", "again?"], "tgt": [f"b-a{i}", "yes"]} for i in range(12)],
                  [{"src": ["b-dq", "x"], "tgt": ["b-da", "y"]}] * 2)
    write_dataset(workspace_home, "pairs", prefs(10), prefs(2))
    return workspace_home


# ---------------------------------------------------------------- preview


def test_preview_pages_counts_and_columns(ws):
    p1 = datasets.preview_page("alpha", "train", 1, 7)
    assert (p1["total"], p1["pages"], p1["page"], p1["kind"]) == (30, 5, 1, "chat")
    assert p1["columns"] == ["line", "turns", "system", "src", "tgt"]
    assert [r["src"] for r in p1["rows"]] == [f"alpha-q{i}" for i in range(7)]
    p2 = datasets.preview_page("alpha", "train", 2, 7)
    assert [r["line"] for r in p2["rows"]] == list(range(8, 15)) and p2["rows"][0]["tgt"] == "alpha-a7"
    last = datasets.preview_page("alpha", "train", 99, 7)  # clamped to the last page
    assert last["page"] == 5 and [r["line"] for r in last["rows"]] == [29, 30]
    dev = datasets.preview_page(ws / "datasets" / "alpha", "dev", 1, 7)
    assert dev["total"] == 4 and dev["splits"] == ["train", "dev"]
    multi = datasets.preview_page("beta", "train", 1, 3)["rows"][0]
    assert multi["turns"] == 2 and multi["src"] == "[1] b-q0\n[2] again?"
    pair = datasets.preview_page("pairs", "train", 2, 4)
    assert pair["columns"] == ["line", "turns", "src", "chosen", "rejected"]
    assert (pair["rows"][0]["chosen"], pair["rows"][0]["rejected"]) == ("good4", "bad4")


def test_preview_file_with_bad_lines_and_skip_without_parsing(tmp_path, workspace_home):
    f = tmp_path / "mixed.jsonl"
    f.write_text('{"src": "a", "tgt": "b"}\n\n{broken\n{"src": "c"}\n' + '{"src": "x", "tgt": "y"}\n' * 20,
                 encoding="utf-8")
    page = datasets.preview_page(f, "train", 1, 5)
    assert page["split"] == "data" and page["total"] == 24
    codes = [r["problem"] and r["problem"]["code"] for r in page["rows"]]
    assert codes == [None, "blank_line", "invalid_json", "missing_field", None]
    assert page["rows"][3]["problem"]["field"] == "tgt"
    # a page far in: lines before it are skipped unparsed, so a broken one there does not matter
    assert datasets.preview_page(f, "train", 5, 5)["rows"][-1] == {
        "file": "mixed.jsonl", "line": 24, "problem": None, "turns": 1, "system": "", "src": "x", "tgt": "y"}


def test_preview_long_cell_is_cut_and_unknown_split_refused(ws):
    write_dataset(ws, "long", [{"text": "w" * 5000}], [])
    row = datasets.preview_page("long", "train")["rows"][0]
    assert len(row["text"]) == datasets.MAX_CELL and row["text"].endswith("…")
    with pytest.raises(DatasetError) as e:
        datasets.preview_page("alpha", "test")
    assert e.value.code == "no_split"
    with pytest.raises(DatasetError) as e:
        datasets.preview_page("nope")
    assert e.value.code == "not_found"


# ---------------------------------------------------------------- mix


def test_mix_ratios_counts_shape_and_meta(ws):
    meta = mix.mix("blend", [("alpha", 0.5), ("beta", 2.0)], seed=7)
    d = ws / "datasets" / "blend"
    train, dev = lines(d / "train.json"), lines(d / "dev.json")
    assert (meta["train"], meta["dev"]) == (len(train), len(dev)) == (15 + 24, 2 + 2)
    alpha = [r for r in train if r["src"][0].startswith("alpha")]
    beta = [r for r in train if r["src"][0].startswith("b-")]
    assert len(alpha) == 15 and len(set(r["src"][0] for r in alpha)) == 15  # a half, no repeats
    assert len(beta) == 24 and all(sum(r == b for r in beta) == 2 for b in lines(ws / "datasets/beta/train.json"))
    assert all(isinstance(r["src"], list) for r in train + dev)  # one shape: beta has lists
    assert not {json.dumps(r) for r in dev} & {json.dumps(r) for r in train}
    assert meta["source"] == "mix: alpha×0.5 + beta×2" and meta["format"] == "paddlenlp" and meta["seed"] == 7
    parts = meta["mix"]["parts"]
    assert [(p["dataset"], p["ratio"], p["train_available"], p["train_taken"], p["dev_taken"]) for p in parts] == [
        ("alpha", 0.5, 30, 15, 2), ("beta", 2.0, 12, 24, 2)]
    assert len(parts[0]["sha256"]) == 64 and meta["mix"]["rule"]
    assert json.loads((d / "meta.json").read_text()) == meta
    assert datasets.validate(d).ok
    assert not [p for p in (ws / "datasets").iterdir() if p.name.startswith(".")]  # no temp folder left
    # the same parts and seed give the same files; another seed another order
    mix.mix("again", [("alpha", 0.5), ("beta", 2.0)], seed=7)
    assert (ws / "datasets/again/train.json").read_bytes() == (d / "train.json").read_bytes()
    mix.mix("other", [("alpha", 0.5), ("beta", 2.0)], seed=8)
    assert (ws / "datasets/other/train.json").read_bytes() != (d / "train.json").read_bytes()


def test_mix_counts_and_parse_part(ws):
    meta = mix.mix("counted", [mix.Part("alpha", count=40), mix.parse_part("beta=0.25")], seed=1)
    assert [(p["count"], p["train_taken"]) for p in meta["mix"]["parts"]] == [(40, 40), (None, 3)]
    assert meta["train"] == 43 and meta["dev"] == 4 + 0  # alpha: all 4 dev (40/30 capped at 1); beta 0.25 x 2 -> 0
    assert mix.parse_part("my.set=12", count=True) == mix.Part("my.set", count=12)
    with pytest.raises(ValueError):
        mix.parse_part("alpha")


@pytest.mark.parametrize(
    "parts, code",
    [
        ([("alpha", 0.5)], "mix_too_few"),
        ([("alpha", 0.5), ("alpha", 1.0)], "mix_same_part"),
        ([("alpha", 0.0), ("beta", 1.0)], "mix_bad_ratio"),
        ([("alpha", float("nan")), ("beta", 1.0)], "mix_bad_ratio"),
        ([("alpha", 0), ("beta", 1.0)], "mix_bad_count"),
        ([("alpha", 1.0), ("pairs", 1.0)], "mix_incompatible"),
        ([("alpha", 1.0), ("missing", 1.0)], "not_found"),
    ],
)
def test_mix_refusals(ws, parts, code):
    with pytest.raises(DatasetError) as e:
        mix.mix("refused", parts)
    assert e.value.code == code, e.value
    assert not (ws / "datasets" / "refused").exists()
    assert not [p for p in (ws / "datasets").iterdir() if p.name.startswith(".")]


def test_mix_refuses_text_with_chat_and_taken_name(ws):
    write_dataset(ws, "notes", [{"text": "some words"}] * 3, [])
    with pytest.raises(DatasetError) as e:
        mix.mix("x", [("notes", 1.0), ("alpha", 1.0)])
    assert (e.value.code, e.value.params["a_kind"], e.value.params["b_kind"]) == ("mix_incompatible", "text", "chat")
    assert "cannot mix 'notes' (text) with 'alpha' (chat)" in str(e.value)
    with pytest.raises(DatasetError) as e:
        mix.mix("alpha", [("beta", 1.0), ("pairs", 1.0)])
    assert e.value.code in ("dataset_exists", "mix_incompatible")
    with pytest.raises(DatasetError) as e:
        mix.mix("alpha", [("beta", 1.0), ("alpha", 1.0)])
    assert e.value.code == "dataset_exists"


def test_mix_preference_pairs_and_file_parts(ws, tmp_path):
    f = tmp_path / "more_pairs.jsonl"
    f.write_text("".join(json.dumps({"prompt": f"x{i}", "chosen": "c", "rejected": "r"}) + "\n" for i in range(6)))
    meta = mix.mix("prefmix", [("pairs", 1.0), (str(f), 0.5)], seed=3)
    assert (meta["format"], meta["train"], meta["dev"]) == ("preference", 13, 2)
    rows = lines(ws / "datasets/prefmix/train.json")
    assert all(r["sort"] == [1, 0] and len(r["response"]) == 2 for r in rows)
    assert datasets.validate(ws / "datasets/prefmix").ok


def test_provenance_is_what_a_run_records(ws):
    mix.mix("blend", [("alpha", 0.5), ("beta", 1.0)], seed=5)
    d = ws / "datasets" / "blend"
    for path in (d, str(d), d / "train.json"):
        prov = datasets.provenance(path)
        assert prov["name"] == "blend" and prov["mix"]["seed"] == 5
        assert [p["dataset"] for p in prov["mix"]["parts"]] == ["alpha", "beta"]
    assert datasets.provenance("") is None and datasets.provenance(ws / "nowhere") is None
    assert "mix" not in datasets.provenance(ws / "datasets" / "alpha")


def test_studio_renders_pages_and_mix_outcomes_in_both_languages(ws, tmp_path):
    from studio.tabs import dataset as tab

    f = tmp_path / "two.jsonl"
    f.write_text('{"src": "q", "tgt": "a"}\n{"src": "only"}\n', encoding="utf-8")
    res, html, info, page = tab.run_browse(str(f), "train", 1, "zh")
    assert page == 1 and "第 1 页，共 1 页" in info and "提问（src）" in html and "⚠ tgt：缺少字段" in html
    assert tab.run_browse(None, "train", 1, "en")[2] == "Pick a dataset to browse its records."
    out = tab.run_mix("blend", 3, "en", str(ws / "datasets" / "alpha"), 0.5, None, 1.0, str(ws / "datasets" / "beta"),
                      1.0, None, 1.0)
    assert len(out) == 5 + tab.MIX_SLOTS
    assert out[1] == "Mixed **blend**: 27 training and 4 dev records from alpha: 15 records (30 available), beta: 12 " \
                     "records (12 available)."
    assert tab.mix_message(out[0], "zh").startswith("已混合生成 **blend**：训练记录 27 条")
    refused = tab.run_mix("x", 3, "zh", str(ws / "datasets" / "alpha"), 1.0, str(ws / "datasets" / "pairs"), 1.0,
                          None, 1.0, None, 1.0)
    assert len(refused) == 5 + tab.MIX_SLOTS and "无法将 'alpha'（chat）与 'pairs'（preference）混合" in refused[1]


def test_cli_mix_and_preview_and_the_mix_reaches_the_run_record(ws, demo_home):
    """`data mix` / `data preview` (the tab's headless twins), then a run created on the mix records
    its parts, ratios and seed in studio.json."""
    import os
    import subprocess
    import sys

    from core.train import config, runs
    from tests.conftest import ROOT

    env = {**os.environ, "PADDLE_STUDIO_HOME": str(ws)}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "core.cli", *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)

    r = cli("data", "mix", "--name", "blend", "--part", "alpha=0.5", "--part-count", "beta=4", "--seed", "7", "--json")
    assert r.returncode == 0, r.stderr
    meta = json.loads(r.stdout)
    assert meta["train"] == 15 + 4 and len(lines(ws / "datasets" / "blend" / "train.json")) == 19
    r = cli("data", "preview", "blend", "--page", "2", "--page-size", "5", "--json")
    page = json.loads(r.stdout)
    assert r.returncode == 0 and page["total"] == 19 and page["pages"] == 4 and len(page["rows"]) == 5
    assert cli("data", "mix", "--name", "bad", "--part", "alpha=1", "--part", "pairs=1").returncode == 2
    (ws / "models").mkdir(exist_ok=True)
    (ws / "models" / "demo-base").symlink_to(demo_home / "models" / "demo-base")
    cfg = config.load_preset("demo-lora", ws)
    cfg.data.dataset_name_or_path = str(ws / "datasets" / "blend")
    run = runs.run_dir(runs.create(cfg))
    rec = json.loads((run / "studio.json").read_text())["dataset"]
    assert rec["mix"]["seed"] == 7 and [(p["dataset"], p["ratio"], p["count"]) for p in rec["mix"]["parts"]] == [
        ("alpha", 0.5, None), ("beta", None, 4)]
