"""Runs: create the run directory, launch, supervise, stop, resume, continue, queue, read back.

Each run is launched by a small *supervisor* process (``python -m core.train.runs supervise RUN``)
in its own session, so it outlives the studio. The supervisor starts
``python -m paddle.distributed.launch ... core/train/entry.py config.json`` (or, for a single CPU
process, the entry itself) in a new process group
with all output going to files (never a pipe), waits for it, writes the final
``status.json`` and starts the next queued run on the same devices. The studio and the CLI
only read and write files, so a refresh, a second browser or a studio restart finds every
run where it is. A pid is trusted only together with its process start time.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from core import jobs, system, workspace
from core.data import datasets
from core.train import checkpoints, control, monitor, upstream, warm
from core.train.config import RunConfig, cpu_cores

TRAIN_PY = Path(__file__).resolve().parent / "entry.py"
ACTIVE = ("queued", "running")
FINAL = ("succeeded", "failed", "stopped")
STOP_GRACE = jobs.STOP_GRACE
WATCH_S = 2.0  # how often the supervisor looks for a stalled run


_now = jobs.now
read_json = jobs.read_json
write_status = jobs.write_status
alive = jobs.alive


def run_dir(run_id: str) -> Path:
    code = workspace.check_name(run_id)
    if code:
        raise ValueError(f"bad run id {run_id!r}")
    d = workspace.runs_dir() / run_id
    if not (d / "studio.json").is_file():
        raise FileNotFoundError(f"no run {run_id!r} in {workspace.runs_dir()}")
    return d


def status(run_id_or_dir) -> dict:
    """The run's status, corrected when its supervisor vanished (killed, machine restarted)."""
    d = Path(run_id_or_dir) if isinstance(run_id_or_dir, Path) else run_dir(run_id_or_dir)
    st = read_json(d / "status.json", {}) or {}
    if jobs.supervisor_vanished(st):
        launcher = bool(st.get("pid") and alive(st.get("pid"), st.get("pid_start")))
        ranks = orphans(d)
        if launcher or ranks:  # nothing may train on unwatched: no stall watchdog, no queue, no nodes' leash
            jobs.stop_processes(st if launcher else {}, 3.0, also=ranks)
        finished = (d / "output" / workspace.MODEL_MARKER).is_file() and not launcher
        # what ranks said before or as they ended (a rank's own failure, or that it saw its supervisor go)
        told = [f"rank {r}: {text}" for r, text in sorted(failure_notes(d).items()) if text != TERM_NOTE]
        st = write_status(
            d, state="succeeded" if finished else "failed", finished=_now(),
            reason=None if finished else (
                "the run's supervisor vanished (killed or machine restarted)"
                + ("; its launcher and ranks were still training and were stopped (resume from the last checkpoint)"
                   if launcher or ranks else "")
                + ("; " + "; ".join(told) if told else ""))[:600],
        )
        meta = read_json(d / "studio.json", {}) or {}
        if meta.get("device_key"):
            kick_queue(meta["device_key"])  # nobody else will start the run queued behind this one
    return st


def run_processes(status: dict, d: Path) -> list:
    """The run's processes: the launcher (or the one process, a warm spare's included) with its
    process group and descendants, and ranks that name the run's config.json."""
    found = {p.pid: p for p in jobs.processes(status)}
    for p in orphans(d):
        found.setdefault(p.pid, p)
    return list(found.values())


def orphans(d: Path) -> list:
    """Processes of the run outside the launcher's tree (its ranks, after the launcher died)."""
    return jobs.processes_mentioning(d / "config.json")


# ---------------------------------------------------------------- creating


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]+", "-", name).strip("-.") or "run"


def device_key(parallel: dict) -> str:
    return f"gpu:{parallel['devices']}" if parallel.get("devices") else "cpu"


def single_process(parallel: dict) -> bool:
    """One CPU process on one node: the entry runs without paddle.distributed.launch (which costs
    a second interpreter importing paddle, ~1.5 s, before the rank even starts).
    PADDLE_STUDIO_LAUNCHER=always keeps the launcher for it too (bench/first_point.py compares)."""
    if os.environ.get("PADDLE_STUDIO_LAUNCHER") == "always":
        return False
    return (not parallel.get("devices") and int(parallel.get("nproc", 1) or 1) == 1
            and int(parallel.get("nnodes", 1) or 1) == 1)


