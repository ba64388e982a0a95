"""GPU check: the paths this CPU machine cannot run, tried through the studio's own verbs on a CUDA
machine with the GPU build of paddle (paddlepaddle-gpu 3.0 for its CUDA, from PaddlePaddle's install
guide) installed in the project's venv. Each check prints one line, PASS / FAIL / SKIP with the
reason and its figures; the summary table at the end is what to paste into an issue.

    python bench/gpu_check.py [--out DIR]          (bench/gpu_check.sh wraps it; < 5 min on one GPU)

Checks (a tiny random LLaMA built by `demo init --family llama`, the demo dataset):
1. QLoRA nf4 (weight_quantize_algo nf4): trains 20 steps, the saved adapter verifies (core.train.verify);
2. FlashAttention + flash_mask (zero padding): trains 20 steps and verifies;
3. bf16 O2: trains 20 steps and verifies;
4. weight-only int8 and int4 (wint8 / wint4 presets, kernel gpu): quantize the merged LoRA model and
   chat with it through `weight_only_linear`;
5. with 2+ GPUs: tensor parallel 2 (--devices 0,1) LoRA, its adapter merged back into one model.
On a machine without a CUDA GPU it stops at once with exit code 2 and says why.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def gpus() -> int:
    try:
        import paddle
    except ImportError:
        return 0
    if not paddle.device.is_compiled_with_cuda():
        return 0
    return paddle.device.cuda.device_count()


def cli(home: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PADDLE_STUDIO_HOME": str(home), "PADDLE_STUDIO_VERIFY": "1"})


def last_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip() and "Warning" not in x]
    return lines[-1][:300] if lines else ""


def train(home: Path, name: str, change: dict, parallel: dict | None = None) -> tuple[bool, str, str | None]:
    """Train the demo LoRA preset on the tiny model with ``change`` (section -> {field: value}, or
    "extra" -> upstream keys); (passed, figures or reason, run dir)."""
    from core.train import config, verify

    cfg = config.load_preset("demo-lora", home)
    cfg.name = name
    cfg.model.model_name_or_path = str(home / "models" / "tiny-llama")
    cfg.training.max_steps, cfg.training.save_steps, cfg.training.evaluation_strategy = 20, 20, "no"
    for sec, values in change.items():
        for k, v in values.items():
            if sec == "extra":
                cfg.extra[k] = v
            else:
                setattr(getattr(cfg, sec), k, v)
    for k, v in (parallel or {}).items():
        setattr(cfg.parallel, k, v)
    problems = config.check(cfg, has_gpu=True)
    if problems:
        return False, "refused: " + "; ".join(config.check_message(p) for p in problems), None
    config.save_named(cfg)
    path = config.saved_path(cfg.name)
    r = cli(home, "train", str(path), "--json", timeout=900)
    try:
        show = json.loads(r.stdout)
    except ValueError:
        return False, f"train exit {r.returncode}: {last_line(r.stderr)}", None
    d = Path(show["dir"])
    st = show["status"]
    if st.get("state") != "succeeded":
        return False, f"{st.get('state')}: {st.get('reason')}", str(d)
    deadline = time.time() + 300
    v = verify.read(d)
    while (not v or v.get("state") == "running") and time.time() < deadline:
        time.sleep(1)
        v = verify.read(d)
    s = verify.summary(v) or {}
    loss = [r.get("loss") for r in map(json.loads, (d / "metrics.jsonl").read_text().splitlines()) if "loss" in r]
    fig = f"loss {loss[0]:.3f} -> {loss[-1]:.3f}, {s.get('state')}"
    if s.get("reloaded_eval_loss") is not None:
        fig += f" (reloaded {s['reloaded_eval_loss']:.5g} vs {s['training_eval_loss']:.5g})"
    return s.get("state") == "verified", fig, str(d)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="workspace to build in (default: a new temp folder)")
    a = ap.parse_args(argv)
    n = gpus()
    if n == 0:
        print("gpu_check: no CUDA GPU is visible to paddle (paddle.device.is_compiled_with_cuda() is False or "
              "cuda.device_count() is 0): install paddlepaddle-gpu 3.0 for this machine's CUDA into .venv and run it "
              "on the GPU machine", file=sys.stderr)
        return 2
    import paddle

    home = Path(a.out or tempfile.mkdtemp(prefix="gpu-check-"))
    os.environ["PADDLE_STUDIO_HOME"] = str(home)  # saved configs go to this workspace
    t0 = time.time()
    print(f"paddle {paddle.__version__}, {n} GPU(s): {paddle.device.cuda.get_device_name(0)}; workspace {home}")
    r = cli(home, "demo", "init", "--family", "llama", "--json")
    if r.returncode != 0:
        print(f"FAIL building the tiny model: {last_line(r.stderr)}")
        return 1
    rows = []

    def record(name, ok, text):
        rows.append((name, "PASS" if ok is True else "SKIP" if ok is None else "FAIL", text))
        print(f"{rows[-1][1]:4} {name}: {text}", flush=True)

    ok, text, _ = train(home, "qlora-nf4", {"method": {"method": "qlora", "weight_quantize_algo": "nf4"}})
    record("QLoRA nf4", ok, text)
    ok, text, _ = train(home, "flash", {"training": {"use_flash_attention": True, "flash_mask": True},
                                        "data": {"zero_padding": True}})
    record("FlashAttention + flash_mask", ok, text)
    ok, text, _ = train(home, "bf16-o2", {"training": {"bf16": True, "fp16_opt_level": "O2"}})
    record("bf16 O2", ok, text)
    ok, text, lora = train(home, "lora", {})
    record("LoRA (base for the quantized chats)", ok, text)
    if lora:
        merged = home / "models" / "lora-merged"
        r = cli(home, "merge", "--adapter", str(Path(lora) / "output"), "--out", str(merged), "--json")
        if r.returncode != 0:
            record("merge", False, last_line(r.stderr))
        for preset in ("wint8", "wint4"):
            q = home / "models" / f"lora-{preset}"
            r = cli(home, "quantize", "--model", str(merged), "--preset", preset, "--data", str(home / "datasets" / "demo"),
                    "--eval-limit", "16", "--kernel", "gpu", "--out", str(q), "--json")
            if r.returncode != 0:
                record(f"{preset} (weight_only_linear)", False, last_line(r.stderr))
                continue
            rep = json.loads(r.stdout)
            c = cli(home, "chat", "--model", str(q), "--prompt", "What is 3 plus 4?", "--max-new-tokens", "8", "--json")
            ans = json.loads(c.stdout).get("answer") if c.returncode == 0 else None
            ev = rep.get("eval", {})
            record(f"{preset} (weight_only_linear)", c.returncode == 0,
                   f"perplexity {ev.get('before', {}).get('perplexity')} -> {ev.get('after', {}).get('perplexity')}, "
                   f"chat {ans!r}" if c.returncode == 0 else last_line(c.stderr))
    if n >= 2:
        ok, text, tp = train(home, "tp2", {"parallel": {"tensor_parallel_degree": 2}}, {"devices": "0,1", "nproc": 1})
        record("tensor parallel 2 (LoRA)", ok, text)
        if tp:
            r = cli(home, "merge", "--adapter", str(Path(tp) / "output"), "--out", str(home / "models" / "tp2-merged"),
                    "--json")
            record("tensor parallel 2: adapter merged back", r.returncode == 0,
                   f"max |merged - adapter| {json.loads(r.stdout)['check']['max_abs_diff']:.3g}" if r.returncode == 0
                   else last_line(r.stderr))
    else:
        record("tensor parallel 2", None, "one GPU only")
    print(f"\n| check | result | figures / reason |\n|---|---|---|")
    for name, res, text in rows:
        print(f"| {name} | {res} | {text} |")
    print(f"\n{time.time() - t0:.0f} s")
    return 0 if all(r[1] != "FAIL" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
