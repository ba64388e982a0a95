"""Start -> first loss point of the demo LoRA preset, through the run machinery the page uses
(runs.create + runs.start, no browser), split by phase:

  spawn      runs.start() returned -> the training process wrote its first line (interpreter up)
  imports    -> paddle + the paddlenlp parts training needs are imported
  tokenizer  -> tokenizer and chat template loaded
  data       -> train/dev records read and tokenized
  model      -> model loaded and wrapped for the method
  trainer    -> SFTTrainer built
  first step -> the first loss line in metrics.jsonl

Each configuration runs --repeat times, alternating:
  warm      a warm spare (core.train.warm) claims the run: what the studio does while it runs
  direct    no spare: the supervisor starts the entry itself (the CLI, or the first seconds of a studio)
  launcher  the same single process through paddle.distributed.launch (PADDLE_STUDIO_LAUNCHER=always,
            what every run did before)
Prints medians per phase and the ratios to the launcher.
Usage: python bench/first_point.py [--repeat 3] [--home WORKSPACE_WITH_DEMO]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import link_demo  # noqa: E402

PHASES = ["process", "imports", "tokenizer", "data", "model", "trainer"]


def one(home: Path, mode: str) -> dict:
    from core.train import config, runs, warm

    os.environ.pop("PADDLE_STUDIO_LAUNCHER", None)
    os.environ["PADDLE_STUDIO_WARM"] = "1" if mode == "warm" else "0"
    if mode == "launcher":
        os.environ["PADDLE_STUDIO_LAUNCHER"] = "always"
    if mode == "warm":  # the studio keeps one ready; wait until it is, as a user would have
        s = warm.keep_spare(os.getpid())
        while s and not (s / "ready").exists():
            time.sleep(0.1)
    cfg = config.load_preset("demo-lora", home)
    cfg.name = "first-point"
    cfg.training.max_steps = 40
    cfg.training.evaluation_strategy = "no"
    cfg.training.save_strategy = "no"
    run_id = runs.create(cfg)
    d = runs.run_dir(run_id)
    t0 = time.time()
    runs.start(run_id)
    first = None
    deadline = t0 + 180
    while time.time() < deadline:
        m = d / "metrics.jsonl"
        if m.is_file():
            for line in m.read_text().splitlines():
                r = json.loads(line)
                if "loss" in r:
                    first = time.time()
                    break
        if first or runs.status(run_id)["state"] not in ("queued", "running"):
            break
        time.sleep(0.02)
    runs.stop(run_id)
    if first is None:
        raise SystemExit(f"no loss point: {runs.status(run_id)}")
    stamps = {}
    for line in (d / "startup.jsonl").read_text().splitlines():
        r = json.loads(line)
        stamps[r["phase"]] = r["time"]
    out, prev = {}, t0
    for ph in PHASES:
        if ph in stamps:
            out["spawn" if ph == "process" else ph] = stamps[ph] - prev
            prev = stamps[ph]
    out["first step"] = first - prev
    out["total"] = first - t0
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--home", default=str(ROOT / ".cache" / "demo-ws"))
    a = ap.parse_args()
    demo = Path(a.home)
    ws = link_demo(Path(tempfile.mkdtemp(prefix="bench-first-")), demo)
    os.environ["PADDLE_STUDIO_HOME"] = str(ws)
    results = {"warm": [], "direct": [], "launcher": []}
    for _ in range(a.repeat):
        for name in results:
            results[name].append(one(ws, name))
    keys = ["spawn", "imports", "tokenizer", "data", "model", "trainer", "first step", "total"]
    print(f"{'phase (median s)':<18}" + "".join(f"{k:>12}" for k in results))
    for k in keys:
        print(f"{k:<18}" + "".join(f"{statistics.median(r[k] for r in rs):>12.2f}" for rs in results.values()))
    w, d, l = (statistics.median(r["total"] for r in results[k]) for k in results)
    print(f"Start -> first loss point (median): warm {w:.2f} s, direct {d:.2f} s, through the launcher {l:.2f} s; "
          f"ratios to the launcher {w / l:.2f} / {d / l:.2f} (goal <= 4 s; LlamaBoard 6.2 s on this machine)")


if __name__ == "__main__":
    main()
