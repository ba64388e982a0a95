"""Zero padding on the demo data: the share of real (non-pad) tokens in a batch, padded vs packed
vs greedily packed, and the real tokens/s of the same LoRA training with each, as ratios against
the padded run in this invocation.

Each run trains the demo LoRA preset for --steps steps through the studio's training entry (one
process, the same code a rank runs); tokens/s is real tokens per step x steps/s after --skip steps.
Usage: python bench/packing.py [--home WORKSPACE_WITH_DEMO] [--steps 40] [--skip 10]
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

from tests.conftest import link_demo  # noqa: E402


def pad_shares(home: Path, batch: int, max_length: int) -> dict:
    """Real-token share of the batches each mode builds from the first 1024 training records."""
    from paddlenlp.transformers import AutoTokenizer

    from core.data import templates
    from core.train import entry

    d = home / "models" / "demo-base"
    tok = AutoTokenizer.from_pretrained(str(d))
    template = templates.load_template(tok, d)
    lines = (home / "datasets" / "demo" / "train.json").read_text().splitlines()[:1024]
    ex = [e for e in (templates.build_example(tok, template, json.loads(l), 64, max_length) for l in lines) if e]
    out = {}
    for mode, seqs in (("padded", ex), ("packed", entry.pack_examples(ex, max_length)),
                       ("greedy", entry.pack_examples(ex, max_length, greedy=True))):
        real = padded = 0
        for i in range(0, len(seqs), batch):
            lens = [len(s["input_ids"]) for s in seqs[i:i + batch]]
            real += sum(lens)
            padded += max(lens) * len(lens)
        out[mode] = {"sequences": len(seqs), "real_share": real / padded}
    return out


def tokens_per_sec(metrics: Path, skip: int) -> float:
    recs = [json.loads(x) for x in metrics.read_text().splitlines() if '"loss"' in x]
    recs = [r for r in recs if r["step"] > skip and "tokens_per_sec" in r]
    return sum(r["tokens_per_sec"] for r in recs) / len(recs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", default=str(ROOT / ".cache" / "demo-ws"))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--skip", type=int, default=10)
    a = ap.parse_args()
    home = Path(a.home).resolve()
    from core.train import config, runs

    work = link_demo(Path(tempfile.mkdtemp(prefix="bench-packing-")), home)
    os.environ["PADDLE_STUDIO_HOME"] = str(work)
    base = config.load_preset("demo-lora", work)
    shares = pad_shares(home, base.training.per_device_train_batch_size, base.data.max_length)
    dirs = {}
    for mode in ("padded", "packed", "greedy"):
        cfg = config.load_preset("demo-lora", work)
        cfg.name = f"bench-{mode}"
        cfg.training.max_steps = a.steps
        cfg.training.evaluation_strategy = cfg.training.save_strategy = "no"
        cfg.data.zero_padding = mode != "padded"
        cfg.data.greedy_zero_padding = mode == "greedy"
        dirs[mode] = runs.run_dir(runs.create(cfg))
    subprocess.run([sys.executable, str(ROOT / "tests" / "matrix_runner.py"), *map(str, dirs.values())],
                   check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    tps = {m: tokens_per_sec(d / "metrics.jsonl", a.skip) for m, d in dirs.items()}
    print(f"demo data, batch {base.training.per_device_train_batch_size}, max_length {base.data.max_length}:")
    for m in ("padded", "packed", "greedy"):
        s = shares[m]
        print(f"  {m:7s} {s['sequences']:5d} sequences, real tokens {100 * s['real_share']:.1f} % of the batch, "
              f"{tps[m]:,.0f} real tokens/s = {tps[m] / tps['padded']:.2f}x padded")


if __name__ == "__main__":
    main()
