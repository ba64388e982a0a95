"""Static inference (an exported folder run by Paddle Inference, core.models.static) against dygraph
``model.generate`` (what chat and evaluate run) for the same prompts, in one process with the same
CPU math threads, the two interleaved prompt by prompt.

Greedy, every answer exactly ``--tokens`` tokens (min_new_tokens, so both do the same work):
tokens/s for one prompt at a time and for all prompts in one left-padded batch, and the first-token
latency (a 1-token generation: prompt in, first token out). Each figure is the median over prompts
x repeats. The static folder is exported first in its own process (``paddle-studio export``:
tracing in a process slows dygraph there 20-30x) unless ``--static`` names one.
Goal: static >= 1.5x dygraph tokens/s.
Usage: python bench/static_vs_dygraph.py [--tokens 64] [--prompts 8] [--repeats 3] [--threads 1,2]
       [--model DIR] [--static DIR] [--home WORKSPACE_WITH_DEMO] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def export(model: Path, out: Path) -> float:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "core.cli", "export", "--model", str(model), "--out", str(out), "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if r.returncode:
        sys.exit(f"export failed:\n{r.stderr[-2000:]}")
    return time.perf_counter() - t


def run_dygraph(model, tok, own_positions, prompts: list[list[int]], n: int) -> tuple[float, int]:
    import numpy as np
    import paddle

    from core.models import layouts

    w = max(len(p) for p in prompts)
    ids = np.full((len(prompts), w), tok.pad_token_id, dtype="int64")
    att = np.zeros((len(prompts), w), dtype="int64")
    for k, p in enumerate(prompts):
        ids[k, w - len(p):], att[k, w - len(p):] = p, 1
    t = time.perf_counter()
    with paddle.no_grad():
        res = model.generate(**layouts.generation_inputs(model, ids, att, own_positions, n), max_new_tokens=n,
                             min_new_tokens=n, decode_strategy="greedy_search", eos_token_id=tok.eos_token_id,
                             pad_token_id=tok.pad_token_id, use_cache=True)
    dt = time.perf_counter() - t
    gen = res[0] if isinstance(res, (tuple, list)) else res
    return dt, int(gen.shape[0] * gen.shape[1])


def run_static(engine, prompts: list[list[int]], n: int) -> tuple[float, int]:
    t = time.perf_counter()
    rows = engine.generate(prompts, n, min_new_tokens=n, batch_size=len(prompts))
    dt = time.perf_counter() - t
    return dt, sum(len(r) for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=8, help="dev prompts of the demo dataset")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", default="1,2", help="CPU math threads for both, one figure set per count")
    ap.add_argument("--home", default=str(ROOT / ".cache" / "demo-ws"))
    ap.add_argument("--model", help="model folder (default: the demo model in --home)")
    ap.add_argument("--static", help="an exported static folder of --model (default: export one now)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    home = Path(a.home)
    model_dir = Path(a.model or home / "models" / "demo-base")

    tmp = None
    export_s = None
    if a.static:
        folder = Path(a.static)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="static-bench-")
        folder = Path(tmp.name) / "static"
        export_s = export(model_dir, folder)

    import paddle

    from core.data import datasets, templates
    from core.models import evaluate, loading, static

    model, tok, tpl = loading.load(model_dir)
    own = evaluate.padded_positions_matter(model)
    recs = list(datasets.iter_records(home / "datasets" / "demo" / "dev.json", "paddlenlp"))[: a.prompts]
    prompts = [templates.prompt_ids(tok, tpl, templates.messages_of(r)[:-1]) for r in recs]
    out = {"model": str(model_dir), "static": str(folder), "tokens": a.tokens, "prompts": len(prompts),
           "batch": len(prompts), "repeats": a.repeats, "export_s": round(export_s, 1) if export_s else None,
           "goal": "static tokens/s >= 1.5x dygraph", "by_threads": {}}
    for threads in [int(x) for x in str(a.threads).split(",")]:
        t = time.perf_counter()
        engine = static.StaticEngine(folder, threads=threads)
        load_s = time.perf_counter() - t

        def dy(ps, n, threads=threads):
            paddle.base.core.set_num_threads(threads)  # dygraph's CPU math threads (a predictor run sets its own)
            return run_dygraph(model, tok, own, ps, n)

        def st(ps, n, engine=engine):
            return run_static(engine, ps, n)

        for f in (dy, st):  # warm up both (first runs allocate)
            f(prompts[:1], 4)
            f(prompts, 2)
        res = {k: {"single": [], "batch": [], "first": []} for k in ("dygraph", "static")}
        for _ in range(a.repeats):
            for p in prompts:
                for name, f in (("dygraph", dy), ("static", st)):
                    dt, n = f([p], a.tokens)
                    assert n == a.tokens, (name, n)
                    res[name]["single"].append(n / dt)
                    res[name]["first"].append(f([p], 1)[0])
            for name, f in (("dygraph", dy), ("static", st)):
                dt, n = f(prompts, a.tokens)
                assert n == a.tokens * len(prompts), (name, n)
                res[name]["batch"].append(n / dt)
        med = {k: {"tokens_per_s": round(statistics.median(v["single"]), 1),
                   "batch_tokens_per_s": round(statistics.median(v["batch"]), 1),
                   "first_token_ms": round(statistics.median(v["first"]) * 1000, 2)} for k, v in res.items()}
        med["ratio"] = {
            "tokens_per_s": round(med["static"]["tokens_per_s"] / med["dygraph"]["tokens_per_s"], 2),
            "batch_tokens_per_s": round(med["static"]["batch_tokens_per_s"] / med["dygraph"]["batch_tokens_per_s"], 2),
            "first_token_speedup": round(med["dygraph"]["first_token_ms"] / med["static"]["first_token_ms"], 2)}
        med["static_load_s"] = round(load_s, 2)
        out["by_threads"][threads] = med
        del engine
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{len(prompts)} prompts x {a.repeats}, {a.tokens} tokens each (greedy, no early stop)"
              + (f"; export {out['export_s']} s" if export_s else ""))
        for threads, med in out["by_threads"].items():
            print(f"\n{threads} thread(s); static load {med['static_load_s']} s")
            print(f"{'':10}{'tokens/s (1 prompt)':>22}{f'tokens/s (batch {len(prompts)})':>22}{'first token ms':>18}")
            for k in ("dygraph", "static"):
                m = med[k]
                print(f"{k:10}{m['tokens_per_s']:>22}{m['batch_tokens_per_s']:>22}{m['first_token_ms']:>18}")
            r = med["ratio"]
            print(f"{'static/dy':10}{r['tokens_per_s']:>21}x{r['batch_tokens_per_s']:>21}x"
                  f"{r['first_token_speedup']:>17}x (dygraph ms / static ms)")
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    os.environ.setdefault("GLOG_minloglevel", "2")
    main()
