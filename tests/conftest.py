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


def link_demo(home: Path, demo: Path) -> Path:
    """A workspace at ``home`` whose demo model and dataset are links to the shared demo build."""
    (home / "models").mkdir(parents=True)
    (home / "datasets").mkdir()
    (home / "models" / "demo-base").symlink_to(demo / "models" / "demo-base")
    (home / "datasets" / "demo").symlink_to(demo / "datasets" / "demo")
    return home
