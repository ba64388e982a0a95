"""A warm spare for single-process runs: the first loss point in ~1.5 s instead of ~5 s.

Importing paddle and the parts of paddlenlp that training needs takes ~3.4 s of the ~5 s between
Start and the first loss point of a single-process CPU run (bench/first_point.py). While the
studio runs it keeps one *spare*: a supervisor process (``python -m core.train.runs spare DIR OWNER``)
whose child, the training entry in ``--warm`` mode, has already imported all of that and waits.
Starting a single-process run claims the spare instead of spawning a cold supervisor: the spare's
supervisor becomes the run's supervisor (``runs.supervise`` with the child it already has) and
the child goes on as the run's rank 0, its output moved to the run's ``log/workerlog.0``; both
take the command line a cold start would have (setproctitle), so ``ps`` and every lookup of a
run's processes by its folder find them. The rank is still the supervisor's child, in a process group of its own, dying with its parent:
Stop, kill -9 and the stall watchdog reach it exactly as in a cold start.

A spare lives in ``<workspace>/.spare/<id>/``:
  spare.json   pids and start times of the spare supervisor (and its child, once started)
  ready        made by the child once its imports are done; renamed to ``taken`` by a claimant
  claim.json   {"run_dir", "resume"} written by the claimant after the rename won
  warm.log     the child's output until it is claimed
A spare whose owner (the studio) is gone, or whose child died, ends itself and removes its folder.
PADDLE_STUDIO_WARM=0 turns spares off.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from core import jobs, workspace

POLL_S = 0.02  # how often a spare looks for its claim (a stat; costs nothing measurable)
ENTRY = Path(__file__).resolve().parent / "entry.py"


def spare_env() -> dict:
    """The environment of a spare and its warm child: a run's (jobs.child_env: no studio secret)."""
    return jobs.child_env()


def enabled() -> bool:
    return os.environ.get("PADDLE_STUDIO_WARM", "1") != "0"


def spares_dir() -> Path:
    return workspace.home() / ".spare"


def _live(s: Path) -> bool:
    info = jobs.read_json(s / "spare.json", {}) or {}
    return jobs.alive(info.get("pid"), info.get("start"))


def keep_spare(owner: int | None = None) -> Path | None:
    """Make sure one unclaimed spare is alive or on its way (the studio calls this at start and on
    every reconcile); removes the folders of dead spares. Returns the new spare's folder, if any."""
    if not enabled():
        return None
    root = spares_dir()
    have = False
    if root.is_dir():
        for s in root.iterdir():
            if not s.is_dir():
                continue
            if _live(s):
                have = have or not (s / "taken").exists()
            elif time.time() - s.stat().st_mtime > 30:  # a dead spare (a new one gets 30 s to write spare.json)
                shutil.rmtree(s, ignore_errors=True)
            else:
                have = have or not (s / "spare.json").exists()
    if have:
        return None
    root.mkdir(parents=True, exist_ok=True)
    s = workspace.new_dir(root, f"{os.getpid()}")
    argv = [sys.executable, "-m", "core.train.runs", "spare", str(s), str(owner or os.getpid())]
    proc = jobs.spawn_detached(argv, s / "supervisor.log", s, env=spare_env())
    workspace.write_json_atomic(s / "spare.json", {"pid": proc.pid, "start": jobs.proc_start(proc.pid)})
    return s


def claim(d: Path, resume: bool) -> dict | None:
    """Hand run ``d`` to a ready spare; returns the spare supervisor's {"pid", "start"}, or None
    when there is none (the caller then starts a cold supervisor)."""
    root = spares_dir()
    if not enabled() or not root.is_dir():
        return None
    for s in sorted(root.iterdir()):
        if not (s / "ready").exists() or not _live(s):
            continue
        try:
            os.rename(s / "ready", s / "taken")  # only one claimant wins the rename
        except OSError:
            continue
        workspace.write_json_atomic(s / "claim.json", {"run_dir": str(d), "resume": resume})
        info = jobs.read_json(s / "spare.json", {}) or {}
        return {"pid": info.get("pid"), "start": info.get("start")}
    return None


def retitle(argv: list[str]) -> None:
    """Show the command line a cold start would have (``ps``, and every lookup of a run's processes
    by the run folder in their command line, find a claimed spare like any run process)."""
    try:
        import setproctitle
    except ImportError:
        return
    setproctitle.setproctitle(shlex.join(argv))


def serve_spare(s: Path, owner: int, supervise) -> int:
    """The spare supervisor: start the warm child, wait for a claim (or for the owner to go), then
    supervise the claimed run with that child (``supervise`` is core.train.runs.supervise)."""
    owner_start = jobs.proc_start(owner)
    with open(s / "warm.log", "ab") as log:
        child = subprocess.Popen([sys.executable, str(ENTRY), "--warm", str(s)], stdout=log,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                 cwd=str(s), env=spare_env())
    info = jobs.read_json(s / "spare.json", {}) or {}
    workspace.write_json_atomic(s / "spare.json", {**info, "pid": os.getpid(), "start": jobs.proc_start(os.getpid()),
                                                   "child": child.pid, "owner": owner})
    taken_at = None
    while True:
        if (s / "claim.json").exists():
            break
        if (s / "taken").exists():
            taken_at = taken_at or time.monotonic()
        gone = (not jobs.alive(owner, owner_start) and taken_at is None
                or taken_at is not None and time.monotonic() - taken_at > 10)  # a claimant that died mid-claim
        if gone or child.poll() is not None:
            if child.poll() is None:
                child.kill()
                child.wait()
            shutil.rmtree(s, ignore_errors=True)
            return 0
        time.sleep(POLL_S)
    c = jobs.read_json(s / "claim.json")
    d = Path(c["run_dir"])
    retitle([sys.executable, "-m", "core.train.runs", "supervise", str(d)] + (["--resume"] if c.get("resume") else []))
    try:
        return supervise(d, bool(c.get("resume")), proc=child)
    finally:
        shutil.rmtree(s, ignore_errors=True)


def wait_for_claim(s: Path) -> tuple[Path, bool]:
    """The warm child's side: say it is ready, then wait for the run it is given. Its stdout and
    stderr then go to the run's log/workerlog.0, as a launched rank 0's would."""
    workspace.write_text_atomic(s / "ready", f"{os.getpid()}\n")
    parent = os.getppid()
    while not (s / "claim.json").exists():
        if os.getppid() != parent:
            os._exit(0)
        time.sleep(POLL_S)
    c = jobs.read_json(s / "claim.json")
    d = Path(c["run_dir"])
    retitle([sys.executable, str(ENTRY), str(d / "config.json")] + (["--resume"] if c.get("resume") else []))
    (d / "log").mkdir(exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(d / "log" / "workerlog.0", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.chdir(d)
    return d / "config.json", bool(c.get("resume"))