def launch_argv(d: Path, parallel: dict, resume: bool = False) -> list[str]:
    if single_process(parallel):
        return [sys.executable, str(TRAIN_PY), str(d / "config.json")] + (["--resume"] if resume else [])
    argv = [sys.executable, "-m", "paddle.distributed.launch", "--log_dir", str(d / "log")]
    if parallel.get("devices"):
        argv += ["--devices", str(parallel["devices"])]
    else:
        argv += ["--nproc_per_node", str(parallel.get("nproc", 1))]
    if int(parallel.get("nnodes", 1)) > 1:
        argv += ["--nnodes", str(parallel["nnodes"]), "--master", str(parallel["master"]), "--rank", str(parallel.get("rank", 0))]
    argv += [str(TRAIN_PY), str(d / "config.json")]
    if resume:
        argv.append("--resume")
    return argv


PATH_KEYS = ("model_name_or_path", "tokenizer_name_or_path", "dataset_name_or_path", "chat_template", "lora_path",
             "train_dataset_path", "dev_dataset_path")


def create(cfg: RunConfig, meta: dict | None = None) -> str:
    """Make the run directory (studio.json, config.json, command.txt, status.json=queued); ``meta``
    adds to studio.json (a dry run's ``dry_run_of``)."""
    d = workspace.new_dir(workspace.runs_dir(), f"{datetime.now():%Y%m%d-%H%M%S}-{_slug(cfg.name)}"[:60])
    run_id = d.name
    parallel = cfg.to_dict()["parallel"]
    info = system.info()
    flat = cfg.to_paddlenlp(output_dir=str(d / "output"))
    # the run starts in its own folder: a path given relative to where the config was checked is made absolute
    for key in PATH_KEYS:
        v = flat.get(key)
        if isinstance(v, str) and v and not os.path.isabs(v) and os.path.exists(v):
            flat[key] = os.path.abspath(v)
    # upstream defaults to "gpu" and stops on a CPU machine: say which device this run is for
    flat.setdefault("device", "gpu" if parallel.get("devices") or info["device"] == "gpu" else "cpu")
    workspace.write_json_atomic(d / "config.json", flat)
    argv = launch_argv(d, parallel)
    workspace.write_text_atomic(d / "command.txt", shlex.join(argv) + "\n")
    workspace.write_json_atomic(
        d / "studio.json",
        # config.json is the one training config; studio.json only adds what its keys cannot say
        {"run_id": run_id, "name": cfg.name, "method": cfg.method.method, "parallel": parallel,
         "device_key": device_key(parallel), "command": argv, "created": _now(),
         "versions": {k: info[k] for k in ("paddle", "paddlenlp", "gradio")}, "device": info["device"],
         "history": [], "dataset": datasets.provenance(cfg.data.dataset_name_or_path), **(meta or {})},
    )
    write_status(d, state="queued", created=_now())
    return run_id


# ---------------------------------------------------------------- launching and the queue


@contextmanager
def _queue_lock():
    root = workspace.runs_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".queue.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _busy(key: str, exclude: str | None = None) -> bool:
    for d in run_dirs():
        if d.name == exclude:
            continue
        meta = read_json(d / "studio.json", {}) or {}
        if meta.get("device_key") == key and status(d).get("state") == "running":
            return True
    return False


def _spawn_supervisor(d: Path, resume: bool) -> None:
    write_status(d, state="running", started=_now(), finished=None, exit_code=None, reason=None, resume=resume,
                 pid=None, pgid=None, supervisor_pid=None, supervisor_start=None)
    meta = read_json(d / "studio.json", {}) or {}
    if single_process(meta.get("parallel", {})):
        clear_failure_notes(d)  # now: the spare's rank reserves its own note as soon as it is claimed
        spare = warm.claim(d, resume)  # a supervisor whose rank has already imported paddle(nlp)
        if spare:
            write_status(d, supervisor_pid=spare["pid"], supervisor_start=spare["start"], warm=True)
            return
    # a multi-node run is watched by core.train.cluster (the same supervise, with its nodes)
    module = "core.train.cluster" if meta.get("parallel", {}).get("nodes") else "core.train.runs"
    argv = [sys.executable, "-m", module, "supervise", str(d)] + (["--resume"] if resume else [])
    proc = jobs.spawn_detached(argv, d / "supervisor.log", d)
    write_status(d, supervisor_pid=proc.pid, supervisor_start=jobs.proc_start(proc.pid), warm=False)


def start(run_id: str, resume: bool = False) -> dict:
    """Launch now, or queue behind the run that holds the same devices."""
    d = run_dir(run_id)
    meta = read_json(d / "studio.json")
    (d / "stop.request").unlink(missing_ok=True)
    with _queue_lock():
        if _busy(meta["device_key"], exclude=run_id):
            return write_status(d, state="queued", resume=resume, queued=_now())
        _spawn_supervisor(d, resume)
    return status(d)


