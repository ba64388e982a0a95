"""Every quantization preset on one model: weight bytes, perplexity and exact match on dev before/after,
and time, each preset in its own process through `python -m core.quant.pipeline --json` (as the studio runs it).

Usage: python bench/quant_presets.py --model MODEL_DIR --out SCRATCH_DIR [--data DATASET] [--eval-limit 64]
       [--presets wint8,wint4,...]   Prints a table and writes SCRATCH_DIR/quant_presets.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from core.quant import pipeline as quantize, presets

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True, help="scratch folder; one quantized model per preset is written here")
    ap.add_argument("--data", default=None)
    ap.add_argument("--eval-limit", type=int, default=64)
    ap.add_argument("--presets", default=",".join(presets.list_presets()))
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in a.presets.split(","):
        dest = out / f"{Path(a.model).name}-{name}"
        cmd = [sys.executable, "-m", "core.quant.pipeline", "--model", a.model, "--preset", name, "--out", str(dest),
               "--eval-limit", str(a.eval_limit), "--json"] + (["--data", a.data] if a.data else [])
        t = time.perf_counter()
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if r.returncode:
            print(f"{name}: FAILED\n{r.stderr[-2000:]}")
            continue
        rep = json.loads(r.stdout)
        b, f = rep["eval"]["before"], rep["eval"]["after"]
        rows.append({"preset": name, "bytes_before": rep["size"]["before_bytes"], "bytes_after": rep["size"]["after_bytes"],
                     "linear_bytes_before": rep["size"]["linear_before_bytes"],
                     "linear_bytes_after": rep["size"]["linear_after_bytes"],
                     "ppl_before": b["perplexity"], "ppl_after": f["perplexity"],
                     "em_before": b["exact_match"], "em_after": f["exact_match"],
                     "layer_error_mean": rep["layer_error"]["mean"], "seconds": rep["seconds"]["total"],
                     "wall_seconds": round(wall, 1)})
    (out / "quant_presets.json").write_text(json.dumps(rows, indent=2))
    print(f"{'preset':20} {'bytes':>21} {'linear bytes':>21} {'ppl':>17} {'EM':>11} {'layer err':>9} {'s':>6}")
    for r in rows:
        print(f"{r['preset']:20} {r['bytes_before']:>9} -> {r['bytes_after']:>8} {r['linear_bytes_before']:>9} -> "
              f"{r['linear_bytes_after']:>8} {r['ppl_before']:7.4f} -> {r['ppl_after']:7.4f} "
              f"{r['em_before']:.3f}->{r['em_after']:.3f} {r['layer_error_mean']:9.2e} {r['seconds']:6.1f}")


if __name__ == "__main__":
    main()
