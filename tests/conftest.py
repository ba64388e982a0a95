import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# `make` points the demo cache at .cache/demo-ws for `make run`; tests say themselves where theirs is
os.environ.pop("PADDLE_STUDIO_DEMO_CACHE", None)
# the round-trip check after every run (a fresh process importing paddle, ~6 s of a core) is on for
# users; tests that are not about it turn it off, those that are turn it on (PADDLE_STUDIO_VERIFY=1)
os.environ["PADDLE_STUDIO_VERIFY"] = "0"


@pytest.fixture(autouse=True)
def no_process_outlives_its_test(request):
    """After each test, end every process still naming one of its temp folders (a run, a job or a
    chat worker a failed test left behind would otherwise load the machine for every later test)."""
    yield
    import psutil

    roots = [str(p) for p in (request.node.funcargs.get("tmp_path"),) if p is not None]
    if not roots:
        return
    left = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if p.pid != os.getpid() and any(r in a for a in (p.info["cmdline"] or []) for r in roots):
                left.append(p)
        except psutil.Error:
            continue
    for p in left:
        try:
            p.kill()
        except psutil.Error:
            pass


@pytest.fixture
def workspace_home(tmp_path, monkeypatch):
    """A fresh, empty PADDLE_STUDIO_HOME for one test."""
    home = tmp_path / "ws"
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def demo_home():
    """A workspace holding the demo dataset and model, built once by the real CLI.

    Cached under .cache/demo-ws (git-ignored) so repeated local runs skip the ~100 s build;
    treat it as read-only in tests.
    """
    import subprocess

    home = ROOT / ".cache" / "demo-ws"
    env = {**os.environ, "PADDLE_STUDIO_HOME": str(home)}
    r = subprocess.run(
        [sys.executable, "-m", "core.cli", "demo", "init", "--json"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return home


@pytest.fixture(scope="session")
def merged_demo(demo_home, tmp_path_factory):
    """A LoRA trained 6 steps on the demo data and merged into the demo base, by the real CLI, once
    per session (in a workspace of its own): (merged model dir, adapter dir)."""
    import json
    import subprocess

    from core.train import config

    ws = link_demo(tmp_path_factory.mktemp("merged-demo") / "ws", demo_home)
    env = {**os.environ, "PADDLE_STUDIO_HOME": str(ws)}
    flat = config.load_preset("demo-lora", ws).to_paddlenlp()
    flat.update({"max_steps": 6, "save_steps": 1000, "eval_steps": 1000, "evaluation_strategy": "no",
                 "learning_rate": 0.003})
    cfg = ws / "small.json"
    cfg.write_text(json.dumps(flat))
    r = subprocess.run([sys.executable, "-m", "core.cli", "train", str(cfg), "--json"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    adapter = Path(json.loads(r.stdout)["dir"]) / "output"
    out = ws / "models" / "demo-merged"
    r = subprocess.run([sys.executable, "-m", "core.cli", "merge", "--adapter", str(adapter), "--out", str(out)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return out, adapter


def link_demo(home: Path, demo: Path) -> Path:
    """A workspace at ``home`` whose demo model and dataset are links to the shared demo build."""
    (home / "models").mkdir(parents=True)
    (home / "datasets").mkdir()
    (home / "models" / "demo-base").symlink_to(demo / "models" / "demo-base")
    (home / "datasets" / "demo").symlink_to(demo / "datasets" / "demo")
    return home