def kick_queue(key: str) -> str | None:
    """Start the oldest queued run for ``key`` if its devices are free; returns its id."""
    with _queue_lock():
        if _busy(key):
            return None
        queued = []
        for d in run_dirs():
            meta = read_json(d / "studio.json", {}) or {}
            st = read_json(d / "status.json", {}) or {}
            if meta.get("device_key") == key and st.get("state") == "queued":
                queued.append((st.get("queued") or st.get("created") or "", d))
        if not queued:
            return None
        _, d = min(queued)
        _spawn_supervisor(d, bool((read_json(d / "status.json", {}) or {}).get("resume")))
        return d.name


LOW_DISK_BYTES = 1 << 20


def failure_notes(d: Path) -> dict[int, str]:
    """rank -> the line its training entry left in failure.rank<N>.txt when it failed."""
    out = {}
    for f in d.glob("failure.rank*.txt"):
        rank = f.name[len("failure.rank"):-len(".txt")]
        try:
            text = f.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if text and rank.isdigit():
            out[int(rank)] = text
    return out


_TERMINATE = re.compile(r"terminate called after throwing an instance of '([^']+)'")
_PEER = re.compile(r"pair_rank\s*=\s*(\d+)")
_ERROR_LINE = re.compile(r"^[A-Za-z_.]*(Error|Exception)\b")


def _log_tail(f: Path, lines: int = 200) -> list[str]:
    try:
        text = f.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return [jobs.strip_ansi(x).strip() for x in text[-lines:]]


def rank_story(lines: list[str]) -> str | None:
    """What a rank's own log says about how it ended: aborted by a C++ exception (a gloo timeout
    names the peer it lost), or the last Python error line; None when the log says nothing."""
    for i in range(len(lines) - 1, -1, -1):
        m = _TERMINATE.search(lines[i])
        if m:
            what = " ".join(lines[i + 1:i + 3])
            peer = _PEER.search(what)
            if "gloo" in m.group(1).lower() and "timeout" in m.group(1).lower():
                who = f"rank {peer.group(1)}" if peer else "another rank"
                return f"lost contact with {who} (gloo timeout) and was aborted"
            return f"aborted by {m.group(1)}" + (f": {what[:200]}" if what else "")
    for line in reversed(lines):
        if _ERROR_LINE.match(line) or line.startswith(("ValueError", "RuntimeError")):
            return line[:300]
    return None


SILENT = "ended without a message (killed: kill -9, or the out-of-memory killer)"
# the failure note a rank leaves when SIGTERM ends it (written by entry.note_termination)
TERM_NOTE = "ended by SIGTERM (the launcher ends every rank once one fails; Stop does too)"


def local_ranks(par: dict) -> list[tuple[int, int]]:
    """(global rank, local index) of the ranks this machine runs for the run's ``parallel``
    (node rank ``rank`` of ``nnodes``, ``nproc`` or len(devices) processes each)."""
    n = len([x for x in str(par["devices"]).split(",") if x.strip()]) if par.get("devices") else int(par.get("nproc", 1) or 1)
    base = int(par.get("rank", 0) or 0) * n if int(par.get("nnodes", 1) or 1) > 1 else 0
    return [(base + i, i) for i in range(n)]


def _failure_reason(d: Path, code: int) -> str:
    """Why the launcher ended with ``code``: a signal that killed it, else rank by rank (its own
    failure note, what its log says, or that it died without a word: kill -9 or out of memory)
    with the silent ranks first (they are the cause, the others lost them), else a full disk
    (the logs may not have room for the error itself), else the launcher's last error line."""
    meta = read_json(d / "studio.json", {}) or {}
    par = meta.get("parallel", {})
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        if single_process(par):
            why = " (kill -9, or the out-of-memory killer)" if name == "SIGKILL" else ""
            return f"the training process was killed ({name}){why}"
        return f"the launcher was killed ({name}); its rank processes were ended with it"
    notes = failure_notes(d)
    ranks = local_ranks(par)
    stories = {r: text for r, text in notes.items()}
    for r, i in ranks:
        if r not in stories:
            told = rank_story(_log_tail(d / "log" / f"workerlog.{i}"))
            if told:
                stories[r] = told
    silent = [r for r, _ in ranks if r not in stories]
    if stories and (silent or len(ranks) > 1 or notes):
        # the causes first: a rank the launcher ended (SIGTERM) only followed another one's failure
        order = sorted(stories.items(), key=lambda kv: (kv[1] == TERM_NOTE, kv[0]))
        parts = [f"rank {r}: {text}" for r, text in order]
        if silent:
            parts.insert(0, f"rank {', '.join(map(str, silent))} {SILENT}")
        return "; ".join(parts)[:600]
    try:
        st = os.statvfs(d)
        free = st.f_bavail * st.f_frsize
    except OSError:
        free = None
    if free is not None and free < LOW_DISK_BYTES:
        return (f"No space left on device: the disk holding {d} is full ({free / 1024:.0f} KB free); "
                "free some space, then resume (from the last complete checkpoint)")
    for f in [d / "log" / "workerlog.0", d / "launcher.log"]:
        told = rank_story(_log_tail(f))
        if told:
            return told[:500]
    if silent:
        return f"rank {', '.join(map(str, silent))} {SILENT}"
    return f"exit code {code}"


