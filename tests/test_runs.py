"""Real runs through paddle.distributed.launch (gloo on CPU): train, evaluate, data parallel,
stop, resume, continue, queue, merge. Marked slow: each trains the demo model for seconds."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from core.train import config
from core.train import runs

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def cli(*args, home, timeout=600):
    r = subprocess.run([sys.executable, "-m", "core.cli", *args], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PADDLE_STUDIO_HOME": str(home)}, timeout=timeout)
    return r


@pytest.fixture(scope="module")
def ws(demo_home, tmp_path_factory):
    """A workspace whose demo model and dataset are links to the shared demo build."""
    home = tmp_path_factory.mktemp("runs-ws")
    (home / "models").mkdir()
    (home / "datasets").mkdir()
    (home / "models" / "demo-base").symlink_to(demo_home / "models" / "demo-base")
    (home / "datasets" / "demo").symlink_to(demo_home / "datasets" / "demo")
    return home


def small_config(ws, path, **over):
    """demo-lora shortened: few steps, checkpoints every 4, no evaluation."""
    cfg = config.load_preset("demo-lora", ws)
    flat = cfg.to_paddlenlp()
    flat.update({"max_steps": 12, "save_steps": 4, "eval_steps": 1000, "evaluation_strategy": "no",
                 "save_total_limit": 5, **over})
    path.write_text(json.dumps(flat))
    return path


def wait_for(pred, timeout, step=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError("timed out")


def processes_of(run_dir: Path) -> list:
    """Any process whose command line mentions this run directory."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(str(run_dir) in a for a in (p.info["cmdline"] or [])):
                out.append(p)
        except psutil.Error:
            continue
    return out


@pytest.fixture(scope="module")
def lora_run(ws):
    r = cli("train", "demo-lora", "--json", home=ws)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["status"]["state"] == "succeeded" and out["status"]["exit_code"] == 0
    return out


