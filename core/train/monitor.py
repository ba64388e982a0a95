"""What a run costs the machine, sampled by its supervisor into ``resources.jsonl`` in the run folder
(so it is there after a reload and after the run).

Each line: the time, every process of the run (its launcher and each rank: CPU %, RSS and PSS, in
MiB) and the machine (CPU %, memory used and available, free disk where the workspace is, and GPUs
when ``nvidia-smi`` is there). Memory is counted as PSS: pages shared between ranks (paddle's
libraries, ~450 MiB of a rank's ~880 MiB RSS here) count once, split between the processes that
share them, so the run's total is the sum of its processes' PSS; an RSS sum counts them once per
process. GPUs are left out where there is no ``nvidia-smi`` (not an error).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

FILE = "resources.jsonl"
EVERY_S = 5.0
MIB = 1 << 20


def _role(p) -> str:
    cmd = " ".join(p.cmdline() or [])
    if "paddle.distributed.launch" in cmd:
        return "launcher"
    try:
        rank = p.environ().get("PADDLE_TRAINER_ID", "0")
    except Exception:  # noqa: BLE001 - psutil.AccessDenied, a process gone meanwhile
        rank = "?"
    return f"rank {rank}"


def gpus() -> list[dict]:
    """Every GPU's memory and use from nvidia-smi; [] without it (or when it fails)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run([exe, "--query-gpu=index,memory.used,memory.total,utilization.gpu",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = []
    for line in out.strip().splitlines():
        try:
            i, used, total, util = (x.strip() for x in line.split(","))
            rows.append({"gpu": int(i), "mem_used_mib": float(used), "mem_total_mib": float(total), "util": float(util)})
        except ValueError:
            continue
    return rows


def sample(run_dir: Path, procs: list) -> dict:
    """One sample of the run's processes (psutil.Process objects, cpu_percent primed) and the machine."""
    import psutil

    rows = []
    for p in procs:
        try:
            with p.oneshot():
                mem = p.memory_full_info()
                rows.append({"pid": p.pid, "role": _role(p), "cpu": round(p.cpu_percent(None), 1),
                             "rss_mib": round(mem.rss / MIB, 1), "pss_mib": round(getattr(mem, "pss", mem.rss) / MIB, 1)})
        except psutil.Error:
            continue
    vm = psutil.virtual_memory()
    try:
        disk = shutil.disk_usage(run_dir)
        disk_free = round(disk.free / MIB, 1)
    except OSError:
        disk_free = None
    rec = {"time": round(time.time(), 3), "procs": rows,
           "run_cpu": round(sum(r["cpu"] for r in rows), 1),
           "run_pss_mib": round(sum(r["pss_mib"] for r in rows), 1),
           "run_rss_sum_mib": round(sum(r["rss_mib"] for r in rows), 1),
           "machine": {"cpu": psutil.cpu_percent(None), "cores": psutil.cpu_count() or 1,
                       "mem_used_mib": round((vm.total - vm.available) / MIB, 1),
                       "mem_available_mib": round(vm.available / MIB, 1), "mem_total_mib": round(vm.total / MIB, 1),
                       "disk_free_mib": disk_free}}
    g = gpus()
    if g:
        rec["machine"]["gpus"] = g
    return rec


class Sampler:
    """Called from the supervisor's watch loop: a sample every ``every`` seconds, appended to the
    run folder. Never raises (a full disk loses samples, not the run)."""

    def __init__(self, run_dir: Path, find_procs, every: float = EVERY_S):
        self.run_dir, self.find, self.every = Path(run_dir), find_procs, every
        self.next = 0.0
        self.known: dict[int, object] = {}

    def tick(self) -> None:
        now = time.time()
        if now < self.next:
            return
        self.next = now + self.every
        try:
            import psutil

            live = {p.pid: p for p in self.find()}
            for pid, p in live.items():  # cpu_percent needs a first call to measure from
                if pid not in self.known:
                    self.known[pid] = p
                    try:
                        p.cpu_percent(None)
                    except psutil.Error:
                        pass
            self.known = {pid: p for pid, p in self.known.items() if pid in live}
            rec = sample(self.run_dir, list(self.known.values()))
            with open(self.run_dir / FILE, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")
        except Exception:  # noqa: BLE001 - monitoring must never end a run
            pass


def read(run_dir: Path) -> list[dict]:
    """Every sample of the run, oldest first."""
    f = Path(run_dir) / FILE
    out = []
    try:
        for line in f.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    except OSError:
        pass
    return out


def summary(run_dir: Path) -> dict | None:
    """The run's peak PSS and mean CPU over its samples, and the latest machine reading."""
    recs = [r for r in read(run_dir) if r.get("procs")]
    if not recs:
        return None
    return {"samples": len(recs), "peak_pss_mib": max(r["run_pss_mib"] for r in recs),
            "mean_cpu": round(sum(r["run_cpu"] for r in recs) / len(recs), 1), "last": recs[-1]}


def smaps_pss_mib(pid: int) -> float | None:
    """A process's PSS straight from /proc/PID/smaps_rollup (what the samples are checked against)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def machine_now(path: str | Path | None = None) -> dict:
    """The machine at a glance (the page header): CPU %, memory, free disk; GPUs where there are."""
    import psutil

    vm = psutil.virtual_memory()
    out = {"cpu": psutil.cpu_percent(None), "cores": psutil.cpu_count() or 1, "load1": os.getloadavg()[0],
           "mem_used_mib": round((vm.total - vm.available) / MIB, 1), "mem_total_mib": round(vm.total / MIB, 1)}
    if path is not None:
        try:
            out["disk_free_mib"] = round(shutil.disk_usage(path).free / MIB, 1)
        except OSError:
            pass
    g = gpus()
    if g:
        out["gpus"] = g
    return out
