"""KTO (the kto method, upstream's llm/alignment/kto/run_kto.py): records of one answer marked
desirable (sort [1]) or undesirable (sort [0]) validated line by line; upstream's kto_argument.json
shape read strictly by `paddle-studio train FILE`; KTO-LoRA trained on the demo model with the
wheel's KTOTrainer (loss falls, the reward margin grows, kl logged), its adapter answering in chat
and merging; and the config's KTO keys are what the trainer's criterion uses."""

import json
import random
from pathlib import Path

import numpy as np
import pytest

from core.data import datasets
from core.train import config, runs, upstream
from tests.conftest import link_demo
from tests.test_dpo import answer_logps
from tests.test_runs import cli, wait_for
from tests.test_upstream_configs import CORPUS

N_RECORDS = 16  # one packed row of max_seq_len 1024: every step sees every record


def kto_records(records, n, seed):
    """n demo questions, alternately with their own answer (desirable) and another record's answer
    (undesirable)."""
    rng = random.Random(seed)
    out = []
    for i, r in enumerate(records[:n]):
        src = r["src"] if isinstance(r["src"], list) else [r["src"]]
        tgt = r["tgt"] if isinstance(r["tgt"], list) else [r["tgt"]]
        answer, sort = tgt[-1], 1
        if i % 2:
            while answer.strip() == tgt[-1].strip():
                other = records[rng.randrange(len(records))]["tgt"]
                answer = other[-1] if isinstance(other, list) else other
            sort = 0
        out.append({"src": src, "tgt": tgt[:-1], "response": [answer], "sort": [sort]})
    return out


@pytest.fixture(scope="module")
def home(demo_home, tmp_path_factory):
    home = link_demo(tmp_path_factory.mktemp("kto") / "ws", demo_home)
    train = [json.loads(x) for x in (home / "datasets" / "demo" / "train.json").read_text().splitlines() if x.strip()]
    d = home / "datasets" / "kto"
    d.mkdir()
    rows = kto_records(train, N_RECORDS, 1)
    (d / "train.json").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    (d / "dev.json").write_text("")
    return home


def upstream_file(home, tmp_path) -> Path:
    """A kto_lora_argument.json in upstream's shape (llm/config/llama/kto_lora_argument.json's keys,
    lazy included), sized for the demo model on CPU."""
    d = json.loads((CORPUS / "llama_kto_lora.json").read_text())
    for k in ("bf16", "fp16_opt_level", "tensor_parallel_degree", "sharding", "use_flash_attention", "flash_mask",
              "recompute_granularity", "load_best_model_at_end"):
        d.pop(k)
    d.update(model_name_or_path=str(home / "models" / "demo-base"),
             train_dataset_path=str(home / "datasets" / "kto" / "train.json"),
             dev_dataset_path=str(home / "datasets" / "kto" / "dev.json"), output_dir=str(tmp_path / "unused"),
             per_device_train_batch_size=1, gradient_accumulation_steps=1, max_steps=8, learning_rate=2e-3,
             warmup_steps=0, evaluation_strategy="no", do_eval=False, save_strategy="no", max_seq_len=1024,
             max_prompt_len=64, unified_checkpoint=False, device="cpu")
    f = tmp_path / "kto_lora_argument.json"
    f.write_text(json.dumps(d))
    return f


