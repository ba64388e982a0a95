"""Start `paddle-studio ui` and print the time until its page answers and the process's peak memory.

Peak memory is the kernel's high-water mark of the studio process (VmHWM), read after the page
has been fetched once. Runs each measurement --repeat times and prints the median.
Goals: <= 3 s and <= 300 MiB (LlamaBoard on the same machine: 5.6 s, 579 MiB).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vm_hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def once(home: str) -> tuple[float, float]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    env = {**os.environ, "PADDLE_STUDIO_HOME": home}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "core.cli", "ui", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"studio exited with {proc.returncode}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    r.read()
                break
            except OSError:
                time.sleep(0.02)
        dt = time.perf_counter() - t0
        # fetch the app config too (what the browser asks for next), then read the peak
        with urllib.request.urlopen(url + "config", timeout=10) as r:
            r.read()
        time.sleep(0.5)
        return dt, vm_hwm_mib(proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--home", help="workspace to open (default: a fresh empty one)")
    a = ap.parse_args()
    home = a.home or tempfile.mkdtemp(prefix="studio-bench-")
    times, mems = [], []
    for _ in range(a.repeat):
        dt, mem = once(home)
        times.append(dt)
        mems.append(mem)
        print(f"  page answered after {dt:.2f} s, peak RSS {mem:.0f} MiB")
    print(f"studio start-up: median {statistics.median(times):.2f} s until the page answers (goal <= 3 s; LlamaBoard 5.6 s)")
    print(f"studio peak memory: median {statistics.median(mems):.0f} MiB (goal <= 300 MiB; LlamaBoard 579 MiB)")


if __name__ == "__main__":
    main()
