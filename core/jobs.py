"""Jobs: every long action — merge, quantize, evaluate, serve worker, demo build — and, through
core.train.runs, every training run — is a directory watched by a detached supervisor process.

    jobs/<job_id>/
      job.json        kind, title, argv, params, the paths it will create, created
      status.json     queued | running | succeeded | failed | stopped; supervisor and child pid,
                      pgid and start times; exit code; reason; started / finished
      log.txt         the child's stderr (ANSI colour codes are stripped when read)
      stdout.txt      the child's stdout (`paddle-studio VERB ... --json` prints one JSON object)
      result.json     that object, written once the child exits 0
      progress.json   {"fraction", "text"} when the child reports progress (report_progress)
      stop.request    written by stop(), so the supervisor records "stopped", not "failed"

The supervisor (``python -m core.jobs supervise DIR``) runs in its own session, starts the child
in its own process group with every output going to files (never a pipe), waits, and writes the
final status. The studio and the CLI only read and write these files, so a page reload, a second
browser or a studio restart finds every job where it is. A pid is trusted only with its start time.
The process helpers here (alive, processes, stop_processes, spawn_detached) are the same ones
training runs are supervised and stopped with.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

from core import workspace

ROOT = Path(__file__).resolve().parents[1]
ACTIVE = ("queued", "running")
FINAL = ("succeeded", "failed", "stopped")
KINDS = ("data", "merge", "quantize", "eval", "serve", "demo", "import", "export")
STOP_GRACE = 6.0
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class Refused(ValueError):
    """A job that cannot start, with a code and parameters the UI turns into zh/en text."""

    def __init__(self, code: str, message: str, **params):
        super().__init__(message)
        self.code, self.params = code, params


def check_output(name: str, root: Path) -> Path:
    """``root/name`` for a new model folder: a safe name, not there yet, not being written by a job."""
    name = (name or "").strip()
    code = workspace.check_name(name)
    if code:
        raise Refused(code, f"{name!r} is not a usable folder name (letters, digits, _ . -; no slashes)", name=name)
    out = root / name
    if out.exists():
        raise Refused("exists", f"{out} already exists; pick another name", path=str(out))
    other = claimed(out)
    if other:
        raise Refused("claimed", f"{out} is being written by job {other}", path=str(out), job=other)
    return out


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def strip_ansi(text: str) -> str:
    """Text without terminal colour and cursor codes (what a log shows in the page)."""
    return _ANSI.sub("", text).replace("\r\n", "\n")


def read_json(path: Path, default=None):
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return default


def jobs_dir() -> Path:
    return workspace.home() / "jobs"


# ---------------------------------------------------------------- processes (shared with training runs)


def proc_start(pid: int | None) -> float | None:
    """When ``pid`` started, in seconds since boot (None when it is gone or a zombie). Counted from
    boot, not from the wall clock: psutil's create_time adds the boot time, which moves when the
    clock is adjusted, and a healthy run then looked vanished to a process that read it later."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] == "Z":
            return None
        return int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, TypeError, IndexError):
        pass
    import psutil

    try:
        p = psutil.Process(pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return None
        return p.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError, TypeError):
        return None


def alive(pid: int | None, start: float | None) -> bool:
    """True when ``pid`` runs and was started at ``start`` (so a reused pid is not mistaken)."""
    if not pid or start is None:
        return False
    t = proc_start(pid)
    return t is not None and abs(t - start) < 0.05


def processes(status: dict) -> list:
    """Every live process of a job: the child's process group plus all the child's descendants."""
    import psutil

    pid, pgid = status.get("pid"), status.get("pgid")
    found = {}
    if alive(pid, status.get("pid_start")):
        try:
            root = psutil.Process(pid)
            for p in [root, *root.children(recursive=True)]:
                found[p.pid] = p
        except psutil.NoSuchProcess:
            pass
    if pgid:
        for p in psutil.process_iter(["pid"]):
            try:
                if os.getpgid(p.pid) == pgid and p.pid not in found:
                    found[p.pid] = p
            except (ProcessLookupError, PermissionError, psutil.Error):
                continue
    return list(found.values())


def processes_mentioning(path: str | Path) -> list:
    """Live processes whose command line names ``path`` (ranks a launcher started in process groups
    of their own still name the run's config.json, even after the launcher died)."""
    import psutil

    target, me, out = str(path), os.getpid(), []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if p.pid != me and p.info["status"] != psutil.STATUS_ZOMBIE and any(target in a for a in p.info["cmdline"] or []):
                out.append(p)
        except psutil.Error:
            continue
    return out