def test_kto_records_are_checked_line_by_line_and_a_bad_sort_refuses_the_run(home, tmp_path, monkeypatch):
    f = tmp_path / "k.jsonl"
    rows = [{"src": ["hi"], "tgt": [], "response": ["good"], "sort": [1]},
            {"src": "q", "response": ["bad"], "sort": [0]},
            {"src": ["q"], "tgt": [], "response": ["a"], "sort": [2]},
            {"src": ["q"], "tgt": [], "response": ["a", "b"], "sort": [1]},
            {"src": ["q1", "q2"], "tgt": [], "response": ["a"], "sort": [True]}]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    rep = datasets.validate(f)
    assert rep.format == "kto" and (rep.good, rep.bad) == (2, 3)
    assert {(p.file, p.line, p.field, p.code) for p in rep.problems} == {
        (str(f), 3, "sort", "kto_sort_value"), (str(f), 4, "response", "kto_response_count"),
        (str(f), 5, "src/tgt", "history_mismatch"), (str(f), 5, "sort", "wrong_type")}
    assert list(datasets.iter_records(f))[1] == {"src": ["q"], "tgt": [], "response": ["bad"], "sort": [0]}
    # a dataset with a sort of 2 (upstream's loss would leave that answer out without a word) is refused
    # before a run, naming the file and the line
    bad = home / "datasets" / "kto-bad"
    bad.mkdir()
    lines = (home / "datasets" / "kto" / "train.json").read_text().splitlines()
    lines[6] = json.dumps({**json.loads(lines[6]), "sort": [2]}, ensure_ascii=False)
    (bad / "train.json").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(home))
    cfg = config.load_run_file(upstream_file(home, tmp_path))
    cfg.data.dataset_name_or_path = str(bad)
    problems = config.check(cfg, has_gpu=False)
    assert [(p["code"], p["params"]["path"], p["params"]["line"], p["params"]["where"]) for p in problems] == [
        ("kto_bad_records", str(bad / "train.json"), 7, "sort")]
    assert "[2]" in config.check_message(problems[0])
    # KTO records are the kto method's, preference pairs the dpo method's
    cfg.data.dataset_name_or_path = str(home / "datasets" / "kto")
    cfg.method.method = "dpo"
    assert "kto_records_need_kto" in {p["code"] for p in config.check(cfg, has_gpu=False)}
    cfg.method.method = "kto"
    cfg.data.dataset_name_or_path = str(home / "datasets" / "demo")
    assert "kto_needs_records" in {p["code"] for p in config.check(cfg, has_gpu=False)}


def test_upstream_kto_file_is_read_strictly(home, tmp_path, monkeypatch):
    """run_kto.py's keys only: its JSON (file name kto_*_argument.json) becomes the kto method and
    is written back unchanged but for the keys that say it is KTO's; a key run_kto.py does not know
    is refused with a suggestion, as upstream's parser would stop on it."""
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(home))
    f = upstream_file(home, tmp_path)
    src = json.loads(f.read_text())
    cfg = config.load_run_file(f)
    m = cfg.method
    assert (m.method, m.kto_lora, m.kto_beta, m.kto_desirable_weight) == ("kto", True, 0.1, 1.0)
    assert config.check(cfg, has_gpu=False) == []
    flat = cfg.to_paddlenlp()
    assert upstream.is_kto(flat) and upstream.problems(flat, known=upstream.kto_table(), script=upstream.KTO_SCRIPT) == []
    assert {k: v for k, v in flat.items() if src.get(k) != v} == {"desirable_weight": 1.0, "undesirable_weight": 1.0,
                                                                    "report_to": "none"}
    for typo, want in (("desirable_wieght", "desirable_weight"), ("max_prompt_length", "max_prompt_len")):
        f.write_text(json.dumps({**src, "beta": 0.2, typo: 1}))
        with pytest.raises(config.FileProblems) as e:
            config.load_run_file(f)
        assert [(p["code"], p["field"], p["params"]["suggestion"]) for p in e.value.problems] == [
            ("unknown_key", typo, want)]
        assert "not an argument of llm/alignment/kto/run_kto.py" in e.value.problems[0]["message"]
    # LoRA alpha is 2 x rank in run_kto.py whatever lora_alpha says: refused rather than ignored
    f.write_text(json.dumps({**src, "lora_alpha": 32}))
    problems = config.check(config.load_run_file(f), has_gpu=False)
    assert [p["code"] for p in problems] == ["kto_ignored_key"]
    from studio import locales  # the Train tab's text: the problem's own "key" parameter is a param, not t()'s key

    assert locales.t("check.kto_ignored_key", "zh", field=problems[0]["field"], **problems[0]["params"]).startswith(
        "lora_alpha 在 run_kto.py 中不起作用")


