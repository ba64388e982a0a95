"""Export to a static Paddle Inference folder (core.models.export) and run it (core.models.static):
the demo model with a LoRA adapter merged into it is exported in its own process, as the studio
runs it; the folder describes itself; greedy answers on 20 dev prompts are dygraph
evaluate.generate's token for token (the merged model in this process is the reference); chat,
eval and a serve worker answer from the folder; seeded sampling repeats; adapters and quantized
folders are refused before any work."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from core import workspace
from core.models import export

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def run_export(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "core.cli", "export", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


class Spy:
    """A tokenizer that records the rows evaluate.generate decodes (its answers as token ids)."""

    def __init__(self, tok):
        self.tok, self.rows = tok, []

    def __getattr__(self, name):
        return getattr(self.tok, name)

    def decode(self, row, **kw):
        self.rows.append(list(row))
        return self.tok.decode(row, **kw)


@pytest.fixture(scope="module")
def merged(demo_home, tmp_path_factory):
    """The demo model with a LoRA adapter (random, non-zero B) merged in by `paddle-studio merge`."""
    import paddle
    from paddlenlp.peft import LoRAConfig, LoRAModel
    from paddlenlp.transformers import AutoModelForCausalLM

    base = str(demo_home / "models" / "demo-base")
    root = tmp_path_factory.mktemp("export")
    adapter = root / "adapter"
    paddle.seed(11)
    lm = LoRAModel(AutoModelForCausalLM.from_pretrained(base, dtype="float32"),
                   LoRAConfig(target_modules=[".*q_proj.*", ".*v_proj.*"], r=4, lora_alpha=8, merge_weights=False,
                              base_model_name_or_path=base))
    for n, w in lm.model.named_parameters():
        if "lora_B" in n:
            w.set_value(paddle.randn(w.shape) * 0.3)
    lm.save_pretrained(str(adapter))
    (adapter / "studio_model.json").write_text(json.dumps({"base": base}))
    out = root / "demo-merged"
    r = subprocess.run([sys.executable, "-m", "core.cli", "merge", "--adapter", str(adapter), "--out", str(out), "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def test_export_runs_like_dygraph(merged, demo_home, tmp_path):
    from core.data import datasets, templates
    from core.models import evaluate, loading, static

    base = merged
    out = tmp_path / "demo-static"
    r = run_export("--model", base, "--out", out, "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)
    assert res["check"] == {"prompts": 4, "new_tokens": export.CHECK_NEW_TOKENS, "matched": 4}

    # the folder describes itself and holds what the engine and upstream tools read
    info = json.loads((out / workspace.MODEL_MARKER).read_text(encoding="utf-8"))
    assert info["kind"] == "static" and export.is_static(out)
    assert info["exported_from"] == str(base.resolve())
    assert info["dtype"] == "float32" and info["max_length"] == 512
    assert info["decode_strategies"] == ["greedy_search", "sampling"]
    assert (out / "model.pdiparams").is_file() and ((out / "model.json").is_file() or (out / "model.pdmodel").is_file())
    assert (out / "config.json").is_file()
    tpl_src = json.loads((base / "tokenizer_config.json").read_text(encoding="utf-8"))["chat_template"]
    assert json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))["chat_template"] == tpl_src
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp folder left behind
    assert run_export("--model", base, "--out", out).returncode == 2  # never over an existing folder

    # 20 dev prompts: static greedy == dygraph evaluate.generate, token for token
    convs = [templates.messages_of(r)[:-1]
             for r in datasets.iter_records(demo_home / "datasets" / "demo" / "dev.json", "paddlenlp")][:20]
    model, tok, tpl = loading.load(base)
    spy = Spy(tok)
    texts = evaluate.generate(model, spy, tpl, convs, 32)
    engine = static.StaticEngine(out)
    assert engine.input_names == info["inputs"]
    prompts = [engine.prompt(c) for c in convs]
    assert prompts == [templates.prompt_ids(tok, tpl, c) for c in convs]
    ids = engine.generate(prompts, 32)
    assert sum(a == b for a, b in zip(ids, spy.rows)) == 20, [(a, b) for a, b in zip(ids, spy.rows) if a != b][:2]
    assert engine.answers(convs, 32) == texts
    assert any(len(r) < 32 for r in ids)  # answers end at the end-of-text token, which is cut

    # one graph samples too: a seed repeats an answer, another seed gives others
    kw = dict(greedy=False, temperature=1.3, top_k=0, top_p=0.95, seed=7)
    a = engine.generate(prompts[:6], 16, **kw)
    assert a == engine.generate(prompts[:6], 16, **kw)
    assert a != engine.generate(prompts[:6], 16, **{**kw, "seed": 8})
    assert engine.generate(prompts[:6], 16, greedy=False, top_k=1, seed=3) == [r[:16] for r in ids[:6]]
    assert engine.generate(prompts[:6], 16, greedy=False, top_p=0.01, seed=3) == [r[:16] for r in ids[:6]]  # nucleus of 1
    assert all(len(r) == 16 for r in engine.generate(prompts[:3], 16, min_new_tokens=16))

    # chat (the CLI), eval and a serve worker take the static folder like any model
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "core.cli", "chat", "--model", str(out), "--prompt", convs[0][-1]["content"],
                        "--max-new-tokens", "32", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["answer"] == evaluate.generate(model, tok, tpl, [convs[0][-1:]], 32)[0]
    res = evaluate.evaluate(str(out), None, demo_home / "datasets" / "demo", limit=20, max_new_tokens=32)
    ref = evaluate.evaluate(None, None, demo_home / "datasets" / "demo", limit=20, max_new_tokens=32,
                            loaded=(model, tok, tpl))
    assert (res["exact_match"], res["bleu4"], res["rouge_l"]) == (ref["exact_match"], ref["bleu4"], ref["rouge_l"])
    assert "eval_loss" not in res and "logits" in res["note"]
    from core.chat import server as serve

    w = serve.start_worker(str(out), log_path=str(tmp_path / "serve.log"))
    try:
        got = requests.post(w.url + "/v1/chat/completions", timeout=120, json={
            "messages": convs[1], "temperature": 0, "max_tokens": 32}).json()
        assert got["choices"][0]["message"]["content"] == texts[1], got
        assert got["choices"][0]["finish_reason"] in ("stop", "length")
    finally:
        serve.stop_worker(w)


def test_export_refuses_before_any_work(demo_home, tmp_path):
    prefix = tmp_path / "prefix-adapter"
    prefix.mkdir()
    (prefix / "prefix_config.json").write_text(json.dumps({"base_model_name_or_path": str(demo_home / "models" / "demo-base"),
                                                            "num_prefix_tokens": 8}), encoding="utf-8")
    t = time.perf_counter()
    r = run_export("--model", prefix, "--out", tmp_path / "out")
    took = time.perf_counter() - t
    assert r.returncode == 2, r.stderr
    assert "prefix-tuning adapter cannot be exported" in r.stderr and "no weights to fold" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "out").exists()
    assert took < 5, took  # refused before paddle is imported or a model loaded

    lora = tmp_path / "lora-adapter"
    lora.mkdir()
    (lora / "lora_config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(export.ExportRefused, match="merge it first") as e:
        export.check(lora)
    assert e.value.code == "adapter_lora"
    quant = tmp_path / "quantized"
    quant.mkdir()
    (quant / "config.json").write_text("{}", encoding="utf-8")
    (quant / workspace.QUANT_MARKER).write_text(json.dumps({"algorithm": "weight_only_int8"}), encoding="utf-8")
    with pytest.raises(export.ExportRefused, match="weight_only_linear") as e:
        export.check(quant)
    assert e.value.code == "quantized"
