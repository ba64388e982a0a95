"""Time to first token and tokens/s of streamed answers through `paddle-studio serve` (HTTP on
loopback, SSE) against the same answers generated in one process, on the demo model.

Direct: ``model.generate`` with a streamer that stamps each token (the floor), and
``ChatEngine.stream`` (the engine the server runs). Server: the ``stream_chat`` client helper
against a ``start_worker`` subprocess. Every answer is exactly ``--tokens`` tokens (ignore_eos,
greedy), for the same prompts, the three interleaved; each figure is the median over prompts x repeats.
Goal: server tokens/s >= 0.9 x direct, first-token overhead <= 50 ms.
Usage: python bench/serve_latency.py [--tokens 64] [--repeats 3] [--home WORKSPACE_WITH_DEMO] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROMPTS = ["翻译成英文：红色的苹果", "What is 3 plus 4?", "type#dress*color#red*style#casual",
           "Reverse the order of these words: apple moon river", "把这些词倒序排列：苹果 月亮 河流"]


def median_stats(runs: list[tuple[float, float, int, float]]) -> dict:
    """runs of (ttft_s, total_s, tokens, cpu_s) -> medians: ttft_ms, tokens/s (whole answer),
    decode tokens/s, and tokens per CPU second (all processes involved: load-independent)."""
    return {
        "ttft_ms": round(statistics.median(r[0] for r in runs) * 1000, 2),
        "tokens_per_s": round(statistics.median(r[2] / r[1] for r in runs), 1),
        "decode_tokens_per_s": round(statistics.median((r[2] - 1) / (r[1] - r[0]) for r in runs), 1),
        "tokens_per_cpu_s": round(statistics.median(r[2] / r[3] for r in runs), 1),
        "runs": len(runs),
    }


def cpu_s(*procs) -> float:
    total = 0.0
    for p in procs:
        c = p.cpu_times()
        total += c.user + c.system
    return total


ME = None


def run_generate(engine, prompt, n) -> tuple[float, float, int, float]:
    """(first token s, total s, tokens) of model.generate with a streamer that stamps each token."""
    import paddle

    from core.data import templates

    class Stamp:
        def __init__(self):
            self.times = []

        def put(self, value):
            self.times.append(time.perf_counter())

        def end(self):
            pass

    ids = templates.prompt_ids(engine.tokenizer, engine.template, [{"role": "user", "content": prompt}])
    s = Stamp()
    c = cpu_s(ME)
    t = time.perf_counter()
    with paddle.no_grad():
        engine.model.generate(input_ids=paddle.to_tensor([ids]), attention_mask=paddle.ones([1, len(ids)], dtype="int64"),
                              max_new_tokens=n, min_new_tokens=n, decode_strategy="greedy_search",
                              eos_token_id=engine.eos_id, pad_token_id=engine.pad_id, use_cache=True, streamer=s)
    end = time.perf_counter()
    assert len(s.times) == n, len(s.times)
    return s.times[0] - t, end - t, n, cpu_s(ME) - c


def run_engine(engine, prompt, n) -> tuple[float, float, int, float]:
    c = cpu_s(ME)
    t = time.perf_counter()
    g = engine.start([{"role": "user", "content": prompt}], temperature=0, max_new_tokens=n, ignore_eos=True)
    first = None
    for _d in g:
        if first is None:
            first = time.perf_counter()
    end = time.perf_counter()
    assert g.completion_tokens == n
    return first - t, end - t, n, cpu_s(ME) - c


def run_server(url, prompt, n, server=None) -> tuple[float, float, int, float]:
    """Server figures; CPU is the client's (this process) plus the server's."""
    from core.chat import server as serve

    procs = [ME] + ([server] if server else [])
    c = cpu_s(*procs)
    t = time.perf_counter()
    st = serve.stream_chat(url, [{"role": "user", "content": prompt}], temperature=0, max_tokens=n, ignore_eos=True)
    first = None
    for _d in st:
        if first is None:
            first = time.perf_counter()
    end = time.perf_counter()
    assert st.usage["completion_tokens"] == n, st.usage
    return first - t, end - t, n, cpu_s(*procs) - c


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--home", default=str(ROOT / ".cache" / "demo-ws"))
    ap.add_argument("--model", help="model folder (default: the demo model in --home)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    home = Path(a.home)
    model = a.model or str(home / "models" / "demo-base")
    if not a.model and not Path(model).is_dir():
        subprocess.run([sys.executable, "-m", "core.cli", "demo", "init"], cwd=ROOT, check=True,
                       env={**os.environ, "PADDLE_STUDIO_HOME": str(home)})

    from core.chat import server as serve
    from core.chat.engine import ChatEngine

    engine = ChatEngine(model)
    engine.chat([{"role": "user", "content": "hi"}], temperature=0, max_new_tokens=4)  # warm up
    import psutil

    global ME
    ME = psutil.Process()
    import tempfile

    w = serve.start_worker(model, log_path=str(Path(tempfile.mkdtemp(prefix="serve-bench-")) / "serve.log"))
    sp = psutil.Process(w.pid)
    runs = {"direct": [], "engine": [], "server": []}
    try:
        run_server(w.url, PROMPTS[0], 8)  # warm up the connection path
        # interleaved, so that load from other processes on the machine falls on all three alike
        for _ in range(a.repeats):
            for p in PROMPTS:
                runs["direct"].append(run_generate(engine, p, a.tokens))
                runs["engine"].append(run_engine(engine, p, a.tokens))
                runs["server"].append(run_server(w.url, p, a.tokens, sp))
    finally:
        serve.stop_worker(w)
    direct, eng, srv = (median_stats(runs[k]) for k in ("direct", "engine", "server"))
    out = {
        "model": model, "tokens": a.tokens, "prompts": len(PROMPTS), "repeats": a.repeats,
        "direct_generate": direct, "direct_engine": eng, "server_stream": srv,
        "tokens_per_s_ratio": round(srv["tokens_per_s"] / direct["tokens_per_s"], 3),
        "decode_tokens_per_s_ratio": round(srv["decode_tokens_per_s"] / direct["decode_tokens_per_s"], 3),
        "ttft_overhead_ms": round(srv["ttft_ms"] - direct["ttft_ms"], 2),
        "engine_tokens_per_s_ratio": round(eng["tokens_per_s"] / direct["tokens_per_s"], 3),
        "tokens_per_cpu_s_ratio": round(srv["tokens_per_cpu_s"] / direct["tokens_per_cpu_s"], 3),
        "load_average": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
    }
    out["goal_met"] = out["tokens_per_s_ratio"] >= 0.9 and out["ttft_overhead_ms"] <= 50
    if a.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{a.tokens} greedy tokens per answer, {len(PROMPTS)} prompts x {a.repeats}, medians")
    print(f"{'':24}{'first token ms':>16}{'tokens/s':>12}{'decode tok/s':>14}{'tok/CPU-s':>12}")
    for label, r in (("model.generate direct", direct), ("ChatEngine direct", eng), ("server (HTTP, SSE)", srv)):
        print(f"{label:24}{r['ttft_ms']:>16.2f}{r['tokens_per_s']:>12.1f}{r['decode_tokens_per_s']:>14.1f}"
              f"{r['tokens_per_cpu_s']:>12.1f}")
    print(f"server / direct tokens/s: {out['tokens_per_s_ratio']:.3f} (decode only {out['decode_tokens_per_s_ratio']:.3f}); "
          f"first-token overhead {out['ttft_overhead_ms']:+.1f} ms; engine / direct {out['engine_tokens_per_s_ratio']:.3f}"
          f"  -> goal (>= 0.9, <= 50 ms) {'met' if out['goal_met'] else 'NOT met'}")
    print(f"tokens per CPU second (server + client vs one process): {out['tokens_per_cpu_s_ratio']:.3f}; "
          f"load average {out['load_average']} on {out['cpus']} CPUs")


if __name__ == "__main__":
    main()
