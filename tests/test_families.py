"""Every model family with a preset, through the whole pipeline: import (Hugging Face layout
converted where the preset describes it, PaddleNLP's otherwise) -> LoRA 20 steps (a real run) ->
merge (merged logits equal adapter logits) -> chat in the family's own template (merged answers
equal adapter answers) -> wint8 (perplexity before and after); and prefix tuning where the family
supports it, refused with the reason where it does not."""

import json

import pytest

import numpy as np

from core.data import templates
from core.models import loading
from core.train import config, runs
from tests.test_models_import import _logits
from tests.conftest import link_demo
from tests.test_runs import cli, wait_for

pytestmark = pytest.mark.slow
FAMILIES = sorted(config.family_presets())
QUESTIONS = ["翻译成英文：红色的苹果", "What is 3 plus 4?"]
SHORT = ["1", "2", "红", "蓝", "a", "b"]  # prompts of a few tokens: a batch of 8 outnumbers their length


@pytest.fixture(scope="module")
def home(demo_home, tmp_path_factory):
    return link_demo(tmp_path_factory.mktemp("families") / "ws", demo_home)


def _imported(home, family) -> str:
    name = f"{family}-in"
    if (home / "models" / name).is_dir():
        return str(home / "models" / name)
    hf = "hf_format" in config.family_preset(family)
    src = home / "uploads" / f"{family}-{'hf' if hf else 'paddle'}"
    r = cli("demo", "init", "--family", family, "--out", str(src), *(["--hf"] if hf else []), "--json", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    r = cli("models", "import", str(src), "--name", name, "--json", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["converted"] is hf
    return str(home / "models" / name)


def _train(home, model, method, steps, name):
    cfg = config.load_preset("demo-lora", home)
    cfg.name = name
    cfg.model.model_name_or_path = model
    cfg.method.method = method
    cfg.method.num_prefix_tokens = 8
    cfg.training.max_steps = steps
    cfg.training.evaluation_strategy = "no"
    cfg.training.save_strategy = "no"
    cfg.training.learning_rate = 0.01
    problems = config.check(cfg, has_gpu=False)
    if problems:
        return None, [config.check_message(p) for p in problems]
    run_id = runs.create(cfg)
    runs.start(run_id)
    wait_for(lambda: runs.status(run_id)["state"] not in ("queued", "running"), 300, 0.5)
    st = runs.status(run_id)
    assert st["state"] == "succeeded", (st, (runs.run_dir(run_id) / "log").glob("*"))
    return runs.run_dir(run_id), []


def _verified(run) -> dict:
    """The run's round-trip verdict (core.train.verify), once its supervisor has written it."""
    from core.train import verify

    v = wait_for(lambda: (lambda x: x if x and x.get("state") not in ("running",) else None)(verify.read(run)), 180, 0.5)
    return v


def _chat(home, *target, via_cli: bool = True):
    """Greedy answers to QUESTIONS from ``chat`` (the first through the CLI, as a person runs it, when
    ``via_cli``; the rest through the same ChatEngine in this process: each CLI call is a new process
    importing paddle)."""
    from core.chat.engine import ChatEngine, GenParams

    out = []
    if via_cli:
        r = cli("chat", *target, "--prompt", QUESTIONS[0], "--max-new-tokens", "8", "--json", home=home)
        assert r.returncode == 0, r.stderr[-2000:]
        out = [json.loads(r.stdout)["answer"]]
    args = dict(zip(target[::2], target[1::2]))
    eng = ChatEngine(args.get("--model"), args.get("--adapter"))
    for q in QUESTIONS[len(out):]:
        g = eng.start([{"role": "user", "content": q}], GenParams.of(max_new_tokens=8, temperature=0.0))  # greedy, as the CLI
        "".join(g)
        out.append(g.text)
    return out


def _stepwise(model, tok, tpl, question: str, n: int) -> str:
    """Greedy answer by plain forwards, no cache: the whole sequence (prompt + the answer so far) run
    afresh at every step, with the family's own mask and positions built for it (core.models.layouts)
    — an independent reference for generate's cached decoding and its growing of masks and positions."""
    import paddle

    from core.models import layouts

    prompt = templates.prompt_ids(tok, tpl, [{"role": "user", "content": question}])
    ids = list(prompt)
    with paddle.no_grad():
        for _ in range(n):
            x = np.array([ids])
            out = model(input_ids=paddle.to_tensor(x), **layouts.inputs(model, x, np.ones_like(x)))
            nxt = int(loading.logits_of(out).numpy()[0, -1].argmax())
            if nxt == tok.eos_token_id:
                break
            ids.append(nxt)
    return tok.decode(ids[len(prompt):], skip_special_tokens=True).strip()


def _generation_is_the_models(model_dir):
    """Batched greedy answers (left padded, prompts shorter than the batch among them) equal one-at-
    a-time answers, and equal the step-by-step forward reference."""
    from core.models import evaluate

    model, tok, tpl = loading.load(str(model_dir))
    qs = QUESTIONS + SHORT
    batched = evaluate.generate(model, tok, tpl, [[{"role": "user", "content": q}] for q in qs], 8)
    single = evaluate.generate(model, tok, tpl, [[{"role": "user", "content": q}] for q in qs], 8, batch_size=1)
    assert batched == single
    for q, a in list(zip(qs, single))[:3]:
        assert a == _stepwise(model, tok, tpl, q, 8), (q, a)


@pytest.mark.parametrize("family", FAMILIES)
def test_family_lora_merge_chat_wint8(home, family, monkeypatch):
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(home))
    monkeypatch.setenv("PADDLE_STUDIO_VERIFY", "1")  # the run's supervisor proves its output after the run
    preset = config.family_preset(family)
    model = _imported(home, family)
    # the tokenizer speaks the family's own chat template: its markers are in the prompt
    from core.chat.engine import ChatEngine

    eng = ChatEngine(model)
    prompt = eng.tokenizer.decode(eng.encode([{"role": "user", "content": QUESTIONS[0]}]))
    assert all(m in prompt for m in preset["template_markers"][-2:] if m not in ("<<SYS>>", "<</SYS>>")), prompt
    del eng

    run, problems = _train(home, model, "lora", 20, f"{family}-lora")
    assert not problems, problems
    recs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in recs if "steps_per_sec" in r][-1]
    assert last["step"] == 20
    # a random model starts near ln V: the loss is a mean over the answer tokens only (OPT's own
    # forward averaged over every position, prompt and padding too: 1.76 where ln V is 6.54)
    vocab = json.loads((home / "models" / f"{family}-in" / "config.json").read_text())["vocab_size"]
    first = next(r["loss"] for r in recs if "loss" in r)
    assert first > 0.8 * np.log(vocab), (first, np.log(vocab))
    # what the run saved, reloaded in a fresh process, gives the loss training had in memory
    v = _verified(run)
    assert v["state"] == "verified", v
    out = v["targets"]["output"]
    assert out["diff"] <= out["tolerance"] and out["tokenization_identical"] == f"{out['examples']}/{out['examples']}"
    adapter = run / "output"
    merged = home / "models" / f"{family}-merged"
    r = cli("merge", "--adapter", str(adapter), "--out", str(merged), "--json", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    check = json.loads(r.stdout)["check"]
    diff = check["max_abs_diff"]
    assert diff < 1e-4
    # and the merged model, reloaded from disk, against training's own record (not the adapter as loaded here)
    assert check["training"]["ok"] and check["training"]["diff"] <= check["training"]["tolerance"], check
    moved = float(np.abs(_logits(merged) - _logits(model)).max())
    assert moved > 1e-3  # 20 LoRA steps changed the model (a dead layer would leave it as it was)
    via_adapter = _chat(home, "--adapter", str(adapter))
    via_merged = _chat(home, "--model", str(merged), via_cli=False)  # the CLI's path was taken with the adapter
    assert via_merged == via_adapter  # greedy answers of the merged model are the adapter's
    _generation_is_the_models(merged)
    r = cli("quantize", "--model", str(merged), "--preset", "wint8", "--data", str(home / "datasets" / "demo"),
            "--eval-limit", "16", "--out", str(home / "models" / f"{family}-wint8"), "--json", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads(r.stdout)
    before, after = rep["eval"]["before"]["perplexity"], rep["eval"]["after"]["perplexity"]
    assert abs(after - before) / before < 0.05  # int8 weights barely move a model's perplexity
    print(f"\nFAMILY {family}: {json.loads((home / 'models' / f'{family}-in' / 'studio_model.json').read_text())['parameters']:,} "
          f"parameters, {last['steps_per_sec']:.3g} steps/s, first loss {first:.3g} (ln V {np.log(vocab):.3g}), reloaded "
          f"{out['reloaded_eval_loss']:.5g} vs training {out['training_eval_loss']:.5g}, LoRA moved logits by {moved:.3g}, "
          f"merge diff {diff:.3g}, wint8 ppl {before:.4g} -> {after:.4g}")


@pytest.mark.parametrize("family", FAMILIES)
def test_family_prefix(home, family, monkeypatch):
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(home))
    preset = config.family_preset(family)
    model = _imported(home, family)
    run, problems = _train(home, model, "prefix", 10, f"{family}-prefix")
    if preset.get("prefix") is not True:
        assert problems and preset["prefix"]["unsupported"] in problems[0], problems
        pytest.skip(f"prefix tuning on {family}: {preset['prefix']['unsupported']}")
    assert not problems, problems
    assert (run / "output" / "prefix_config.json").is_file()
    answers = _chat(home, "--adapter", str(run / "output"))
    assert len(answers) == 2
    # left-padded batches answer as one prompt at a time (a prefix's trained keys carry no position:
    # rows whose positions were shifted by their padding saw them from elsewhere)
    from core.data import datasets, templates
    from core.models import evaluate, loading

    model, tok, tpl = loading.load(None, run / "output")
    convs = [templates.messages_of(r)[:-1] for r in list(datasets.iter_records(home / "datasets" / "demo" / "dev.json",
                                                                               "paddlenlp"))[:16]]
    batched = evaluate.generate(model, tok, tpl, convs, 12)
    single = evaluate.generate(model, tok, tpl, convs, 12, batch_size=1)
    assert batched == single


def test_chatglm_guide_sft_chat_ptq_gptq(home, monkeypatch):
    """PaddleNLP's ChatGLM-6B guide on the tiny ChatGLM v1: full SFT -> chat in its template (its
    [gMASK]<sop> prompt, 4-D mask and 2-D positions) -> PTQ A8W8 and GPTQ through the Quantize
    job (the Quantize tab runs the same function). LoRA and P-Tuning v2 are the parametrized tests above."""
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(home))
    monkeypatch.setenv("PADDLE_STUDIO_VERIFY", "1")
    model = _imported(home, "chatglm")
    run, problems = _train(home, model, "sft", 20, "chatglm-sft")
    assert not problems, problems
    v = _verified(run)
    assert v["state"] == "verified", v
    out = run / "output"
    answers = _chat(home, "--model", str(out))
    model_, tok_, tpl_ = loading.load(str(out))
    assert answers[1] == _stepwise(model_, tok_, tpl_, QUESTIONS[1], 8)
    del model_
    for preset, ratio in (("a8w8", 0.25), ("gptq-wint4", 0.5)):
        dest = home / "models" / f"chatglm-sft-{preset}"
        r = cli("quantize", "--model", str(out), "--preset", preset, "--data", str(home / "datasets" / "demo"),
                "--eval-limit", "16", "--out", str(dest), "--json", home=home)
        assert r.returncode == 0, r.stderr[-2000:]
        rep = json.loads(r.stdout)
        before, after = rep["eval"]["before"]["perplexity"], rep["eval"]["after"]["perplexity"]
        assert abs(after - before) / before < ratio, (preset, before, after)
        print(f"\nCHATGLM {preset}: ppl {before:.4g} -> {after:.4g}")