def last_activity(d: Path) -> float:
    """When the run last wrote to its training logs or metrics (the supervisor's own start at the least)."""
    newest = 0.0
    for f in [d / "metrics.jsonl", d / "launcher.log", d / "status.json", *(d / "log").glob("workerlog.*"),
              *d.glob("progress.rank*.json")]:
        try:
            newest = max(newest, f.stat().st_mtime)
        except OSError:
            continue
    return newest


def clear_failure_notes(d: Path) -> None:
    """An earlier attempt's failure notes say nothing about the next one: removed before its ranks
    start (they reserve their own at start)."""
    for f in d.glob("failure.rank*.txt"):
        f.unlink(missing_ok=True)


def launch(d: Path, parallel: dict, resume: bool, env: dict | None = None) -> subprocess.Popen:
    """Start the launcher (or the single rank) of the run folder ``d`` in a session of its own,
    its output to files (never a pipe)."""
    clear_failure_notes(d)
    argv = launch_argv(d, parallel, resume)
    # a single process writes where a launched rank 0 would (log/workerlog.0)
    (d / "log").mkdir(exist_ok=True)
    out = d / "log" / "workerlog.0" if single_process(parallel) else d / "launcher.log"
    with open(out, "ab") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=str(d), env=jobs.child_env(env))


def supervise(d: Path, resume: bool, proc: subprocess.Popen | None = None, nodes=None) -> int:
    """Run the launcher to its end and record how it ended (the body of the supervisor process).
    ``proc``: a warm spare's rank, already started and now given this run (core.train.warm).
    ``nodes``: the other machines of a multi-node run (core.train.cluster.Agents): started before
    the launcher here, asked each tick whether one failed, stopped with the run, and their word
    goes into the run's reason."""
    meta = read_json(d / "studio.json")
    launched = time.time()  # a stop-and-save of an earlier launch (before a resume) does not end this one
    if nodes is not None:
        nodes.start(resume)
        if (d / "stop.request").exists():  # stopped while the nodes were being started (a checkpoint copy)
            nodes.finish()
            _write_until_written(d, state="stopped", reason="stopped by the user", finished=_now())
            kick_queue(meta["device_key"])
            return 0
    if proc is None:
        proc = launch(d, meta["parallel"], resume, env=nodes.launcher_env() if nodes is not None else None)
    _write_until_written(d, pid=proc.pid, pgid=proc.pid, pid_start=jobs.proc_start(proc.pid),
                         supervisor_pid=os.getpid(), supervisor_start=jobs.proc_start(os.getpid()))
    stall = int(meta["parallel"].get("stall_timeout", 0) or 0)
    stalled = None
    node_failed = None
    me = {"pid": proc.pid, "pgid": proc.pid, "pid_start": jobs.proc_start(proc.pid)}
    # what the run costs the machine (CPU, PSS memory, disk, GPUs): resources.jsonl, every 5 s
    sampler = monitor.Sampler(d, lambda: run_processes(me, d))
    while True:
        sampler.tick()
        try:
            code = proc.wait(timeout=WATCH_S if nodes is None else 0.5)
            break
        except subprocess.TimeoutExpired:
            pass
        stopping = (d / "stop.request").exists()
        if nodes is not None:
            if stopping and not nodes.stop_sent:  # Stop may have come before the launcher's pid was known
                nodes.stop()
                jobs.stop_processes(me, STOP_GRACE, also=orphans(d))
            elif (node_failed := nodes.failed()) is not None:
                jobs.stop_processes(me, STOP_GRACE, also=orphans(d))
                code = proc.wait()
                break
        newest = last_activity(d) if nodes is None else max(last_activity(d), nodes.last_activity())
        quiet = time.time() - newest
        if stall > 0 and quiet > stall and not stopping:
            stalled = quiet
            if nodes is not None:  # where each rank waits, before anything is stopped
                nodes.diagnose()
            jobs.stop_processes(me, STOP_GRACE, also=orphans(d))
            code = proc.wait()
            break
    left = orphans(d)  # ranks the launcher left behind (it was killed): end them, they would train on
    if left:
        jobs.stop_processes({}, STOP_GRACE, also=left)
    if stalled is not None:
        state, reason = "failed", (f"no progress for {stalled:.0f} s (nothing new in the training log or metrics; "
                                   f"stall_timeout is {stall} s): the run was stopped")
        if nodes is not None and nodes.stacks_summary():
            reason += "; " + nodes.stacks_summary()
    elif (d / "stop.request").exists():
        state, reason = "stopped", "stopped by the user"
    elif code == 0 and node_failed is None and (at := control.stopped_at(d, since=launched)) is not None and at < _max_steps(d):
        state, reason = "stopped", f"stopped and saved at step {at} (Resume continues from checkpoint-{at})"
    elif code == 0 and node_failed is None:
        state, reason = "succeeded", None
    else:
        state, reason = "failed", _failure_reason(d, code) if code != 0 else None
        if left and reason:
            reason += f" (the launcher ended with {len(left)} rank process(es) still running; they were stopped)"
    if nodes is not None:
        # what each node said: after a good end here nodes get time to end by themselves; after a
        # failure a few seconds, so a node whose own rank failed reports that, not our stop
        ends = nodes.finish(wait_first=20.0 if code == 0 and state == "succeeded" else 0.0 if state == "stopped" else 3.0)
        if state == "failed" and stalled is None:
            reason = nodes.blame(reason, ends)
            if code == 0 and not reason:
                reason = "a node failed"
        elif state == "succeeded" and ends.get("failed"):
            state, reason = "failed", nodes.blame(None, ends)
    _write_until_written(d, state=state, exit_code=code, reason=reason, finished=_now())
    try:
        if state == "succeeded" or last_checkpoint(d) is not None:
            verify_saved(d)  # before the next queued run: the reload must not compete with it for (GPU) memory
    except OSError as e:  # a full disk has no room for the check's record: the run's own word is written
        _say(f"the round-trip check could not start: {e}")
    try:
        kick_queue(meta["device_key"])
    except OSError as e:
        _say(f"the next queued run could not be started: {e}")
    return 0