def test_the_configs_kto_keys_reach_the_trainers_criterion(home, tmp_path, monkeypatch):
    """beta, desirable_weight and undesirable_weight of the studio's form reach the KTOConfig the
    wheel's KTOTrainer and its KTOCriterion (the loss) hold; the data is upstream's: each record
    paired with record -i's answer for the KL term, no chat template."""
    import paddlenlp.trl

    from core.train import entry, kto

    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(home))
    cfg = config.load_run_file(upstream_file(home, tmp_path))
    cfg.method.kto_beta, cfg.method.kto_desirable_weight, cfg.method.kto_undesirable_weight = 0.3, 1.5, 0.5
    flat = cfg.to_paddlenlp(str(tmp_path / "out"))
    assert (flat["beta"], flat["desirable_weight"], flat["undesirable_weight"]) == (0.3, 1.5, 0.5)
    seen = {}

    class Stop(Exception):
        pass

    def train(self, *a, **kw):
        seen.update(config=self.kto_config, criterion=self.kto_criterion.kto_config, tokenizer=self.tokenizer,
                    rows=[self.train_dataset[i] for i in range(len(self.train_dataset))])
        raise Stop

    monkeypatch.setattr(paddlenlp.trl.KTOTrainer, "train", train)
    with pytest.raises(Stop):
        kto.main(tmp_path, flat, False, entry)
    assert seen["criterion"] is seen["config"]
    c = seen["config"]
    assert (c.beta, c.desirable_weight, c.undesirable_weight, c.lora) == (0.3, 1.5, 0.5, True)
    assert seen["tokenizer"].chat_template is None
    records = kto.read_records(flat["train_dataset_path"])
    paired = kto.with_kl_answers(records)
    assert paired[0]["response"] == records[0]["response"] * 2  # record 0: its own answer, as upstream
    assert paired[1]["response"][1] == records[-1]["response"][0] and paired[-1]["sort"] == [0, -1]
    # every record is in a packed row, its sort (1 or 0) last in its response index
    sorts = [ri[-1] for row in seen["rows"] for ri in row["response_indexs"]]
    assert sorted(sorts) == sorted(r["sort"][0] for r in records) and len(seen["rows"]) == 1


@pytest.mark.slow
def test_kto_lora_trains_from_an_upstream_file_and_its_adapter_chats_and_merges(home, tmp_path, monkeypatch):
    from core.chat.engine import ChatEngine
    from core.models import loading, merge

    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(home))
    r = cli("train", str(upstream_file(home, tmp_path)), "--name", "kto-lora", "--detach", "--json", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    run_id = json.loads(r.stdout)["run_id"]
    wait_for(lambda: runs.status(run_id)["state"] not in ("queued", "running"), 300, 0.2)
    assert runs.status(run_id)["state"] == "succeeded", runs.status(run_id)
    d = runs.run_dir(run_id)
    flat = json.loads((d / "config.json").read_text())
    assert upstream.is_kto(flat) and flat["lora"] is True and flat["lazy"] is False
    steps = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines() if '"loss"' in x]
    assert len(steps) == 8 and all({"rewards/chosen", "rewards/rejected", "rewards/margins", "kl"} <= set(s) for s in steps)
    assert all((s["count/chosen"], s["count/rejected"]) == (N_RECORDS / 2, N_RECORDS / 2) for s in steps)
    first, last = steps[0], steps[-1]
    print(f"\nKTO-LoRA: loss {first['loss']:.4f} -> {last['loss']:.4f}, rewards/margins "
          f"{first['rewards/margins']:.3f} -> {last['rewards/margins']:.3f}, kl {last['kl']:.3f}")
    assert last["loss"] < first["loss"] - 0.03
    assert last["rewards/margins"] > first["rewards/margins"] + 0.2
    out = d / "output"
    assert loading.adapter_kind(out) == "lora"
    marker = json.loads((out / "studio_model.json").read_text())
    assert marker["method"] == "kto" and marker["kto"]["beta"] == 0.1 and marker["steps"] == 8
    assert "chat_template" not in json.loads((out / "tokenizer_config.json").read_text())  # trained without one
    engine = ChatEngine(None, out)
    assert engine.template is None
    # the direction the labels ask for: the trained answers' log-likelihood (prompts as training built
    # them, no template) rose for the desirable ones and fell for the undesirable ones
    records = [json.loads(x) for x in (home / "datasets" / "kto" / "train.json").read_text().splitlines()]
    sorts = np.array([r["sort"][0] for r in records])
    base, _, _ = loading.load(loading.base_of(out))
    change = (answer_logps(engine.model, engine.tokenizer, None, records)
              - answer_logps(base, engine.tokenizer, None, records))[:, 0]
    print(f"answer logp change: desirable {change[sorts == 1].mean():+.2f}, undesirable {change[sorts == 0].mean():+.2f}")
    assert change[sorts == 1].mean() > 0.3 and change[sorts == 0].mean() < -2.0
    answer = engine.chat([{"role": "user", "content": "计算 7 - 4 等于多少？"}], temperature=0, max_new_tokens=12).text
    assert answer.strip()
    res = merge.merge(None, out, home / "models" / "kto-merged", log=lambda m: None)
    assert res["check"]["max_abs_diff"] < 1e-4 and res["check"]["training"]["ok"], res["check"]
