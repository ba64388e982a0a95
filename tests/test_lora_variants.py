"""MoRA (use_mora) and MoSLoRA (lora_use_mixer): PaddleNLP's own LoRA variants, switched on in the
Train form, trained on the demo through the studio's run machinery, then evaluated (dev exact match
against the base) and merged (merged logits equal adapter logits)."""

import json

import pytest

from core.train import config, runs
from tests.conftest import link_demo
from tests.test_runs import cli, wait_for

pytestmark = pytest.mark.slow
LIMIT = "100"


@pytest.fixture(scope="module")
def home(demo_home, tmp_path_factory):
    return link_demo(tmp_path_factory.mktemp("variants") / "ws", demo_home)


def evaluate(home, *args):
    r = cli("eval", *args, "--data", str(home / "datasets" / "demo"), "--limit", LIMIT, "--src-length", "64",
            "--max-length", "96", "--json", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def base_scores(home):
    return evaluate(home, "--model", str(home / "models" / "demo-base"))


@pytest.mark.parametrize("name,switch", [("mora", "use_mora"), ("moslora", "lora_use_mixer")])
def test_variant_trains_raises_exact_match_and_merges(home, base_scores, name, switch, monkeypatch):
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(home))
    cfg = config.load_preset("demo-lora", home)
    cfg.name = name
    setattr(cfg.method, switch, True)
    cfg.training.evaluation_strategy = "no"
    cfg.training.save_strategy = "no"
    cfg.training.max_steps = 80  # MoRA: 300 steps took ~4 min, 150 steps 2 min (the test passed at both)
    assert not config.check(cfg, has_gpu=False)
    run_id = runs.create(cfg)
    d = runs.run_dir(run_id)
    assert json.loads((d / "config.json").read_text())[switch] is True
    runs.start(run_id)
    wait_for(lambda: runs.status(run_id)["state"] not in ("queued", "running"), 600, 0.5)
    assert runs.status(run_id)["state"] == "succeeded", runs.status(run_id)
    adapter = d / "output"
    saved = json.loads((adapter / "lora_config.json").read_text())
    assert saved[switch] is True  # PaddleNLP's own LoRA config says which variant it is
    tuned = evaluate(home, "--adapter", str(adapter))
    print(f"\n{name}: exact match base {base_scores['exact_match']:.3f} -> {tuned['exact_match']:.3f}; "
          f"eval loss {base_scores['eval_loss']:.3f} -> {tuned['eval_loss']:.3f}")
    assert tuned["exact_match"] >= base_scores["exact_match"] + 0.03  # >= 3 more of 100 dev answers exact
    assert tuned["eval_loss"] < base_scores["eval_loss"] - 1.0
    out = home / "models" / f"{name}-merged"
    r = cli("merge", "--adapter", str(adapter), "--out", str(out), "--json", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["check"]["max_abs_diff"] < 1e-4
    merged = evaluate(home, "--model", str(out))
    assert merged["exact_match"] == pytest.approx(tuned["exact_match"], abs=0.02)


def test_the_variants_are_refused_where_paddlenlp_cannot_run_them(home):
    cfg = config.load_preset("demo-lora", home)
    cfg.method.use_mora = cfg.method.lora_use_mixer = True
    assert "mora_with_mixer" in {p["code"] for p in config.check(cfg, has_gpu=False)}
    cfg.method.lora_use_mixer = False
    cfg.method.method = "vera"
    assert "lora_variant_needs_lora" in {p["code"] for p in config.check(cfg, has_gpu=False)}
    # and a PaddleNLP file that asks for one keeps it through the studio (round trip)
    flat = {**config.load_preset("demo-lora", home).to_paddlenlp(), "use_mora": True}
    back = config.RunConfig.from_paddlenlp(flat).to_paddlenlp()
    assert back["use_mora"] is True and back["lora"] is True
