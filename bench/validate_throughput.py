"""`paddle-studio data validate` on a big generated JSON-lines file: throughput, peak memory, ratio.

Prints the validator's MB/s, its peak RSS and the ratio of its throughput to a plain
`for line in f: json.loads(line)` loop over the same file (both run as fresh processes, same
page cache). Usage: python bench/validate_throughput.py [--size-mb 1024] [--keep PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BASELINE = """
import json, sys
n = 0
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        json.loads(line)
        n += 1
print(n)
"""


def make_file(path: Path, size_mb: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    words = "the a model data train paddle studio 数据 训练 模型 问题 回答 large language quick brown fox".split()
    target = size_mb * 1024 * 1024
    written = n = 0
    with open(path, "w", encoding="utf-8") as f:
        while written < target:
            chunk = []
            for _ in range(1000):
                if rng.random() < 0.15:
                    k = rng.randint(2, 3)
                    rec = {"src": [" ".join(rng.choices(words, k=rng.randint(5, 40))) for _ in range(k)],
                           "tgt": [" ".join(rng.choices(words, k=rng.randint(5, 60))) for _ in range(k)]}
                else:
                    rec = {"src": " ".join(rng.choices(words, k=rng.randint(5, 60))),
                           "tgt": " ".join(rng.choices(words, k=rng.randint(5, 80)))}
                chunk.append(json.dumps(rec, ensure_ascii=False))
            s = "\n".join(chunk) + "\n"
            f.write(s)
            written += len(s.encode("utf-8"))
            n += len(chunk)
    return n


def timed(argv: list[str]) -> tuple[float, float, str]:
    """Run argv; return (seconds, peak RSS MiB of that child, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if r.returncode not in (0, 1):
        raise SystemExit(f"{argv} failed: {r.stderr[-2000:]}")
    # ru_maxrss of children is the max over all waited children; run the big one first
    return dt, max(peak, before) / 1024, r.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--keep", help="reuse/keep the generated file at this path")
    a = ap.parse_args()
    path = Path(a.keep) if a.keep else Path(tempfile.mkdtemp()) / "big.jsonl"
    if not path.exists():
        t0 = time.perf_counter()
        n = make_file(path, a.size_mb)
        print(f"generated {path} ({path.stat().st_size / 1e6:.0f} MB, {n} records) in {time.perf_counter() - t0:.0f} s")
    size_mb = path.stat().st_size / 1e6
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL)  # warm the page cache for both
    cli = [sys.executable, "-m", "core.cli", "data", "validate", str(path), "--json"]
    v_dt, v_peak, out = timed(cli)
    rep = json.loads(out)
    b_dt, _, _ = timed([sys.executable, "-c", BASELINE, str(path)])
    print(f"validate: {rep['records']} records ({rep['good']} good, {rep['duplicates']} duplicates) in {v_dt:.1f} s "
          f"= {size_mb / v_dt:.1f} MB/s, peak RSS {v_peak:.0f} MiB (goal < 300 MB)")
    print(f"json.loads loop: {b_dt:.1f} s = {size_mb / b_dt:.1f} MB/s")
    print(f"ratio validate/json.loads throughput: {b_dt / v_dt:.2f} (goal >= 0.7)")
    if not a.keep:
        path.unlink()
        path.parent.rmdir()


if __name__ == "__main__":
    main()