def stop_processes(status: dict, grace: float = STOP_GRACE, also: list = (), leader_last: bool = False) -> None:
    """SIGTERM to every process of the job (and ``also``), SIGKILL to what is left after ``grace`` seconds.
    ``leader_last``: the job's own process (a launcher) only waits for the others; once they are
    gone it is killed at once (paddle.distributed.launch's SIGTERM handler waits on its watcher,
    its master and its pod for 0.5-5 s after its ranks ended, with nothing left to save)."""
    import psutil

    procs = list({p.pid: p for p in [*processes(status), *also]}.values())
    if status.get("pgid"):
        try:
            os.killpg(status["pgid"], signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    for p in procs:
        try:
            p.terminate()
            p.resume()  # a process frozen by SIGSTOP handles its SIGTERM only once continued
        except psutil.Error:
            pass
    deadline = time.monotonic() + grace
    leader = [p for p in procs if p.pid == status.get("pid")] if leader_last and len(procs) > 1 else []
    if leader:
        others = [p for p in procs if p.pid != leader[0].pid]
        _, rest = psutil.wait_procs(others, timeout=grace)
        if not rest:
            try:
                leader[0].kill()
            except psutil.Error:
                pass
    _, left = psutil.wait_procs(procs, timeout=max(0.0, deadline - time.monotonic()))
    for p in left + processes(status):
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=3)


SECRETS = ("PADDLE_STUDIO_AUTH",)  # the studio's login: no run, job, worker or spare needs it


def child_env(extra: dict | None = None) -> dict:
    """The environment of a supervisor or child: the repository on PYTHONPATH, unbuffered output,
    none of the studio's secrets."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    base = {k: v for k, v in os.environ.items() if k not in SECRETS}
    return {**base, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", **(extra or {})}


def spawn_detached(argv: list[str], log: Path, cwd: Path, env: dict | None = None) -> subprocess.Popen:
    """Start ``argv`` in its own session with stdout and stderr appended to ``log``; reaped by a
    thread while this process lives (init adopts it if we die first)."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env or child_env(), cwd=str(cwd))
    threading.Thread(target=proc.wait, daemon=True).start()
    return proc


STATUS_SLOT = 4096  # bytes every status.json is padded to: room for the last word on a full disk


def _status_bytes(st: dict) -> bytes:
    data = json.dumps(st, ensure_ascii=False, indent=2).encode("utf-8") + b"\n"
    return data + b" " * max(0, STATUS_SLOT - len(data))  # trailing blanks are valid JSON


