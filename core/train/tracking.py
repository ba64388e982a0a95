"""Experiment trackers: what a run's ``report_to`` may name, and the VisualDL board that shows one.

PaddleNLP's trainer sends every logged step to the trackers its ``report_to`` names (VisualDL,
TensorBoard through tensorboardX, Weights & Biases), writing into ``logging_dir``; the studio's own
``metrics.jsonl`` is written by its own callback either way, so a tracker only adds a view. The
studio sets ``logging_dir`` to ``<run>/output/vdl`` (core.train.config), so the logs stay in the run
folder.

:func:`problems` is what the config check refuses (an unknown tracker, a package that is not
installed, wandb that would go online). :func:`start_board` starts ``visualdl --logdir DIR --host
127.0.0.1 --port P`` for a run in a session of its own, leashed to the process that started it (the
studio): it ends within ``LEASH_S`` seconds of that process ending, even by kill -9, so no board is
left behind. :func:`tracking_link` says what the Runs tab can show for a run: the board's address
when it runs, else how to start it.

This module imports no other core.train module (core.train.config imports it for the check).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
import time
import urllib.request
from pathlib import Path

from core import jobs, workspace

TRACKERS = ("none", "visualdl", "tensorboard", "wandb")
# tracker -> the package PaddleNLP's callback for it imports (paddlenlp.trainer.integrations)
PACKAGES = {"visualdl": "visualdl", "tensorboard": "tensorboardX", "wandb": "wandb"}
WANDB_OFFLINE = ("offline", "dryrun")  # WANDB_MODE values that keep wandb off the network
BOARD_FILE = "tracking_board.json"  # in the run folder: the VisualDL board started for it (pid, port, url)
HOST = "127.0.0.1"
LEASH_S = 1.0  # how often a board looks for the process that started it
START_WAIT_S = 30.0  # how long start_board waits for the board to answer HTTP


def trackers(report_to) -> list[str]:
    """``report_to`` as a list of trackers, as PaddleNLP reads it: a name or a list of names; "none"
    (or nothing) is no tracker; "all" is every tracker installed here."""
    if report_to is None:
        return []
    items = list(report_to) if isinstance(report_to, (list, tuple)) else [report_to]
    out = []
    for x in items:
        if x == "all":  # upstream: every tracker whose package is installed
            out += [t for t in PACKAGES if installed(t)]
        elif x != "none":
            out.append(x)
    return list(dict.fromkeys(out))


def installed(tracker: str) -> bool:
    """True when the package PaddleNLP's callback for ``tracker`` needs can be imported here (found,
    not imported: importing wandb or tensorboardX is slow)."""
    package = PACKAGES.get(tracker)
    if package is None:
        return False
    if tracker == "wandb" and os.environ.get("WANDB_DISABLED", "").upper() in {"1", "ON", "YES", "TRUE"}:
        return False  # PaddleNLP then counts wandb as absent and its callback stops the run
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def problems(report_to) -> list[tuple[str, dict]]:
    """Why ``report_to`` cannot run here, as (code, params) for core.train.config's check: a name
    PaddleNLP does not know, a tracker whose package is not installed (PaddleNLP would stop at the
    run's start), and wandb without WANDB_MODE=offline (the studio refuses online wandb: a run would
    need network and a login, and a rank cannot answer wandb's login prompt)."""
    out = []
    if report_to is not None and not isinstance(report_to, (str, list, tuple)):
        return [("tracker_unknown", {"value": report_to, "expected": ", ".join(TRACKERS)})]
    for name in trackers(report_to):
        if name not in PACKAGES:
            out.append(("tracker_unknown", {"value": name, "expected": ", ".join(TRACKERS)}))
        elif not installed(name):
            out.append(("tracker_missing", {"tracker": name, "package": PACKAGES[name]}))
        elif name == "wandb" and os.environ.get("WANDB_MODE", "").lower() not in WANDB_OFFLINE:
            out.append(("wandb_online", {"mode": os.environ.get("WANDB_MODE", "")}))
    return out


# -------------------------------------------------------------- a run's logs

def _run_dir(run_id_or_dir) -> Path:
    d = Path(run_id_or_dir)
    if d.is_dir() and (d / "config.json").is_file():
        return d
    code = workspace.check_name(str(run_id_or_dir))
    if code:
        raise ValueError(f"bad run id {run_id_or_dir!r}")
    return workspace.runs_dir() / str(run_id_or_dir)


def _flat(d: Path) -> dict:
    got = jobs.read_json(d / "config.json", {})
    return got if isinstance(got, dict) else {}


def run_trackers(run_id_or_dir) -> list[str]:
    """The trackers the run's config.json names ([] for none, or no such run)."""
    try:
        return trackers(_flat(_run_dir(run_id_or_dir)).get("report_to"))
    except ValueError:
        return []


def log_dir(run_id_or_dir) -> Path:
    """The run's tracking log folder: its config.json's ``logging_dir`` (the studio writes
    ``<run>/output/vdl``), else PaddleNLP's default under ``output_dir`` (``runs/``)."""
    d = _run_dir(run_id_or_dir)
    flat = _flat(d)
    if flat.get("logging_dir"):
        return Path(os.path.expanduser(str(flat["logging_dir"])))
    return Path(os.path.expanduser(str(flat.get("output_dir") or d / "output"))) / "runs"


def has_logs(folder: Path) -> bool:
    """True when VisualDL has written a log file under ``folder`` (vdlrecords.*.log)."""
    try:
        return any(folder.rglob("vdlrecords.*"))
    except OSError:
        return False


# -------------------------------------------------------------- the VisualDL board

def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _answers(url: str, timeout: float = 1.0) -> bool:
    """True when ``url`` answers HTTP (any status) on loopback, going round any proxy."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout) as r:
            return r.status < 500
    except urllib.error.HTTPError as e:
        return e.code < 500
    except (OSError, ValueError):
        return False


def board(run_id_or_dir) -> dict | None:
    """The VisualDL board started for the run when it still runs ({pid, pid_start, port, url, logdir}),
    else None (a record of a board that ended is removed)."""
    d = _run_dir(run_id_or_dir)
    rec = jobs.read_json(d / BOARD_FILE)
    if not isinstance(rec, dict):
        return None
    if jobs.alive(rec.get("pid"), rec.get("pid_start")):
        return rec
    try:
        (d / BOARD_FILE).unlink()
    except OSError:
        pass
    return None


def board_argv(folder: Path, port: int, owner: int | None = None) -> list[str]:
    """The board's command: this module's ``board`` verb, which leashes itself to ``owner`` (a pid)
    and then runs VisualDL's own ``visualdl --logdir DIR --host 127.0.0.1 --port P`` in-process."""
    argv = [sys.executable, "-m", "core.train.tracking", "board", str(folder), "--port", str(port)]
    if owner:
        argv += ["--owner", str(owner), str(jobs.proc_start(owner))]
    return argv


_started: list[Path] = []  # run folders whose boards this process started (stopped at its exit)


def start_board(run_id_or_dir, port: int | None = None, owner: int | None = None,
                wait: float = START_WAIT_S) -> dict:
    """Start (or find) the run's VisualDL board on 127.0.0.1 and return {url, port, pid, logdir}
    once it answers HTTP. ``owner``: the process whose end ends the board (default: this one, the
    studio). Raises jobs.Refused with a code the UI translates (refused.<code>, studio.locales.refusal)
    when it cannot."""
    d = _run_dir(run_id_or_dir)
    if not (d / "config.json").is_file():
        raise jobs.Refused("board_no_run", f"no run {run_id_or_dir!r}", run=str(run_id_or_dir))
    running = board(d)
    if running:
        return running
    if "visualdl" not in run_trackers(d):
        said = _flat(d).get("report_to", "none")
        raise jobs.Refused("board_not_visualdl", f"this run does not report to VisualDL (report_to is {said!r})",
                           run=d.name, report_to=said)
    if not installed("visualdl"):
        raise jobs.Refused("board_tracker_missing", "visualdl is not installed here", package="visualdl")
    folder = log_dir(d)
    folder.mkdir(parents=True, exist_ok=True)
    port = port or _free_port()
    owner = owner or os.getpid()
    log = d / "tracking_board.log"
    proc = jobs.spawn_detached(board_argv(folder, port, owner), log, jobs.ROOT)
    url = f"http://{HOST}:{port}/app"
    rec = {"pid": proc.pid, "pid_start": jobs.proc_start(proc.pid), "pgid": proc.pid, "port": port, "url": url,
           "logdir": str(folder), "owner": owner, "started": jobs.now()}
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = jobs.strip_ansi(log.read_text(encoding="utf-8", errors="replace"))[-600:] if log.is_file() else ""
            raise jobs.Refused("board_failed", f"visualdl ended with code {proc.returncode}: {tail}",
                               exit_code=proc.returncode, log=tail)
        if _answers(f"http://{HOST}:{port}/alive"):
            workspace.write_json_atomic(d / BOARD_FILE, rec)
            if owner == os.getpid():
                _remember(d)
            return rec
        time.sleep(0.2)
    jobs.stop_processes(rec, grace=2.0)
    raise jobs.Refused("board_slow", f"visualdl did not answer on {url} within {wait:.0f} s", url=url,
                       seconds=int(wait))


def _remember(d: Path) -> None:
    if not _started:
        import atexit

        atexit.register(stop_boards)
    if d not in _started:
        _started.append(d)


def stop_board(run_id_or_dir) -> bool:
    """Stop the run's VisualDL board (its whole process group); True when one was running."""
    d = _run_dir(run_id_or_dir)
    rec = board(d)
    if rec:
        jobs.stop_processes(rec, grace=3.0)
    try:
        (d / BOARD_FILE).unlink()
    except OSError:
        pass
    return rec is not None


def stop_boards() -> None:
    """Stop every board this process started (the studio at its exit; the leash covers a kill -9)."""
    for d in list(_started):
        try:
            stop_board(d)
        except (OSError, ValueError):
            pass
        _started.remove(d)


def tracking_link(run_id: str) -> dict | None:
    """What the Runs tab can show for ``run_id``'s tracker; None when it reports to none.

    {"tracker": the first tracker named, "trackers": all of them, "logdir": the log folder,
     "has_logs": VisualDL logs written yet, "installed": its package is here,
     "url": the running board's address (VisualDL) or None, "can_start": start_board(run_id) would
     start one (VisualDL, installed, not running), "command": the command that shows the logs by hand,
     "text": a tracking.* text key for the line to show, "params": its parameters}"""
    try:
        d = _run_dir(run_id)
    except ValueError:
        return None
    names = run_trackers(d)
    if not names:
        return None
    folder = log_dir(d)
    name = "visualdl" if "visualdl" in names else names[0]
    info = {"tracker": name, "trackers": names, "logdir": str(folder), "has_logs": has_logs(folder),
            "installed": installed(name), "url": None, "can_start": False}
    if name == "visualdl":
        rec = board(d)
        info["url"] = rec["url"] if rec else None
        info["can_start"] = rec is None and info["installed"]
        info["command"] = f"visualdl --logdir {folder} --host {HOST} --port 8040"
        info["text"] = "tracking.board_running" if rec else "tracking.board_start"
    elif name == "tensorboard":
        info["command"] = f"tensorboard --logdir {folder} --host {HOST}"
        info["text"] = "tracking.tensorboard_command"
    else:
        info["command"] = f"wandb sync {folder / 'wandb'}"
        info["text"] = "tracking.wandb_command"
    info["params"] = {"url": info["url"] or "", "command": info["command"], "logdir": str(folder), "tracker": name}
    return info


# -------------------------------------------------------------- the board's own process

def _leash(owner: int, born: float) -> None:
    import threading

    def watch():
        while True:
            time.sleep(LEASH_S)
            if not jobs.alive(owner, born):  # the studio ended (or was killed): no board left behind
                os._exit(0)

    threading.Thread(target=watch, name="leash", daemon=True).start()


def main(argv: list[str]) -> int:
    """``python -m core.train.tracking board DIR --port P [--owner PID START]``: VisualDL's board on
    127.0.0.1:P over DIR (telemetry off: nothing leaves the machine), ending with the owner."""
    if not argv or argv[0] != "board":
        print("usage: python -m core.train.tracking board DIR --port P [--owner PID START]", file=sys.stderr)
        return 2
    folder = argv[1]
    port = int(argv[argv.index("--port") + 1])
    if "--owner" in argv:
        i = argv.index("--owner")
        owner, born = int(argv[i + 1]), argv[i + 2]
        if born == "None" or not jobs.alive(owner, float(born)):
            return 0
        _leash(owner, float(born))
    sys.argv = ["visualdl", "--logdir", folder, "--host", HOST, "--port", str(port), "--disable-telemetry"]
    from visualdl.server.app import main as visualdl_main

    visualdl_main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
