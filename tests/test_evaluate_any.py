"""Evaluate & predict on any data (issue 35): per-record scores and the notes on what a score does
not mean; a predictions job for the demo model on an uploaded (alpaca) file and for an adapter with
its base on a dataset's train split, each writing predictions.jsonl whose answers are core's own;
refusals before anything starts."""

import json
import time
from pathlib import Path

import pytest

from core.models import evaluate
from tests.conftest import link_demo

MAX_NEW = 16


def wait_job(job_id: str, timeout: float = 120) -> dict:
    from core import jobs

    deadline = time.time() + timeout
    while jobs.status(job_id).get("state") in jobs.ACTIVE:
        assert time.time() < deadline, jobs.read_log(job_id)[-3000:]
        time.sleep(0.2)
    info = jobs.show(job_id)
    assert info["status"]["state"] == "succeeded", (info["status"], jobs.read_log(job_id)[-3000:])
    return info


def lines(path) -> list[dict]:
    return [json.loads(x) for x in Path(path).read_text(encoding="utf-8").splitlines() if x.strip()]


def test_record_scores_and_what_they_do_not_mean():
    s = evaluate.record_scores("sun mountain kitten", "sun mountain kitten")
    assert s == {"exact_match": True, "rouge_l": 1.0, "bleu4": None}  # 3 tokens: BLEU-4 says nothing
    s = evaluate.record_scores("the red table is here", "the red table is there")
    assert not s["exact_match"] and 0 < s["rouge_l"] < 1 and s["bleu4"] is not None
    notes = {n["code"]: n for n in evaluate.score_notes(["a b", "x y z w v"], ["a b", "x y z w"])}
    assert notes["bleu4_short_records"]["params"] == {"short": 1, "records": 2}
    assert "bleu4_short_answers" not in notes  # half the references are short: BLEU-4 still counts
    notes = {n["code"] for n in evaluate.score_notes(["a", "b", "c d e f"], ["a", "b", "c d e f"])}
    assert notes == {"bleu4_short_answers", "bleu4_short_records"}
    assert evaluate.score_notes(["a b c d"], ["a b c d"]) == []


def test_refused_before_anything_starts(tmp_path, monkeypatch, demo_home):
    from core import jobs

    home = link_demo(tmp_path / "ws", demo_home)
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(home))
    base = home / "models" / "demo-base"
    only_train = home / "datasets" / "only-train"
    only_train.mkdir()
    (only_train / "train.json").write_text('{"src": "q", "tgt": "a"}\n', encoding="utf-8")
    text = tmp_path / "text.jsonl"
    text.write_text('{"text": "just some text"}\n', encoding="utf-8")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    cases = [((base, only_train), {"split": "dev"}, "no_split"), ((base, text), {}, "text_data"),
             ((base, empty), {}, "no_records"), ((tmp_path, only_train), {}, "no_model"),
             ((base, tmp_path / "nothing.json"), {}, "no_data")]
    for args, kw, code in cases:
        with pytest.raises(jobs.Refused) as e:
            evaluate.submit_predict(*args, **kw)
        assert e.value.code == code, (code, str(e.value))
    assert not (home / "jobs").exists() or not list((home / "jobs").iterdir())