def _overwrite_in_place(path: Path, st: dict) -> None:
    """Write ``st`` over the blocks status.json already holds (no new block is needed, so this works
    on a full disk); a reason too long for the slot is cut. Readers may see a torn file for the
    moment of the write: read_json then answers the default and the next read is whole."""
    with open(path, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        data = _status_bytes(st)
        if len(data.rstrip()) > size and isinstance(st.get("reason"), str):
            over = len(data.rstrip()) - size + 16
            st = {**st, "reason": st["reason"][: max(0, len(st["reason"]) - over)] + "…"}
            data = _status_bytes(st)
        data = data.rstrip()
        if len(data) > size:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        f.write(data + b" " * (size - len(data)))
        f.flush()


def write_status(d: Path, **fields) -> dict:
    """Update status.json; read-modify-write under a lock, since the supervisor, the studio and
    the CLI may all write it at once. A full disk cannot take the usual new-file-then-rename, so
    the new status then overwrites the old file's own (padded) blocks: "failed: No space left on
    device" reaches the reader while the disk is still full."""
    with open(d / ".status.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        st = read_json(d / "status.json", {}) or {}
        st.update(fields)
        st["updated"] = now()
        try:
            workspace.write_bytes_atomic(d / "status.json", _status_bytes(st))
        except OSError as e:
            if e.errno not in (errno.ENOSPC, errno.EDQUOT) or not (d / "status.json").is_file():
                raise
            _overwrite_in_place(d / "status.json", st)
    return st


# ---------------------------------------------------------------- jobs


def job_dir(job_id: str) -> Path:
    if workspace.check_name(job_id):
        raise ValueError(f"bad job id {job_id!r}")
    d = jobs_dir() / job_id
    if not (d / "job.json").is_file():
        raise FileNotFoundError(f"no job {job_id!r} in {jobs_dir()}")
    return d


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]+", "-", text).strip("-.")[:40] or "job"


def claimed(path: str | Path) -> str | None:
    """The id of an active job that will create ``path``, if any (two jobs never write one folder)."""
    target = str(Path(path).resolve())
    for j in list_jobs():
        if j["status"].get("state") in ACTIVE and target in j.get("outputs", []):
            return j["job_id"]
    return None


def submit(kind: str, args: list[str], title: str = "", params: dict | None = None,
           outputs: list[str | Path] = (), program: list[str] | None = None) -> str:
    """Create the job directory and start its supervisor; returns the job id.

    ``args`` are `paddle-studio` verb arguments; ``{job}`` in them becomes the job's directory.
    ``program`` replaces `python -m core.cli` (an external tool; the tests' stand-ins).
    Refused (ValueError) when an active job already claims one of ``outputs``.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown job kind {kind!r} (one of {', '.join(KINDS)})")
    outs = [str(Path(o).resolve()) for o in outputs]
    for o in outs:
        other = claimed(o)
        if other:
            raise ValueError(f"{o} is being written by job {other}; wait for it or stop it")
    d = workspace.new_dir(jobs_dir(), f"{datetime.now():%Y%m%d-%H%M%S}-{kind}-{_slug(title or kind)}"[:60])
    job_id = d.name
    argv = [*(program or [sys.executable, "-m", "core.cli"]), *[a.replace("{job}", str(d)) for a in args]]
    workspace.write_json_atomic(d / "job.json", {"job_id": job_id, "kind": kind, "title": title or kind, "argv": argv,
                                                 "params": params or {}, "outputs": outs, "created": now()})
    write_status(d, state="running", created=now(), started=now())
    proc = spawn_detached([sys.executable, "-m", "core.jobs", "supervise", str(d)], d / "supervisor.log", d)
    write_status(d, supervisor_pid=proc.pid, supervisor_start=proc_start(proc.pid))  # state is the supervisor's now
    return job_id


def supervise(d: Path) -> int:
    """Run the job's child to its end and record how it ended (the body of the supervisor process)."""
    job = read_json(d / "job.json")
    with open(d / "stdout.txt", "wb") as out, open(d / "log.txt", "ab") as log:
        proc = subprocess.Popen(job["argv"], stdout=out, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
                                cwd=str(ROOT), env=child_env({"STUDIO_JOB_DIR": str(d)}))
    write_status(d, pid=proc.pid, pgid=proc.pid, pid_start=proc_start(proc.pid),
                 supervisor_pid=os.getpid(), supervisor_start=proc_start(os.getpid()))
    code = proc.wait()
    result = None
    if (d / "stop.request").exists():
        state, reason = "stopped", "stopped by the user"
    elif code == 0:
        state, reason = "succeeded", None
        text = (d / "stdout.txt").read_text(encoding="utf-8", errors="replace").strip()
        try:
            result = json.loads(text) if text else {}
        except ValueError:
            state, reason = "failed", "the command printed no JSON result"
        if isinstance(result, dict) and result.get("ended") in ("owner_gone", "idle"):  # a chat worker ended itself
            state, reason = "stopped", str(result.get("reason") or result["ended"])
    else:
        state, reason = "failed", failure_reason(d / "log.txt", code)
    if result is not None:
        workspace.write_json_atomic(d / "result.json", result)
    write_status(d, state=state, exit_code=code, reason=reason, finished=now())
    return 0


def failure_reason(log: Path, code: int) -> str:
    """The last `paddle-studio: ...` message or error line of a log, for status.json."""
    try:
        lines = strip_ansi(log.read_text(encoding="utf-8", errors="replace")).splitlines()[-200:]
    except OSError:
        lines = []
    for line in reversed(lines):
        s = line.strip()
        if s.startswith("paddle-studio"):
            return s.split(": ", 1)[-1][:500]
        if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", s):
            return s[:500]
    return f"exit code {code}" + (" (killed)" if code < 0 else "")


def supervisor_vanished(st: dict, start_wait: float = 60.0) -> bool:
    """A running job or run whose supervisor is gone (or never recorded itself within ``start_wait`` s)."""
    if st.get("state") != "running":
        return False
    if st.get("supervisor_pid"):
        return not alive(st.get("supervisor_pid"), st.get("supervisor_start"))
    try:
        started = datetime.fromisoformat(st.get("started") or "").timestamp()
    except ValueError:
        return True
    return time.time() - started > start_wait


def status(job_id_or_dir) -> dict:
    """The job's status, corrected when its supervisor vanished (killed, machine restarted)."""
    d = Path(job_id_or_dir) if isinstance(job_id_or_dir, Path) else job_dir(job_id_or_dir)
    st = read_json(d / "status.json", {}) or {}
    if supervisor_vanished(st):
        if alive(st.get("pid"), st.get("pid_start")):
            return st  # the child goes on without its supervisor
        st = write_status(d, state="failed", finished=now(),
                          reason="the job's supervisor vanished (killed or machine restarted)")
    return st


def stop(job_id: str, grace: float = STOP_GRACE) -> dict:
    """Stop a running job and every process it started; a finished job is left as it is."""
    d = job_dir(job_id)
    st = status(d)
    if st.get("state") not in ACTIVE:
        return st
    (d / "stop.request").write_text(now())
    deadline = time.time() + 10
    while not st.get("pgid") and time.time() < deadline and alive(st.get("supervisor_pid"), st.get("supervisor_start")):
        time.sleep(0.05)  # the supervisor has not started the child yet
        st = status(d)
    stop_processes(st, grace)
    deadline = time.time() + 5
    while time.time() < deadline and status(d).get("state") in ACTIVE:
        if not alive(st.get("supervisor_pid"), st.get("supervisor_start")):
            write_status(d, state="stopped", reason="stopped by the user", finished=now())
            break
        time.sleep(0.05)
    return status(d)


def report_progress(fraction: float | None, text: str = "", code: str | None = None, **params) -> None:
    """Called inside a job's child: record how far it got (a no-op outside a job). ``text`` is the
    English line (CLI, logs); ``code`` and ``params`` let a UI say it in its own language."""
    d = os.environ.get("STUDIO_JOB_DIR")
    if not d:
        return
    rec = {"fraction": None if fraction is None else max(0.0, min(1.0, float(fraction))), "text": text, "time": now()}
    if code:
        rec.update(code=code, params=params)
    try:
        workspace.write_json_atomic(Path(d) / "progress.json", rec)
    except OSError:
        pass  # progress is a courtesy; never fail the job over it


def read_log(job_id_or_dir, max_bytes: int = 20000) -> str:
    d = Path(job_id_or_dir) if isinstance(job_id_or_dir, Path) else job_dir(job_id_or_dir)
    f = d / "log.txt"
    try:
        size = f.stat().st_size
        with open(f, "rb") as r:
            r.seek(max(0, size - max_bytes))
            return strip_ansi(r.read().decode("utf-8", errors="replace"))
    except OSError:
        return ""


def show(job_id_or_dir) -> dict:
    """Everything about one job, from its files."""
    d = Path(job_id_or_dir) if isinstance(job_id_or_dir, Path) else job_dir(job_id_or_dir)
    job = read_json(d / "job.json", {}) or {}
    return {**job, "job_id": d.name, "dir": str(d), "status": status(d),
            "progress": read_json(d / "progress.json"), "result": read_json(d / "result.json")}


def signature(job_id_or_dir) -> tuple:
    """Changes whenever anything a view of the job shows changes (status, progress, log, result)."""
    d = Path(job_id_or_dir) if isinstance(job_id_or_dir, Path) else jobs_dir() / job_id_or_dir
    sig = []
    for f in ("status.json", "progress.json", "log.txt", "result.json"):
        try:
            s = (d / f).stat()
            sig.append((f, s.st_mtime_ns, s.st_size))
        except OSError:
            sig.append((f, None))
    return tuple(sig)


def list_jobs(kind: str | None = None) -> list[dict]:
    """Every job, newest first (optionally of one kind)."""
    root = jobs_dir()
    if not root.is_dir():
        return []
    out = []
    for d in sorted((p for p in root.iterdir() if (p / "job.json").is_file()), reverse=True):
        job = read_json(d / "job.json", {}) or {}
        if kind and job.get("kind") != kind:
            continue
        out.append({**job, "job_id": d.name, "status": status(d), "progress": read_json(d / "progress.json")})
    return out


def latest(kind: str) -> str | None:
    """The newest job of ``kind`` (what a tab shows after a reload)."""
    items = list_jobs(kind)
    return items[0]["job_id"] if items else None


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "supervise":
        return supervise(Path(argv[1]))
    sys.stderr.write("usage: python -m core.jobs supervise JOB_DIR\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