def _say(line: str) -> None:
    """A line in the supervisor's log, which may itself be on the full disk."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except OSError:
        pass


VERIFY_TIMEOUT = 900


def verify_enabled() -> bool:
    """PADDLE_STUDIO_VERIFY=0 turns the round-trip check after each run off (the test suite does,
    for the tests that are not about it: each check is a fresh process importing paddle)."""
    return os.environ.get("PADDLE_STUDIO_VERIFY", "1").strip().lower() not in ("0", "off", "no", "false")


def verify_saved(d: Path, wait: bool = True) -> None:
    """The round-trip proof of what the run saved (core.train.verify) in a fresh process: its
    final output and the checkpoint Resume would use, loaded as chat/eval/merge load them. Its
    verdict goes to verify.json; a check that cannot even start or dies says so there."""
    from core.train import verify

    if not verify_enabled():
        return
    # "running" until the check writes its own record with its pid (a check whose process is gone
    # then reads as an error, not "running" forever: verify.read)
    workspace.write_json_atomic(d / verify.RESULT, {"state": "running", "started": time.time(), "targets": {}})
    with open(d / "verify.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "core.train.verify", str(d)], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=str(Path(__file__).resolve().parents[2]),
                                env=jobs.child_env())
    if not wait:
        return
    try:
        code = proc.wait(timeout=VERIFY_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    v = verify.read(d) or {}
    if v.get("state") in (None, "running"):
        tail = jobs.strip_ansi((d / "verify.log").read_bytes()[-600:].decode("utf-8", "replace")).strip().splitlines()
        workspace.write_json_atomic(d / verify.RESULT, {
            "state": "error", "finished": time.time(), "targets": {},
            "reason": f"the check ended with exit code {code} before its verdict" + (f": {tail[-1]}" if tail else "")})


def _write_until_written(d: Path, tries: int = 120, wait: float = 5.0, **fields) -> None:
    """The supervisor's last word must reach status.json: on a full disk it retries (every 5 s, up
    to 10 minutes) instead of dying and leaving the run "running"."""
    for k in range(tries):
        try:
            write_status(d, **fields)
            return
        except OSError as e:
            try:  # the log is on the same full disk: saying so may fail too, and must not end us
                sys.stderr.write(f"cannot write {d / 'status.json'} ({e.strerror or e}); retrying in {wait:.0f} s\n")
                sys.stderr.flush()
            except OSError:
                pass
            time.sleep(wait)


# ---------------------------------------------------------------- stop / resume / continue


def stop(run_id: str, grace: float = STOP_GRACE) -> dict:
    """SIGTERM to every process of the run, SIGKILL to what is left after ``grace`` seconds."""
    d = run_dir(run_id)
    (d / "stop.request").write_text(_now())
    st = status(d)
    if st.get("state") == "queued":
        return write_status(d, state="stopped", reason="cancelled before it started", finished=_now())
    if st.get("state") != "running":
        return st
    deadline = time.time() + 15
    while not st.get("pgid") and time.time() < deadline and alive(st.get("supervisor_pid"), st.get("supervisor_start")):
        time.sleep(0.1)  # the supervisor has not started the launcher yet
        st = status(d)
    meta = read_json(d / "studio.json", {}) or {}
    jobs.stop_processes(st, grace, also=orphans(d), leader_last=not single_process(meta.get("parallel") or {}))
    deadline = time.time() + 5
    while time.time() < deadline and status(d).get("state") == "running":
        if not alive(st.get("supervisor_pid"), st.get("supervisor_start")):
            write_status(d, state="stopped", reason="stopped by the user", finished=_now())
            break
        time.sleep(0.05)
    return status(d)


def last_checkpoint(d: Path) -> Path | None:
    """The newest checkpoint whose save completed (core.train.checkpoints)."""
    return checkpoints.last_complete(d / "output")


# measured with paddlenlp 3.0.0b4 on CPU: a sharding stage-1 checkpoint keeps one optimizer shard
# per process and neither checkpoint format loads on another process count
SHARDED_RESUME = ("its checkpoint holds the optimizer state in one shard per process (sharding {sharding}), and "
                  "paddlenlp 3.0.0b4 cannot load it with another process count (standard checkpoint: \"optimizer-state-"
                  "dict not found ... optimizer.pdopt\"; unified_checkpoint: \"Optimizer set error ... should in state "
                  "dict\"): resume with {nproc} process(es)")


def change_processes(d: Path, nproc: int) -> dict | None:
    """Point a stopped/failed run at another process count for its next start (data parallel:
    PaddleNLP's checkpoint, standard or unified, loads on any number of data-parallel ranks);
    returns {"from", "to"} or None when unchanged. Raises ValueError with the reason otherwise."""
    meta = read_json(d / "studio.json")
    par = dict(meta.get("parallel") or {})
    old = int(par.get("nproc", 1) or 1)
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"the process count must be a positive integer, not {nproc!r}")
    if nproc == old:
        return None
    if par.get("devices"):
        raise ValueError("this run names its GPUs (--devices): resume it on GPUs by their ids")
    if int(par.get("nnodes", 1) or 1) > 1:
        raise ValueError("a multi-node run keeps its layout: resume it on the same nodes")
    if nproc > cpu_cores():
        raise ValueError(f"{nproc} processes on a machine with {cpu_cores()} CPU cores: set at most "
                         f"{cpu_cores()} (more ranks than cores only wait on each other)")
    flat = read_json(d / "config.json", {}) or {}
    if str(flat.get("sharding") or "").strip():
        raise ValueError(SHARDED_RESUME.format(sharding=flat["sharding"], nproc=old))
    for k in ("tensor_parallel_degree", "pipeline_parallel_degree"):
        if int(flat.get(k, 1) or 1) > 1:
            raise ValueError(f"{k} is {flat[k]}: only a data-parallel run changes its process count")
    if flat.get("reft") and nproc > 1:
        raise ValueError("ReFT trains in one process here (its interventions are not sublayers of the model)")
    told = (upstream.entry_of(flat) or ("",))[0]
    if told in ("dpo", "kto") and nproc > 1:
        raise ValueError(f"{told.upper()} trains in one process in the studio: resume it with 1")
    par["nproc"] = nproc
    meta["parallel"] = par
    meta["command"] = launch_argv(d, par)
    workspace.write_json_atomic(d / "studio.json", meta)
    workspace.write_text_atomic(d / "command.txt", shlex.join(meta["command"]) + "\n")
    return {"from": old, "to": nproc}


def resume(run_id: str, nproc: int | None = None) -> dict:
    """Start a stopped or failed run again from its last checkpoint, with ``nproc`` processes when
    given (data parallel only: see change_processes)."""
    d = run_dir(run_id)
    st = status(d)
    if st.get("state") in ACTIVE:
        raise ValueError(f"run {run_id} is {st['state']}; stop it first")
    ck = last_checkpoint(d)
    if ck is None:
        partial = checkpoints.checkpoints(d / "output")
        raise ValueError(f"run {run_id} has no complete checkpoint to resume from"
                         + (f" ({', '.join(p.name for p in partial)} did not finish saving)" if partial else ""))
    max_steps = int((read_json(d / "config.json", {}) or {}).get("max_steps", -1) or -1)
    if 0 < max_steps <= (checkpoints.step_of(ck) or 0):
        raise ValueError(f"run {run_id} already trained all {max_steps} steps ({ck.name}); "
                         f"use continue to train it further")
    manual = [n["name"] for n in (read_json(d / "studio.json", {}) or {}).get("nodes", []) if n.get("kind") == "manual"]
    if manual:
        raise ValueError(f"run {run_id} spans the manual node(s) {', '.join(manual)}: the studio cannot copy the checkpoint "
                         "there; start a new run, or make the node an SSH node")
    changed = change_processes(d, int(nproc)) if nproc is not None else None
    _history(d, {"action": "resume", "from": ck.name, **({"nproc": changed} if changed else {})})
    return start(run_id, resume=True)


def continue_run(run_id: str, epochs: float | None = None, steps: int | None = None) -> dict:
    """Train a finished run further (more epochs, or more steps when it counts steps) from its last checkpoint."""
    d = run_dir(run_id)
    st = status(d)
    if st.get("state") in ACTIVE:
        raise ValueError(f"run {run_id} is {st['state']}")
    if last_checkpoint(d) is None:
        raise ValueError(f"run {run_id} has no checkpoint to continue from")
    flat = read_json(d / "config.json")
    if flat.get("max_steps", -1) and flat.get("max_steps", -1) > 0:
        add = int(steps or 0)
        if not add:  # epochs of a run bounded by max_steps: an epoch is as many steps as training counted
            per_epoch = steps_per_epoch(d)
            if per_epoch is None:
                raise ValueError(f"run {run_id} counts steps (max_steps {flat['max_steps']}) and its metrics do not say "
                                 "how many steps an epoch is: give more steps instead of epochs")
            add = max(1, int(round((epochs or 1) * per_epoch)))
        flat["max_steps"] += add
        change = {"max_steps": flat["max_steps"]}
    else:
        flat["num_train_epochs"] = float(flat.get("num_train_epochs", 1)) + float(epochs or 1)
        change = {"num_train_epochs": flat["num_train_epochs"]}
    workspace.write_json_atomic(d / "config.json", flat)
    (d / "output" / workspace.MODEL_MARKER).unlink(missing_ok=True)
    _history(d, {"action": "continue", **change})
    return start(run_id, resume=True)


def steps_per_epoch(d: Path) -> float | None:
    """Optimizer steps in one epoch, from the run's own metrics (PaddleNLP logs the fractional epoch
    with each step); None when no line says."""
    recs, _ = read_metrics(d)
    seen = [(r["step"], r["epoch"]) for r in recs if isinstance(r.get("epoch"), (int, float)) and r.get("epoch")
            and isinstance(r.get("step"), int) and r["step"] > 0]
    if not seen:
        return None
    step, epoch = seen[-1]
    return step / epoch


def _max_steps(d: Path) -> int:
    """The run's planned optimizer steps (its last metrics line says; else the config's max_steps)."""
    recs, _ = read_metrics(d)
    planned = [r["max_steps"] for r in recs if isinstance(r.get("max_steps"), int)]
    if planned:
        return planned[-1]
    return int((read_json(d / "config.json", {}) or {}).get("max_steps", -1) or -1)


def control_run(run_id: str, spec: str) -> dict:
    """Steer a running run (core.train.control): save, eval, stop-after-eval, stop-and-save or lr=X."""
    d = run_dir(run_id)
    meta = read_json(d / "studio.json", {}) or {}
    par = meta.get("parallel") or {}
    if meta.get("nodes") or par.get("nodes") or int(par.get("nnodes") or 1) > 1:
        # the control file is read in the run folder of each machine: the other nodes' ranks would never
        # see a request, and rank 0 alone saving or stopping would leave them waiting in a collective
        raise control.ControlError("multi_node", f"run {run_id} spans several machines: steering reaches only this "
                                   "machine's ranks, so it is refused (stop it, or wait for its own checkpoints)",
                                   run=run_id)
    req = control.request(d, spec, state=status(d).get("state"))
    _history(d, {"action": "control", "request": req["action"], **({"value": req["value"]} if "value" in req else {}),
                 "id": req["id"]})
    return req


def _history(d: Path, item: dict) -> None:
    meta = read_json(d / "studio.json")
    meta.setdefault("history", []).append({**item, "time": _now()})
    workspace.write_json_atomic(d / "studio.json", meta)


# ---------------------------------------------------------------- reading back


def run_dirs() -> list[Path]:
    """Every run folder of the workspace, newest first."""
    root = workspace.runs_dir()
    if not root.is_dir():
        return []
    return sorted((d for d in root.iterdir() if d.is_dir() and (d / "studio.json").is_file()), reverse=True)


def read_metrics(run_id_or_dir, offset: int = 0) -> tuple[list[dict], int]:
    """Complete metrics lines from byte ``offset``; returns (records, new offset)."""
    d = Path(run_id_or_dir) if isinstance(run_id_or_dir, Path) else run_dir(run_id_or_dir)
    return workspace.read_jsonl(d / "metrics.jsonl", offset)


def progress(records: list[dict]) -> dict:
    """Step, max steps, latest loss/eval loss, speed and ETA from metrics records."""
    p = {"step": 0, "max_steps": 0, "loss": None, "eval_loss": None, "eta": None, "steps_per_sec": None, "epoch": None}
    for r in records:
        p["step"] = r.get("step", p["step"])
        p["max_steps"] = r.get("max_steps", p["max_steps"]) or p["max_steps"]
        for k in ("loss", "eval_loss", "eta", "steps_per_sec", "epoch", "token_accuracy"):
            if r.get(k) is not None:
                p[k] = r[k]
    return p


STARTUP_NEXT = {None: "process", "process": "imports", "imports": "tokenizer", "tokenizer": "data",
                "data": "model", "model": "trainer", "trainer": "first_step"}


def startup(run_id_or_dir) -> str:
    """What a started run is doing before its first step: the phase rank 0 works on now
    (``process``: the interpreter starting; ``imports``; ``tokenizer``; ``data``: reading and
    tokenizing; ``model``: loading and wrapping; ``trainer``; ``first_step``: training, no loss
    logged yet), from its startup.jsonl. Callers ask only while the run is running and show it
    until the first loss point."""
    d = run_id_or_dir if isinstance(run_id_or_dir, Path) else run_dir(run_id_or_dir)
    done = None
    try:
        for line in (d / "startup.jsonl").read_text(encoding="utf-8").splitlines():
            done = json.loads(line).get("phase", done)
    except (OSError, ValueError):
        pass
    return STARTUP_NEXT.get(done, "first_step")


def tail_log(run_id_or_dir, max_bytes: int = 20000) -> str:
    """The end of rank 0's worker log (or the launcher's log before workers start)."""
    d = Path(run_id_or_dir) if isinstance(run_id_or_dir, Path) else run_dir(run_id_or_dir)
    for f in (d / "log" / "workerlog.0", d / "launcher.log"):
        if f.is_file() and f.stat().st_size:
            with open(f, "rb") as r:
                r.seek(max(0, f.stat().st_size - max_bytes))
                text = r.read().decode("utf-8", errors="replace")
            return jobs.strip_ansi(text)
    return ""


def show(run_id: str) -> dict:
    d = run_dir(run_id)
    meta = read_json(d / "studio.json")
    records, _ = read_metrics(d)
    from core.train import verify

    return {**meta, "status": status(d), "progress": progress(records), "dir": str(d),
            "verify": verify.summary(verify.read(d)),
            "checkpoint": (lambda c: c.name if c else None)(last_checkpoint(d)),
            "output": str(d / "output") if (d / "output" / workspace.MODEL_MARKER).is_file() else None}


def reconcile() -> list[str]:
    """Settle every run's state (a read corrects a run whose supervisor vanished) and start the
    oldest queued run of every device set left idle, e.g. by a supervisor killed between its last
    status write and its queue kick. Returns the ids of the runs started."""
    keys = set()
    for d in run_dirs():
        st = status(d)
        if st.get("state") == "queued":
            keys.add((read_json(d / "studio.json", {}) or {}).get("device_key"))
    return [r for k in sorted(k for k in keys if k) if (r := kick_queue(k))]


def keep_warm() -> None:
    """Keep a warm spare for the next single-process CPU run (core.train.warm), owned by this
    process, while no CPU run is training: a spare's imports would take CPU from a run."""
    if not _busy("cpu"):
        warm.keep_spare(os.getpid())


def list_runs() -> list[dict]:
    out = []
    for d in run_dirs():
        meta = read_json(d / "studio.json", {}) or {}
        records, _ = read_metrics(d)
        out.append({"run_id": d.name, "name": meta.get("name"), "created": meta.get("created"),
                    "method": meta.get("method") or meta.get("config", {}).get("method", {}).get("method"),
                    "status": status(d), "progress": progress(records)})
    return out


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "supervise":
        return supervise(Path(argv[1]), "--resume" in argv)
    if len(argv) == 3 and argv[0] == "spare":
        return warm.serve_spare(Path(argv[1]), int(argv[2]), supervise)
    sys.stderr.write("usage: python -m core.train.runs supervise RUN_DIR [--resume]\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
