"""The round-trip proof of several finished run folders, in one process that did not train them
(the option-matrix test: one `import paddlenlp` for all). For each RUN_DIR it prints one JSON line:
the run's verification (core.train.verify: the saved output and its last checkpoint reloaded as
chat/eval/merge load them, dev loss against the one training computed), and for an adapter the
greedy answers to the dev prompts generated in one left-padded batch and one at a time.
With --without-pissa-fix it also verifies the PiSSA runs with the old load (the trained A and B
overwritten by PaddleNLP's lazy re-initialisation): the check must call that load a failure."""

import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.data import datasets, templates  # noqa: E402
from core.models import evaluate, loading  # noqa: E402
from core.train import verify  # noqa: E402

args = [a for a in sys.argv[1:] if not a.startswith("--")]
for run in args:
    d = Path(run)
    out = {"run": run}
    try:
        res = verify.verify_run(d)
        out["verify"] = res
        flat = json.loads((d / "config.json").read_text())
        if loading.adapter_kind(d / "output"):
            model, tok, tpl = loading.load(None, d / "output")
            recs = list(datasets.iter_records(Path(flat["dataset_name_or_path"]) / "dev.json", "paddlenlp"))
            convs = [templates.messages_of(r)[:-1] for r in recs]
            batched = evaluate.generate(model, tok, tpl, convs, 16, src_length=flat["src_length"])
            single = evaluate.generate(model, tok, tpl, convs, 16, batch_size=1, src_length=flat["src_length"])
            out["answers"] = {"batched": batched, "single": single}
        if "--without-pissa-fix" in sys.argv and flat.get("pissa"):
            keep = loading.restore_pissa
            loading.restore_pissa = lambda m: m
            try:
                out["old_pissa_load"] = verify.verify_folder(d / "output", flat["model_name_or_path"])
            finally:
                loading.restore_pissa = keep
    except BaseException as e:  # noqa: BLE001 - reported per run
        traceback.print_exc()
        out["error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(out), flush=True)
