"""Steps/s of the demo LoRA preset launched through the studio (supervisor + paddle.distributed.launch)
divided by steps/s of the same config trained directly in one process (`python core/train/entry.py`).

Both runs use the same config.json; speed is (last step - step 10) / (time between them) read
from each run's metrics.jsonl, so start-up is excluded from both. Goal >= 0.98.
Usage: python bench/train_overhead.py [--steps 120] [--home WORKSPACE_WITH_DEMO]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def speed(metrics: Path, skip: int = 10) -> float:
    recs = [json.loads(l) for l in metrics.read_text().splitlines() if '"loss"' in l]
    a = next(r for r in recs if r["step"] >= skip)
    b = recs[-1]
    return (b["step"] - a["step"]) / (b["time"] - a["time"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--home", default=str(ROOT / ".cache" / "demo-ws"))
    a = ap.parse_args()
    home = Path(a.home)
    env = {**os.environ, "PADDLE_STUDIO_HOME": str(home)}
    if not (home / "models" / "demo-base").is_dir():
        subprocess.run([sys.executable, "-m", "core.cli", "demo", "init"], cwd=ROOT, env=env, check=True)
    from core.train import config

    flat = config.load_preset("demo-lora", home).to_paddlenlp()
    flat.update(max_steps=a.steps, evaluation_strategy="no", save_strategy="no")
    tmp = Path(tempfile.mkdtemp(prefix="bench-train-"))
    direct = tmp / "direct"
    direct.mkdir()
    (direct / "config.json").write_text(json.dumps({**flat, "output_dir": str(direct / "output")}))
    with open(direct / "log.txt", "wb") as log:
        subprocess.run([sys.executable, str(ROOT / "core" / "train" / "entry.py"), str(direct / "config.json")], cwd=direct,
                       stdout=log, stderr=subprocess.STDOUT, check=True)
    cfg_path = tmp / "bench.json"
    cfg_path.write_text(json.dumps(flat))
    r = subprocess.run([sys.executable, "-m", "core.cli", "train", str(cfg_path), "--name", "bench-overhead", "--json"],
                       cwd=ROOT, env={**env, "PADDLE_STUDIO_HOME": str(tmp / "ws")}, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stderr[-2000:])
    studio_dir = Path(json.loads(r.stdout)["dir"])
    sd, ss = speed(direct / "metrics.jsonl"), speed(studio_dir / "metrics.jsonl")
    print(f"direct (one process):        {sd:.2f} steps/s")
    print(f"through the studio (launch): {ss:.2f} steps/s")
    print(f"ratio studio/direct: {ss / sd:.3f} (goal >= 0.98; LlamaBoard 0.79)")


if __name__ == "__main__":
    main()
