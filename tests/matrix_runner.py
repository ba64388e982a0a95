"""Train several prepared run folders one after another in this one process (the option-matrix test:
one interpreter start and one `import paddlenlp` for all of them). For each ``RUN_DIR/config.json``
it calls the studio's training entry exactly as a rank would, and prints one JSON line:
``{"run": ..., "ok": bool, "error": ...}``. The metrics are in each run's metrics.jsonl."""

import json
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.train import entry  # noqa: E402

for run in sys.argv[1:]:
    try:
        code = entry.main([str(Path(run) / "config.json")])
        print(json.dumps({"run": run, "ok": code == 0, "error": None}), flush=True)
    except BaseException as e:  # noqa: BLE001 - reported per run, the next one still trains
        traceback.print_exc()
        print(json.dumps({"run": run, "ok": False, "error": f"{type(e).__name__}: {e}"}), flush=True)
