"""Stop -> the last process of a 2-rank CPU run gone (launcher, both ranks, supervisor), as the
Runs tab's Stop and `paddle-studio runs stop` do it (runs.stop), once both ranks are training.

Two ways, alternating in one invocation:
  now       runs.stop(): SIGTERM to the run's processes; the launcher, once its ranks are gone, SIGKILL
  launcher  the same SIGTERM, then the launcher is left to end by itself (what Stop did before:
            paddle.distributed.launch's own handler waits on its watcher, master and pod)
For each try it prints when the ranks were gone, when the last process was gone and when the
stop call returned; at the end the medians and 90th percentiles per way and their ratio. Goal:
median all-gone <= 2 s.
Usage: python bench/stop_latency.py [--repeat 10] [--modes now,launcher] [--home WORKSPACE_WITH_DEMO]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import link_demo  # noqa: E402


def run_processes(d: Path) -> dict:
    """pid -> "rank"/"launcher"/"supervisor" for every process naming the run folder."""
    import psutil

    out = {}
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
        except psutil.Error:
            continue
        if str(d) in cmd and p.pid != os.getpid():
            out[p.pid] = ("launcher" if "paddle.distributed.launch" in cmd
                          else "supervisor" if "core.train.runs" in cmd else "rank")
    return out


def stop_leaving_the_launcher(run_id: str) -> dict:
    """runs.stop() without the launcher's early SIGKILL: the baseline."""
    from core import jobs
    from core.train import runs

    d = runs.run_dir(run_id)
    (d / "stop.request").write_text(runs._now())
    st = runs.status(d)
    jobs.stop_processes(st, runs.STOP_GRACE, also=runs.orphans(d))
    deadline = time.time() + 5
    while time.time() < deadline and runs.status(d).get("state") == "running":
        time.sleep(0.05)
    return runs.status(d)


def one(home: Path, mode: str) -> dict:
    from core.train import config, runs

    cfg = config.load_preset("demo-lora", home)
    cfg.name = "stop-latency"
    cfg.parallel.nproc = 2
    cfg.training.max_steps = 100000
    cfg.training.evaluation_strategy = "no"
    cfg.training.save_strategy = "no"
    run_id = runs.create(cfg)
    d = runs.run_dir(run_id)
    runs.start(run_id)
    deadline = time.time() + 240
    while time.time() < deadline:  # both ranks past their first steps
        steps = [(json.loads(f.read_text()) if f.is_file() else {}).get("step", 0)
                 for f in (d / "progress.rank0.json", d / "progress.rank1.json")]
        if min(steps) >= 2:
            break
        time.sleep(0.1)
    else:
        raise SystemExit(f"{run_id}: the ranks did not reach step 2 in 240 s; see {d / 'log'}")
    seen = run_processes(d)
    assert sorted(seen.values()).count("rank") == 2, seen
    marks: dict[str, float] = {}

    def watch():
        while True:
            now = run_processes(d)
            if "rank" not in now.values() and "ranks" not in marks:
                marks["ranks"] = time.perf_counter()
            if not now:
                marks["all"] = time.perf_counter()
                return
            time.sleep(0.02)

    t0 = time.perf_counter()
    w = threading.Thread(target=watch)
    w.start()
    st = runs.stop(run_id) if mode == "now" else stop_leaving_the_launcher(run_id)
    marks["returned"] = time.perf_counter()
    w.join(60)
    state = runs.status(run_id).get("state")
    return {"run": run_id, "mode": mode, "state": state, "stop_state": st.get("state"),
            **{k: v - t0 for k, v in marks.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--modes", default="now,launcher")
    ap.add_argument("--home", help="a workspace with the demo (default: a temp one linked to .cache/demo-ws)")
    a = ap.parse_args()
    tmp = None
    if a.home:
        home = Path(a.home)
    else:
        demo = ROOT / ".cache" / "demo-ws"
        if not (demo / "models" / "demo-base").is_dir():
            raise SystemExit(f"no demo build at {demo}: run `PADDLE_STUDIO_HOME={demo} paddle-studio demo init` first")
        tmp = tempfile.TemporaryDirectory(prefix="stop-latency-")
        home = link_demo(Path(tmp.name) / "ws", demo)
    os.environ["PADDLE_STUDIO_HOME"] = str(home)
    os.environ["PADDLE_STUDIO_VERIFY"] = "0"
    modes = [m for m in a.modes.split(",") if m]
    rows = []
    for k in range(a.repeat):
        for mode in modes:
            r = one(home, mode)
            rows.append(r)
            print(f"try {k + 1:2} {mode:8}: ranks gone {r.get('ranks', float('nan')):.3f} s, "
                  f"all gone {r.get('all', float('nan')):.3f} s, stop returned {r['returned']:.3f} s, state {r['state']}",
                  flush=True)

    def p90(xs):
        return xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))]

    med = {}
    print()
    for mode in modes:
        mine = [r for r in rows if r["mode"] == mode]
        alls = sorted(r["all"] for r in mine if "all" in r)
        ranks = sorted(r["ranks"] for r in mine if "ranks" in r)
        med[mode] = statistics.median(alls)
        print(f"{mode:8} Stop -> last process gone, 2 ranks, {len(mine)} tries: median {med[mode]:.3f} s, "
              f"p90 {p90(alls):.3f} s, range {alls[0]:.3f}-{alls[-1]:.3f} s; ranks gone: median "
              f"{statistics.median(ranks):.3f} s; states {sorted({r['state'] for r in mine})}")
    if "now" in med and "launcher" in med:
        print(f"now / launcher: {med['now'] / med['launcher']:.2f}x (goal: now <= 2 s)")
    if tmp:
        tmp.cleanup()
    return 0 if med.get("now", 0) <= 2.0 and all(r["state"] == "stopped" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
