"""How close the Train tab's estimate (core.train.estimate) comes to what runs measure.

Trains 6 demo configs for real (methods x lengths x processes) in a scratch workspace, each to the
end, its supervisor sampling PSS (core.train.monitor); then, for each, the estimate calibrated by
the OTHER five (leave one out, as a new config meets the runs before it) against the run's own peak
PSS per rank and its training time, as ratios; then each config again, estimated after a dry run of
its own (estimate.dry_run, 20 steps). Goal: within +-25 % after calibration.
Usage: python bench/estimate_accuracy.py [--steps 60] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONFIGS = [  # (name, method, max_length, nproc)
    ("lora-128-1", "lora", 128, 1),
    ("lora-256-1", "lora", 256, 1),
    ("lora-128-2", "lora", 128, 2),
    ("sft-128-1", "sft", 128, 1),
    ("sft-256-2", "sft", 256, 2),
    ("prefix-128-1", "prefix", 128, 1),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="estimate-bench-"))
    os.environ["PADDLE_STUDIO_HOME"] = str(home)
    os.environ["PADDLE_STUDIO_VERIFY"] = "0"
    from core import demo
    from core.train import config, estimate, monitor, runs

    demo.init(log=lambda m: None)
    done = {}
    for name, method, length, nproc in CONFIGS:
        cfg = config.load_preset("demo-lora", home)
        cfg.name = name
        cfg.method.method = method
        cfg.data.max_length, cfg.data.src_length = length, length // 2
        cfg.training.max_steps = a.steps
        cfg.training.evaluation_strategy = "no"
        cfg.training.save_strategy = "no"
        cfg.parallel.nproc = nproc
        run_id = runs.create(cfg)
        runs.start(run_id)
        while runs.status(run_id)["state"] in runs.ACTIVE:
            time.sleep(0.5)
        d = runs.run_dir(run_id)
        recs = [r for r in monitor.read(d) if r.get("procs")]
        peak = max(max((p["pss_mib"] for p in r["procs"] if p["role"].startswith("rank")), default=0) for r in recs)
        metrics = runs.read_metrics(d)[0]
        begin = next(r["time"] for r in metrics if r.get("event") == "train_begin")
        last = max(r["time"] for r in metrics if "loss" in r)
        done[name] = (d, cfg, peak, last - begin)
    rows = []
    for name, (d, cfg, peak, secs) in done.items():
        hidden = home / "parked" / d.name  # out of runs/: left out of the calibration
        hidden.parent.mkdir(exist_ok=True)
        d.rename(hidden)
        try:
            e = estimate.estimate(cfg)
        finally:
            hidden.rename(d)
        rows.append({"config": name, "peak_pss_mib": round(peak, 1), "estimate_mib": round(e["per_process_mib"], 1),
                     "mem_ratio": round(e["per_process_mib"] / peak, 3), "seconds": round(secs, 2),
                     "estimate_s": round(e["seconds"], 2), "time_ratio": round(e["seconds"] / secs, 3),
                     "calibrated_by": e["calibrated_runs"]})
    # then "on request": a dry run of each config (estimate.DRY_RUN_STEPS steps, a run of its own)
    # calibrates that config's estimate alone
    for row, (name, (d, cfg, peak, secs)) in zip(rows, done.items()):
        dry = estimate.dry_run(cfg)
        while runs.status(dry)["state"] in runs.ACTIVE:
            time.sleep(0.5)
        e = estimate.estimate(cfg)
        assert e["dry_run"] == dry, (e, dry)
        row.update({"dry_mib": round(e["per_process_mib"], 1), "dry_mem_ratio": round(e["per_process_mib"] / peak, 3),
                    "dry_s": round(e["seconds"], 2), "dry_time_ratio": round(e["seconds"] / secs, 3)})
    if a.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'config':14} {'peak PSS':>9} {'estimate':>9} {'ratio':>6}   {'train s':>8} {'estimate':>9} {'ratio':>6}")
        for r in rows:
            print(f"{r['config']:14} {r['peak_pss_mib']:9.0f} {r['estimate_mib']:9.0f} {r['mem_ratio']:6.2f}   "
                  f"{r['seconds']:8.1f} {r['estimate_s']:9.1f} {r['time_ratio']:6.2f}")
        inside = sum(0.75 <= r["mem_ratio"] <= 1.25 for r in rows), sum(0.75 <= r["time_ratio"] <= 1.25 for r in rows)
        print(f"within +-25 %: memory {inside[0]}/{len(rows)}, time {inside[1]}/{len(rows)} (leave-one-out calibration)")
        print(f"\nafter a {estimate.DRY_RUN_STEPS}-step dry run of each config:")
        for r in rows:
            print(f"{r['config']:14} {r['peak_pss_mib']:9.0f} {r['dry_mib']:9.0f} {r['dry_mem_ratio']:6.2f}   "
                  f"{r['seconds']:8.1f} {r['dry_s']:9.1f} {r['dry_time_ratio']:6.2f}")
        inside = (sum(0.75 <= r["dry_mem_ratio"] <= 1.25 for r in rows),
                  sum(0.75 <= r["dry_time_ratio"] <= 1.25 for r in rows))
        print(f"within +-25 %: memory {inside[0]}/{len(rows)}, time {inside[1]}/{len(rows)} (dry-run calibration)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