def test_demo_lora_run_raises_exact_match(lora_run, ws):
    d = Path(lora_run["dir"])
    recs = [json.loads(l) for l in (d / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in recs if "loss" in r]
    evals = [r for r in recs if "eval_loss" in r]
    assert len(losses) == 300 and len(evals) == 2
    assert all(k in evals[-1] for k in ("eval_ppl", "token_accuracy"))
    assert all("tokens_per_sec" in r and "eta" in r for r in recs if "loss" in r and r["step"] > 1)
    adapter = d / "output"
    assert (adapter / "lora_config.json").is_file() and (adapter / "studio_model.json").is_file()
    data = str(ws / "datasets" / "demo")
    base = json.loads(cli("eval", "--model", str(ws / "models" / "demo-base"), "--data", data, "--src-length", "64",
                          "--max-length", "96", "--json", home=ws).stdout)
    tuned = json.loads(cli("eval", "--adapter", str(adapter), "--data", data, "--src-length", "64",
                           "--max-length", "96", "--json", home=ws).stdout)
    print(f"\nexact match base {base['exact_match']:.3f} -> LoRA {tuned['exact_match']:.3f}; "
          f"eval loss {base['eval_loss']:.3f} -> {tuned['eval_loss']:.3f}; run {recs[-1]['time'] - recs[0]['time']:.1f} s")
    assert base["records"] == tuned["records"] == 200
    # What this tiny model reaches on CPU in 300 LoRA steps varies a lot between machines (its
    # pretraining at lr 1e-2 is chaotic: a different BLAS summation order is a different model):
    # exact match 0.07 (CI) to 0.475 (a dev box), token accuracy ~0.87 either way. The bounds hold
    # for every build measured (see README, demo workspace) and still fail an untrained adapter.
    assert base["exact_match"] <= 0.05  # the base has never seen the chat template
    assert tuned["exact_match"] >= 0.04 and tuned["exact_match"] > base["exact_match"] + 0.03  # >= 8 dev answers
    assert tuned["eval_loss"] < base["eval_loss"] - 1.0 and tuned["eval_loss"] < 0.6
    assert tuned["rouge_l"] > base["rouge_l"] + 0.15 and tuned["bleu4"] > base["bleu4"] + 0.2


def test_merged_logits_equal_adapter_logits(lora_run, ws, tmp_path):
    out = ws / "models" / "demo-merged-test"
    r = cli("merge", "--adapter", str(Path(lora_run["dir"]) / "output"), "--out", str(out), "--json", home=ws)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)
    assert res["check"]["max_abs_diff"] < 1e-4
    assert (out / "model.safetensors").is_file() and not list(out.parent.glob(".demo-merged-test*"))
    cfg = json.loads((out / "tokenizer_config.json").read_text())
    assert "<|assistant|>" in cfg["chat_template"]
    # our own check of what is on disk, independent of merge's: same logits as base + adapter
    code = (
        "import sys, paddle\n"
        "from core.models import loading as E\nfrom core.data import templates as T\n"
        "m1, tok, tpl = E.load(sys.argv[1], sys.argv[2]); m2, _, _ = E.load(sys.argv[3])\n"
        "ids = paddle.to_tensor([T.prompt_ids(tok, tpl, [{'role': 'user', 'content': '翻译成英文：红色的书'}])])\n"
        "a = m1(input_ids=ids); b = m2(input_ids=ids)\n"
        "a = a[0] if isinstance(a, tuple) else a.logits; b = b[0] if isinstance(b, tuple) else b.logits\n"
        "print(float((a - b).abs().max()))\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(ws / "models" / "demo-base"), str(Path(lora_run["dir"]) / "output"),
                        str(out)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert float(r.stdout.strip().splitlines()[-1]) < 1e-4
    # a second merge to the same place is refused and changes nothing
    before = (out / "model.safetensors").stat().st_mtime_ns
    r = cli("merge", "--adapter", str(Path(lora_run["dir"]) / "output"), "--out", str(out), home=ws)
    assert r.returncode != 0 and "exists" in r.stderr
    assert (out / "model.safetensors").stat().st_mtime_ns == before


def test_data_parallel_two_processes(ws, tmp_path):
    cfg = small_config(ws, tmp_path / "dp.json", max_steps=6, save_strategy="no")
    r = cli("train", str(cfg), "--nproc", "2", "--json", home=ws)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    d = Path(out["dir"])
    assert out["status"]["state"] == "succeeded" and out["status"]["exit_code"] == 0
    assert (d / "log" / "workerlog.0").is_file() and (d / "log" / "workerlog.1").is_file()
    assert "--nproc_per_node 2" in (d / "command.txt").read_text()
    steps = [json.loads(l)["step"] for l in (d / "metrics.jsonl").read_text().splitlines() if '"loss"' in l]
    assert steps == list(range(1, 7))  # rank 0 alone writes metrics


def test_stop_leaves_no_process_and_resume_continues_from_checkpoint(ws, tmp_path):
    cfg = small_config(ws, tmp_path / "long.json", max_steps=400, save_steps=4, logging_steps=1)
    r = cli("train", str(cfg), "--detach", "--json", home=ws)
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout)["run_id"]
    os.environ["PADDLE_STUDIO_HOME"] = str(ws)
    try:
        d = runs.run_dir(run_id)
        wait_for(lambda: (d / "output" / "checkpoint-8" / "trainer_state.json").is_file(), 120)
        assert processes_of(d), "the run should be alive before Stop"
        t0 = time.time()
        r = cli("runs", "stop", run_id, "--json", home=ws)
        assert r.returncode == 0, r.stderr
        wait_for(lambda: not processes_of(d), 10)
        assert time.time() - t0 < 10
        st = runs.status(run_id)
        assert st["state"] == "stopped"
        ck = runs.last_checkpoint(d)
        ck_step = int(ck.name.split("-")[1])
        before = [json.loads(l) for l in (d / "metrics.jsonl").read_text().splitlines()]
        last_step = max(r["step"] for r in before if "loss" in r)
        assert ck_step <= last_step < 400

        r = cli("runs", "resume", run_id, "--json", home=ws)
        assert r.returncode == 0, r.stderr
        wait_for(lambda: len((d / "metrics.jsonl").read_text().splitlines()) > len(before) + 2, 120)
        after = [json.loads(l) for l in (d / "metrics.jsonl").read_text().splitlines()][len(before):]
        begin = next(r for r in after if r.get("event") == "train_begin")
        first = next(r for r in after if "loss" in r)
        assert begin["step"] == ck_step and first["step"] == ck_step + 1
        runs.stop(run_id)
        wait_for(lambda: not processes_of(d), 10)
    finally:
        os.environ.pop("PADDLE_STUDIO_HOME", None)


