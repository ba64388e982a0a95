"""What ReFT changes on the demo model, against the base and against LoRA trained as long in the
same invocation: dev exact match, loss and token accuracy on the demo's dev split, and steps/s.

Each run goes through the studio's run machinery (the demo-reft / demo-lora presets, max_steps
overridden), then `paddle-studio eval` scores it. Needs the demo workspace (.cache/demo-ws).

    .venv/bin/python bench/reft_demo.py [--steps 600] [--limit 200] [--position f7+l7] [--rank 8]
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

from tests.conftest import link_demo  # noqa: E402


def cli(home: Path, *args: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "core.cli", *args, "--json"], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PADDLE_STUDIO_HOME": str(home)}, timeout=3600)
    if r.returncode:
        sys.exit(f"paddle-studio {' '.join(args)} failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout)


def train(home: Path, preset: str, steps: int, **method) -> tuple[Path, float]:
    from core.train import config, runs

    os.environ["PADDLE_STUDIO_HOME"] = str(home)
    cfg = config.load_preset(preset, home)
    cfg.name = f"bench-{preset}"
    cfg.training.max_steps = steps
    cfg.training.evaluation_strategy, cfg.training.save_strategy = "no", "no"
    for k, v in method.items():
        setattr(cfg.method, k, v)
    run_id = runs.create(cfg)
    runs.start(run_id)
    while runs.status(run_id)["state"] in ("queued", "running"):
        time.sleep(1)
    st = runs.status(run_id)
    if st["state"] != "succeeded":
        sys.exit(f"{preset} run {run_id}: {st}")
    rows = [json.loads(x) for x in (runs.run_dir(run_id) / "metrics.jsonl").read_text().splitlines()]
    speeds = [r["steps_per_sec"] for r in rows if "steps_per_sec" in r]
    return runs.run_dir(run_id) / "output", speeds[-1] if speeds else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--limit", type=int, default=200, help="dev records scored")
    ap.add_argument("--position", default="f7+l7")
    ap.add_argument("--rank", type=int, default=8)
    a = ap.parse_args()
    demo = ROOT / ".cache" / "demo-ws"
    if not (demo / "models" / "demo-base").is_dir():
        sys.exit("no demo workspace in .cache/demo-ws: run `make test` or `paddle-studio demo init` first")
    home = link_demo(Path(tempfile.mkdtemp(prefix="reft-bench-")) / "ws", demo)
    data = ["--data", str(home / "datasets" / "demo"), "--limit", str(a.limit), "--src-length", "64", "--max-length", "96"]
    rows = [("base", cli(home, "eval", "--model", str(home / "models" / "demo-base"), *data), float("nan"))]
    reft_dir, reft_speed = train(home, "demo-reft", a.steps, reft_position=a.position, reft_rank=a.rank)
    rows.append((f"ReFT {a.position} r{a.rank}", cli(home, "eval", "--adapter", str(reft_dir), *data), reft_speed))
    lora_dir, lora_speed = train(home, "demo-lora", a.steps)
    rows.append(("LoRA r16", cli(home, "eval", "--adapter", str(lora_dir), *data), lora_speed))
    print(f"demo model, {a.steps} steps each, {a.limit} dev records")
    print(f"{'model':18} {'exact match':>11} {'eval loss':>9} {'token acc':>9} {'steps/s':>8}")
    for name, m, speed in rows:
        print(f"{name:18} {m['exact_match']:11.3f} {m['eval_loss']:9.3f} {m['token_accuracy']:9.3f} {speed:8.3g}")
    base = rows[0][1]
    for name, m, _ in rows[1:]:
        print(f"{name}: exact match +{m['exact_match'] - base['exact_match']:.3f}, "
              f"loss x{m['eval_loss'] / base['eval_loss']:.3f} of the base's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