def test_predictions_jobs_on_an_upload_and_on_a_train_split(tmp_path, monkeypatch, demo_home):
    import paddle
    from paddlenlp.peft import LoRAConfig, LoRAModel
    from paddlenlp.transformers import AutoModelForCausalLM

    from core import catalog

    home = link_demo(tmp_path / "ws", demo_home)
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(home))
    base = home / "models" / "demo-base"
    # an "uploaded" file in alpaca form: converted as the job reads it
    dev = [json.loads(x) for x in (home / "datasets" / "demo" / "dev.json").read_text(encoding="utf-8").splitlines()]
    single = [r for r in dev if isinstance(r["src"], str) or len(r["src"]) == 1][:12]
    upload = tmp_path / "upload" / "mine.jsonl"
    upload.parent.mkdir()
    upload.write_text("".join(json.dumps({"instruction": r["src"] if isinstance(r["src"], str) else r["src"][0],
                                          "output": r["tgt"] if isinstance(r["tgt"], str) else r["tgt"][0]},
                                         ensure_ascii=False) + "\n" for r in single), encoding="utf-8")
    job_a = evaluate.submit_predict(base, upload, max_new_tokens=MAX_NEW, upload_name="mine.jsonl")

    # a LoRA adapter (random B, no training) that records its base: listed by the catalog as an adapter
    adapter = home / "models" / "my-lora"
    paddle.seed(3)
    lm = LoRAModel(AutoModelForCausalLM.from_pretrained(str(base), dtype="float32"),
                   LoRAConfig(target_modules=[".*q_proj.*", ".*v_proj.*"], r=4, lora_alpha=8, merge_weights=False,
                              base_model_name_or_path=str(base)))
    for n, w in lm.model.named_parameters():
        if "lora_B" in n:
            w.set_value(paddle.randn(w.shape) * 0.3)
    lm.save_pretrained(str(adapter))
    del lm
    assert any(m["path"] == str(adapter) and m["kind"] == "adapter" for m in catalog.models())
    job_b = evaluate.submit_predict(adapter, home / "datasets" / "demo", split="train", limit=4, max_new_tokens=MAX_NEW)

    # core's own answers for the uploaded prompts, in this process, while the jobs run
    want = evaluate.evaluate(str(base), None, upload, max_new_tokens=MAX_NEW, predictions=True)

    info = wait_job(job_a)
    d = Path(info["dir"])
    res = info["result"]
    assert res["predictions_file"] == str(d / "predictions.jsonl") and res["predictions_count"] == len(single) == 12
    assert (d / "data.jsonl").read_bytes() == upload.read_bytes()  # the job keeps the data it judged
    got = lines(d / "predictions.jsonl")
    assert [r["output"] for r in got] == [r["output"] for r in want["predictions"]]
    assert [r["reference"] for r in got] == [r["output"] for r in map(json.loads, upload.read_text().splitlines())]
    for r in got:
        assert set(r) == {"index", "prompt", "history", "system", "reference", "output", "exact_match", "rouge_l", "bleu4"}
        assert r == {**r, **evaluate.record_scores(r["output"], r["reference"])}
    assert res["exact_match"] == pytest.approx(sum(r["exact_match"] for r in got) / len(got))
    assert res["rouge_l"] == pytest.approx(want["rouge_l"]) and res["bleu4"] == pytest.approx(want["bleu4"])
    assert res["eval_loss"] == pytest.approx(want["eval_loss"], rel=1e-4)
    short = sum(r["bleu4"] is None for r in got)
    notes = {n["code"]: n["params"] for n in res.get("notes", [])}
    assert (notes.get("bleu4_short_records") == {"short": short, "records": 12}) if short else not notes
    assert not list(d.glob(".*.tmp")) and not list(d.glob(".predictions*"))

    info = wait_job(job_b)
    res = info["result"]
    assert res["adapter"] == str(adapter) and res["model"] is None and res["split"] == "train"
    got = lines(Path(info["dir"]) / "predictions.jsonl")
    train = [json.loads(x) for x in (home / "datasets" / "demo" / "train.json").read_text(encoding="utf-8").splitlines()[:4]]
    assert [r["reference"] for r in got] == [r["tgt"] if isinstance(r["tgt"], str) else r["tgt"][-1] for r in train]
    assert [len(r["history"]) for r in got] == [0 if isinstance(r["src"], str) else len(r["src"]) - 1 for r in train]
    # the Evaluate tab re-attaches to the newest predictions job, the Merge tab to the newest comparison
    assert evaluate.latest_job(predict=True) == job_b and evaluate.latest_job(predict=False) is None
    assert [r["index"] for r in evaluate.read_predictions(Path(info["dir"]) / "predictions.jsonl", 2, 3)[0]] == [3]


def test_cli_eval_writes_predictions_of_a_train_split(tmp_path, demo_home):
    """The headless twin: `paddle-studio eval --split train --predictions FILE`."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    home = link_demo(tmp_path / "ws", demo_home)
    out = tmp_path / "preds" / "p.jsonl"
    out.parent.mkdir()
    r = subprocess.run([sys.executable, "-m", "core.cli", "eval", "--model", str(home / "models" / "demo-base"),
                        "--data", str(home / "datasets" / "demo"), "--split", "train", "--limit", "3",
                        "--max-new-tokens", str(MAX_NEW), "--no-generation", "--predictions", str(out), "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PADDLE_STUDIO_HOME": str(home)})
    assert r.returncode == 2 and "predictions" in r.stderr  # nothing to predict without generation
    # several targets on the same records (what the Merge tab's comparison job runs)
    base = str(home / "models" / "demo-base")
    r = subprocess.run([sys.executable, "-m", "core.cli", "eval", "--target", f"a={base}", "--target", f"b={base}",
                        "--data", str(home / "datasets" / "demo"), "--limit", "3", "--no-generation", "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PADDLE_STUDIO_HOME": str(home)})
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(r.stdout)["rows"]
    assert [x["label"] for x in rows] == ["a", "b"] and rows[0]["eval_loss"] == rows[1]["eval_loss"]
    r = subprocess.run([sys.executable, "-m", "core.cli", "eval", "--model", str(home / "models" / "demo-base"),
                        "--data", str(home / "datasets" / "demo"), "--split", "train", "--limit", "3",
                        "--max-new-tokens", str(MAX_NEW), "--predictions", str(out), "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PADDLE_STUDIO_HOME": str(home)})
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    rows = lines(out)
    train = lines(home / "datasets" / "demo" / "train.json")[:3]
    assert len(rows) == 3 == res["records"] and [x["reference"] for x in rows] == [x["tgt"][-1] for x in train]
    assert sum(x["exact_match"] for x in rows) / 3 == res["exact_match"]