def test_queue_and_continue(ws, tmp_path, monkeypatch):
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(ws))
    a = config.RunConfig.from_paddlenlp(json.loads(small_config(ws, tmp_path / "a.json", max_steps=8).read_text()), name="qa")
    b = config.RunConfig.from_paddlenlp(json.loads(small_config(ws, tmp_path / "b.json", max_steps=4).read_text()), name="qb")
    ra, rb = runs.create(a), runs.create(b)
    assert runs.start(ra)["state"] == "running"
    assert runs.start(rb)["state"] == "queued"  # same devices (this CPU): waits its turn
    wait_for(lambda: runs.status(ra)["state"] == "succeeded", 180, 0.5)
    wait_for(lambda: runs.status(rb)["state"] == "succeeded", 180, 0.5)
    ta = json.loads((runs.run_dir(ra) / "status.json").read_text())["finished"]
    tb = json.loads((runs.run_dir(rb) / "status.json").read_text())["started"]
    assert tb >= ta  # b started only after a had finished
    # Continue the finished run for more steps: it picks up at its last step
    st = runs.continue_run(rb, steps=4)
    assert st["state"] == "running"
    wait_for(lambda: runs.status(rb)["state"] == "succeeded", 180, 0.5)
    recs = [json.loads(l) for l in (runs.run_dir(rb) / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in recs if "loss" in r]
    assert steps == list(range(1, 9))
    assert json.loads((runs.run_dir(rb) / "config.json").read_text())["max_steps"] == 8


def test_kill9_launcher_or_supervisor_leaves_no_rank_and_no_stalled_queue(ws, tmp_path, monkeypatch):
    """kill -9 of the launcher: its two ranks (process groups of their own) are ended and the run
    fails with a reason; kill -9 of a supervisor: the run queued behind it still starts."""
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(ws))
    cfg = small_config(ws, tmp_path / "dp.json", max_steps=400, save_strategy="no")
    r = cli("train", str(cfg), "--nproc", "2", "--detach", "--json", home=ws)
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout)["run_id"]
    d = runs.run_dir(run_id)
    wait_for(lambda: (d / "metrics.jsonl").is_file() and "loss" in (d / "metrics.jsonl").read_text(), 120)
    st = runs.status(run_id)
    ranks = [p for p in processes_of(d)
             if "entry.py" in " ".join(p.cmdline()) and "paddle.distributed.launch" not in p.cmdline()]
    assert len(ranks) == 2 and all(os.getpgid(p.pid) != st["pgid"] for p in ranks)
    t_kill = time.time()
    os.kill(st["pid"], 9)  # the launcher
    gone, left = psutil.wait_procs(ranks, timeout=15)
    assert not left, [p.cmdline() for p in left]
    t_ranks = time.time() - t_kill
    wait_for(lambda: runs.status(run_id)["state"] == "failed", 30)
    assert not processes_of(d)
    assert "launcher was killed (SIGKILL)" in runs.status(run_id)["reason"]

    # a queued run behind a supervisor that is killed -9 still starts
    first = json.loads(cli("train", str(small_config(ws, tmp_path / "a.json", max_steps=400, save_strategy="no")),
                           "--detach", "--json", home=ws).stdout)["run_id"]
    second = json.loads(cli("train", str(small_config(ws, tmp_path / "b.json", max_steps=4, save_strategy="no")),
                            "--detach", "--json", home=ws).stdout)["run_id"]
    assert runs.status(second)["state"] == "queued"
    wait_for(lambda: runs.status(first).get("pid"), 60)
    st = runs.status(first)
    t_kill = time.time()
    os.kill(st["supervisor_pid"], 9)
    os.killpg(st["pgid"], 9)  # and the launcher with it (as a machine-wide kill would)
    wait_for(lambda: runs.status(first)["state"] == "failed", 30)  # status() notices, ends the ranks, kicks the queue
    wait_for(lambda: runs.status(second)["state"] in ("running", "succeeded"), 30)
    print(f"kill -9 launcher: ranks gone {t_ranks:.2f} s later; kill -9 supervisor: queued run started "
          f"{time.time() - t_kill:.2f} s later")
    wait_for(lambda: runs.status(second)["state"] == "succeeded", 180)
    wait_for(lambda: not processes_of(runs.run_dir(first)), 15)
