"""Cluster: one run over several machines, and the hang doctor.

The head (the machine the studio runs on) holds the run's one folder and global rank 0. Its
supervisor (``python -m core.train.cluster supervise RUN``: core.train.runs.supervise with
``Agents``) starts, over SSH, an *agent* on every node (``python -m core.train.cluster agent``),
then its own launcher. Each agent writes the node's share of the run under
``<node workspace>/node-runs/<run id>/``, starts ``paddle.distributed.launch --master HEAD:PORT
--nnodes N --rank i`` there in a session of its own (ranks die with it: PR_SET_PDEATHSIG), and
streams one JSON line a second back: state, each rank's step, the last log line, memory; at the
end, the exit code and the reason read from the node's own logs. The SSH link is the leash: when
it breaks (the head's supervisor died, the network went), the agent stops its ranks.

A node failing stops the others, and the run's reason names the node, its ranks and the cause
(the node whose rank died first, not the ones that then lost it). Stop stops every node.

Hang doctor: every rank dumps its Python stacks on SIGUSR1 (core.train.entry.install_stack_dump).
``diagnose`` asks all ranks on all machines at once and says where each waits ("rank 1 (n1): waits
in all_reduce"; a rank frozen by SIGSTOP cannot answer and is named so); the supervisor runs it
when no rank progressed for the stall window, the Runs tab when a person asks "Why is it stuck?".
"""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

from core import jobs, workspace
from core.train import nodes, runs

NODE_RUNS = nodes.NODE_RUNS
TICK_S = 1.0
MULTINODE_STALL = 300  # a multi-node run's stall window unless the person set one (not 1800: half an hour lost)
STACKS = "stacks.json"


# ---------------------------------------------------------------- one machine's share of a run


def rank_processes(d: Path) -> dict[int, object]:
    """global rank -> live rank process of the run folder ``d`` on this machine (not the launcher)."""
    import psutil

    out = {}
    for p in jobs.processes_mentioning(d / "config.json"):
        try:
            cmd = p.cmdline()
            if any("paddle.distributed.launch" in a for a in cmd) or not any(a.endswith("entry.py") for a in cmd):
                continue
            out[int(p.environ().get("PADDLE_TRAINER_ID", "0"))] = p
        except (psutil.Error, ValueError):
            continue
    return out


def _last_line(d: Path) -> str:
    for f in sorted((d / "log").glob("workerlog.*")) + [d / "launcher.log"]:
        lines = [x for x in runs._log_tail(f, 20) if x]
        if lines:
            return lines[-1][:200]
    return ""


def report(d: Path, launcher: dict | None = None) -> dict:
    """What this machine's ranks do: each rank's last step and how long ago, seconds since the
    newest write of any log/progress file, the last log line, resident memory of the processes."""
    import psutil

    now = time.time()
    ranks = {}
    for f in d.glob("progress.rank*.json"):
        r = f.name[len("progress.rank"):-len(".json")]
        rec = jobs.read_json(f, {}) or {}
        try:
            age = now - f.stat().st_mtime
        except OSError:
            continue
        if r.isdigit():
            ranks[r] = {"step": rec.get("step"), "max_steps": rec.get("max_steps"), "age": round(age, 1)}
    procs = list(rank_processes(d).values()) + (jobs.processes(launcher) if launcher else [])
    rss = 0
    for p in {p.pid: p for p in procs}.values():
        try:
            rss += p.memory_info().rss
        except psutil.Error:
            pass
    return {"progress": ranks, "activity_age": round(now - runs.last_activity(d), 1), "last_line": _last_line(d),
            "rss": rss, "processes": len(procs)}


def _proc_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
        return stat[stat.rindex(")") + 2:].split()[0]
    except (OSError, ValueError, IndexError):
        return "?"


FROZEN = "frozen: stopped by a signal (SIGSTOP, Ctrl-Z or a debugger); it cannot progress or answer"
COLLECTIVES = ("all_reduce", "allreduce", "all_gather", "broadcast", "barrier", "reduce_scatter", "alltoall",
               "send", "recv", "_sync_params_buffers", "sync_params_buffers", "init_parallel_env")


def where(text: str) -> str:
    """Where a rank waits, from its faulthandler dump: the main thread's innermost collective, else
    backward (data parallel's gradient all-reduce runs inside it), data loading, saving, else its
    innermost frame."""
    blocks = re.split(r"\n(?=(?:Current thread|Thread) 0x)", text.strip())
    # the main thread runs entry.py's module code (another thread of entry.py waits for SIGTERM)
    main = next((b for b in blocks if re.search(r'entry\.py", line \d+ in <module>', b)), blocks[-1] if blocks else "")
    frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', main)  # most recent call first
    if not frames:
        return "no Python stack in its dump"
    for f, line, fn in frames:
        if fn in COLLECTIVES or ("/communication/" in f and not fn.startswith("_")):
            if fn == "init_parallel_env":
                return "waits in init_parallel_env for the other machines to join"
            return f"waits in {fn} for the other ranks (a collective)"
    for f, line, fn in frames:
        if fn == "backward":
            return "waits in backward (data parallel's gradient all-reduce: for the other ranks)"
        if "dataloader" in f.lower():
            return "in data loading"
        if fn.startswith(("save", "_save")):
            return f"saving ({fn})"
    f, line, fn = frames[0]
    return f"in {fn} ({Path(f).name}:{line})"


def stacks(d: Path, expected: list[int] | None = None, wait: float = 4.0) -> dict[str, dict]:
    """Ask each rank of the run folder ``d`` on this machine for its stacks: rank -> {state, where, text}."""
    procs = rank_processes(d)
    out, asked = {}, {}
    for r, p in procs.items():
        if _proc_state(p.pid) in ("T", "t"):
            out[str(r)] = {"state": "frozen", "where": FROZEN}
            continue
        f = d / f"stacks.rank{r}.txt"
        try:
            if f.exists():
                os.truncate(f, 0)  # the rank appends (O_APPEND): what comes next is this answer
            os.kill(p.pid, signal.SIGUSR1)
            asked[r] = f
        except OSError as e:
            out[str(r)] = {"state": "error", "where": f"could not be asked ({e.strerror or e})"}
    deadline, sizes = time.time() + wait, {}
    while asked and time.time() < deadline:
        now_sizes = {r: (f.stat().st_size if f.exists() else 0) for r, f in asked.items()}
        if all(now_sizes.values()) and now_sizes == sizes:
            break  # every rank wrote, and nothing grew since the last look
        sizes = now_sizes
        time.sleep(0.3)
    for r, f in asked.items():
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        out[str(r)] = ({"state": "answered", "where": where(text), "text": text[-12000:]} if text.strip() else
                       {"state": "silent", "where": f"did not answer in {wait:.0f} s"})
    for r in expected or []:
        out.setdefault(str(r), {"state": "gone", "where": "not running"})
    return out


# ---------------------------------------------------------------- node side: the agent


def _send(obj: dict, out=None) -> bool:
    try:
        (out or sys.stdout).write(json.dumps(obj) + "\n")
        (out or sys.stdout).flush()
        return True
    except (OSError, ValueError):
        return False


def agent(manual: bool = False) -> int:
    """Run this node's share of a run. The first line on stdin is the spec the head sends; then
    ``stop`` lines; end of input (the SSH link broke) stops the ranks too, except for a manual node
    (its command is pasted in a terminal: it runs until its launcher ends)."""
    fd = sys.stdin.fileno()
    buf = b""
    while b"\n" not in buf:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        buf += chunk
    line, _, buf = buf.partition(b"\n")
    spec = json.loads(line)
    d = workspace.home() / NODE_RUNS / spec["run_id"]
    d.mkdir(parents=True, exist_ok=True)
    cfg = dict(spec["config"], output_dir=str(d / "output"))  # this node's own folder, whatever it was sent
    if cfg.get("logging_dir"):
        cfg["logging_dir"] = str(d / "output" / "runs")
    if spec.get("resume") and spec.get("checkpoint"):
        from core.train import checkpoints

        have = checkpoints.last_complete(d / "output")
        if have is None or have.name != spec["checkpoint"]:
            end = {"event": "exit", "code": 2, "stopped_by": None, "ranks": [],
                   "reason": f"the head resumes from {spec['checkpoint']}, which is not complete in {d / 'output'} "
                             "on this node (its ranks would start from step 0)"}
            print(end["reason"], file=sys.stderr) if manual else _send(end)
            return 2
    workspace.write_json_atomic(d / "config.json", cfg)
    workspace.write_json_atomic(d / "studio.json", spec["meta"])
    for f in d.glob("progress.rank*.json"):
        f.unlink(missing_ok=True)
    par = spec["meta"]["parallel"]
    proc = runs.launch(d, par, bool(spec.get("resume")), env={"PORT_RANGE": spec["port_range"]})
    me = {"pid": proc.pid, "pgid": proc.pid, "pid_start": jobs.proc_start(proc.pid)}
    ranks = [g for g, _ in runs.local_ranks(par)]
    _send({"event": "started", "pid": proc.pid, "dir": str(d), "ranks": ranks})
    stopped_by, last_tick, listening = None, 0.0, not manual

    def ended_by_signal(signum, frame):  # killed, hung up or Ctrl-C: the ranks must not train on unwatched
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, ended_by_signal)
    try:
        code = _watch(proc, me, d, fd, buf, manual, listening)
    except SystemExit:
        jobs.stop_processes(me, runs.STOP_GRACE, also=runs.orphans(d))
        code, stopped_by = proc.wait(), "signal"
    else:
        code, stopped_by = code
    left = runs.orphans(d)
    if left:
        jobs.stop_processes({}, runs.STOP_GRACE, also=left)
    reason = None if code == 0 else runs._failure_reason(d, code)
    end = {"event": "exit", "code": code, "reason": reason, "stopped_by": stopped_by, "ranks": ranks}
    if manual:
        print(f"ended: exit code {code}" + (f" ({reason})" if reason else ""), flush=True)
    else:
        _send(end)
    workspace.write_json_atomic(d / "end.json", end)
    return 0


def _watch(proc, me: dict, d: Path, fd: int, buf: bytes, manual: bool, listening: bool) -> tuple[int, str | None]:
    """The agent's loop: a tick a second, ``stop`` or the end of input stops the ranks; returns
    (the launcher's exit code, who stopped it or None)."""
    stopped_by, last_tick = None, 0.0
    while (code := proc.poll()) is None:
        ready = select.select([fd], [], [], 0.25)[0] if listening else time.sleep(0.25)
        if ready:
            chunk = os.read(fd, 4096)
            buf += chunk
            if not chunk or b"stop" in buf:
                stopped_by = "head" if chunk else "link"
                listening = False
                jobs.stop_processes(me, runs.STOP_GRACE, also=runs.orphans(d))
                continue
        if time.time() - last_tick >= TICK_S:
            last_tick = time.time()
            rep = report(d, me)
            if manual:
                steps = ", ".join(f"rank {r} step {v['step']}" for r, v in sorted(rep["progress"].items()))
                print(f"[{time.strftime('%H:%M:%S')}] {steps or 'starting'} | {rep['last_line']}", flush=True)
            elif not _send({"event": "tick", **rep}):
                stopped_by = "link"
                jobs.stop_processes(me, runs.STOP_GRACE, also=runs.orphans(d))
    return code, stopped_by


# ---------------------------------------------------------------- head side


def node_spec(d: Path, meta: dict, node: nodes.Node, node_rank: int, resume: bool) -> dict:
    """What node ``node_rank`` is sent: the run's config with the head's paths mapped to the node's
    (its workspace), output in its own folder, and the layout with its rank."""
    flat = jobs.read_json(d / "config.json", {}) or {}
    nd = nodes.node_dir(node, d.name)
    cfg = dict(flat)
    for key, _ in nodes.INPUT_KEYS:
        if cfg.get(key) and Path(str(cfg[key])).exists():
            cfg[key] = nodes.node_path(node, str(cfg[key]))
    cfg["output_dir"] = nd + "/output"  # the agent puts its own folder here
    par = {**meta["parallel"], "rank": node_rank}
    if node.head_address:  # the address this node reaches the head by (NAT, another network)
        par["master"] = f"{node.head_address}:{str(par['master']).rpartition(':')[2]}"
    ck = runs.last_checkpoint(d) if resume else None
    node_meta = {k: meta[k] for k in ("run_id", "name", "method") if k in meta}
    node_meta.update(parallel=par, head_run=str(d), node=node.name)
    return {"run_id": d.name, "config": cfg, "meta": node_meta, "resume": resume, "dir": nd,
            "checkpoint": ck.name if ck else None,
            "port_range": meta["parallel"].get("port_range") or nodes.DEFAULT_PORT_RANGE}


def manual_command(d: Path, meta: dict, node: nodes.Node, node_rank: int, resume: bool = False) -> str:
    """The lines a person pastes on a manual node to join the run."""
    spec = node_spec(d, meta, node, node_rank, resume)
    studio = node.studio_dir or "<the studio's folder there>"
    python = node.python or "python"
    home = node.home or "<its workspace>"
    env = "".join(f"{k}={shlex.quote(str(v))} " for k, v in (node.env or {}).items())
    return (f"cd {shlex.quote(studio)} && {env}PADDLE_STUDIO_HOME={shlex.quote(home)} {shlex.quote(python)} "
            f"-m core.train.cluster agent --manual <<'STUDIO_RUN'\n{json.dumps(spec)}\nSTUDIO_RUN\n")


class Agents:
    """The nodes of one running multi-node run, seen from the head's supervisor."""

    def __init__(self, d: Path, meta: dict):
        self.d, self.meta = d, meta
        self.nodes = [nodes.Node.from_dict(x) for x in meta.get("nodes", [])]
        self.procs: dict[str, subprocess.Popen] = {}
        self.state: dict[str, dict] = {}
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.stop_sent = False
        self.summary = ""
        (d / "nodes").mkdir(exist_ok=True)

    def launcher_env(self) -> dict:
        return {"PORT_RANGE": self.meta["parallel"].get("port_range") or nodes.DEFAULT_PORT_RANGE}

    def _record(self, name: str, **fields) -> None:
        with self.lock:
            st = self.state.setdefault(name, {"node": name})
            st.update(fields, updated=time.time())
            snapshot = dict(st)
        try:
            workspace.write_json_atomic(self.d / "nodes" / f"{name}.json", snapshot)
        except OSError:
            pass

    def start(self, resume: bool) -> None:
        for f in (self.d / "nodes").glob("*.json"):
            f.unlink(missing_ok=True)
        for f in self.d.glob("progress.rank*.json"):
            f.unlink(missing_ok=True)
        (self.d / STACKS).unlink(missing_ok=True)
        for i, node in enumerate(self.nodes, start=1):
            ranks = [g for g, _ in runs.local_ranks({**self.meta["parallel"], "rank": i})]
            if node.kind == "manual":
                cmd = manual_command(self.d, self.meta, node, i, resume)
                workspace.write_text_atomic(self.d / "nodes" / f"{node.name}.command.sh", cmd)
                self._record(node.name, state="manual", ranks=ranks, label=node.label())
                continue
            spec = node_spec(self.d, self.meta, node, i, resume)
            self._record(node.name, state="starting", ranks=ranks, label=node.label(), dir=spec["dir"])
            try:
                if resume:
                    self._send_checkpoint(node, spec["dir"])
                err = open(self.d / "nodes" / f"{node.name}.ssh.log", "ab")
                # stdout is the agent's stream of JSON lines: a thread of its own reads it from the first
                # line to its end (_read); what ssh says goes to a file
                p = subprocess.Popen(nodes.ssh_argv(node, "agent", module="core.train.cluster"), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=err, start_new_session=True)
                err.close()
                p.stdin.write((json.dumps(spec) + "\n").encode())
                p.stdin.flush()
            except (OSError, nodes.NodeError) as e:
                self._record(node.name, state="lost", reason=f"could not start there: {e}")
                continue
            self.procs[node.name] = p
            t = threading.Thread(target=self._read, args=(node, p), daemon=True)
            t.start()
            self.threads.append(t)

    def _send_checkpoint(self, node: nodes.Node, nd: str) -> None:
        """Resume: every rank loads the checkpoint from its own output folder; the head's last
        complete one is copied to the node first (once per checkpoint)."""
        from core.train import checkpoints

        ck = runs.last_checkpoint(self.d)
        if ck is None:
            return
        dest = f"{nd}/output/{ck.name}"
        there = nodes.call(node, "probe", request={"paths": [f"{dest}/{checkpoints.MARKER}"]})
        if (there.get("paths") or {}).get(f"{dest}/{checkpoints.MARKER}") == "ok":
            return  # sent at an earlier resume, complete
        nodes.copy_to(node, str(ck), dest=dest, replace=True)

    def _read(self, node: nodes.Node, p: subprocess.Popen) -> None:
        ended = False
        for raw in p.stdout:
            try:
                ev = json.loads(raw)
            except ValueError:
                continue
            kind = ev.pop("event", "")
            if kind == "started":
                self._record(node.name, state="running", pid=ev.get("pid"), dir=ev.get("dir"))
            elif kind == "tick":
                self._record(node.name, state="running", seen=time.time(), **ev)
            elif kind == "exit":
                ended = True
                code = ev.get("code")
                state = "stopped" if ev.get("stopped_by") else "succeeded" if code == 0 else "failed"
                self._record(node.name, state=state, exit_code=code, reason=ev.get("reason"))
        code = p.wait()
        if not ended:
            tail = (self.d / "nodes" / f"{node.name}.ssh.log").read_bytes()[-400:].decode(errors="replace").strip()
            why = tail.splitlines()[-1] if tail else f"ssh exit code {code}"
            self._record(node.name, state="lost", reason=f"the SSH link ended without the node's report ({why}): the "
                                                          "node went down, its network broke or its agent was killed")

    def failed(self) -> str | None:
        """The first node that failed or was lost while the run trains (None while all is well)."""
        with self.lock:
            for name, st in self.state.items():
                if st.get("state") in ("failed", "lost") or (st.get("state") == "succeeded" and st.get("exit_code")):
                    return name
        return None

    def stop(self) -> None:
        if self.stop_sent:
            return
        self.stop_sent = True
        for p in self.procs.values():
            try:
                p.stdin.write(b"stop\n")
                p.stdin.flush()
            except (OSError, ValueError):
                pass

    def last_activity(self) -> float:
        newest = 0.0
        with self.lock:
            for st in self.state.values():
                if st.get("seen") and st.get("activity_age") is not None:
                    newest = max(newest, st["seen"] - st["activity_age"])
                elif st.get("updated"):
                    newest = max(newest, st["updated"])
        return newest

    def diagnose(self) -> dict:
        res = diagnose(self.d, self.meta)
        self.summary = res.get("summary", "")
        return res

    def stacks_summary(self) -> str:
        return self.summary

    def finish(self, wait_first: float = 0.0, wait: float = runs.STOP_GRACE + 12) -> dict:
        """Stop every node still running and wait for its last word (or end its link); after a
        run that ended well here, first give the nodes ``wait_first`` seconds to end by themselves."""
        deadline = time.time() + wait_first
        for t in self.threads:
            t.join(max(0.0, deadline - time.time()))
        self.stop()
        deadline = time.time() + wait
        for t in self.threads:
            t.join(max(0.0, deadline - time.time()))
        for p in self.procs.values():
            if p.poll() is None:
                try:  # the agent stops its ranks when its input ends
                    p.stdin.close()
                except OSError:
                    pass
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
        with self.lock:
            states = {k: dict(v) for k, v in self.state.items()}
        return {"nodes": states, "failed": [k for k, v in states.items() if v.get("state") in ("failed", "lost")]}

    def blame(self, head_reason: str | None, ends: dict) -> str:
        """The run's reason, cause first: a rank that died or erred, then a node lost, then ranks
        that lost a peer (gloo timeout), then ranks ended by SIGTERM after another failed."""
        parts = []
        head_ranks = ", ".join(str(g) for g, _ in runs.local_ranks({**self.meta["parallel"], "rank": 0}))
        if head_reason:
            parts.append((_blame(head_reason), f"head (this machine, rank {head_ranks}): {head_reason}"))
        for name, st in ends["nodes"].items():
            # a node stopped after the head failed still counts when its own ranks had failed first
            if st.get("state") in ("failed", "lost") or (st.get("reason") and _blame(st["reason"]) < 2):
                ranks = ", ".join(map(str, st.get("ranks") or []))
                text = st.get("reason") or f"exit code {st.get('exit_code')}"
                parts.append((_blame(text) if st.get("state") != "lost" else 1,
                              f"node {st.get('label') or name} (rank {ranks}): {text}"))
        parts.sort(key=lambda x: x[0])
        return "; ".join(p for _, p in parts)[:900] or (head_reason or "")


def _blame(text: str) -> int:
    """How much a machine's reason is a cause (0) rather than a consequence: its most causal part
    (a node's reason lists its ranks, "rank 3: RuntimeError …; rank 2: ended by SIGTERM …")."""
    def one(part: str) -> int:
        if runs.TERM_NOTE in part or "ended by SIGTERM" in part:
            return 3
        if "lost contact with" in part or "gloo timeout" in part.lower():
            return 2
        return 0
    return min(one(part) for part in text.split("; ")) if text else 3


def supervise(d: Path, resume: bool) -> int:
    meta = jobs.read_json(d / "studio.json")
    return runs.supervise(d, resume, nodes=Agents(d, meta))


# ---------------------------------------------------------------- reading a run across nodes


def diagnose(d: Path, meta: dict | None = None, timeout: float = 20) -> dict:
    """The hang doctor: every rank of the run on every machine, at once, says where it is; written
    to the run's stacks.json. Returns {"time", "ranks": {rank: {node, state, where, text}}, "summary"}."""
    meta = meta or jobs.read_json(d / "studio.json", {}) or {}
    par = meta.get("parallel", {})
    found: dict[str, dict] = {}

    def head():
        for r, v in stacks(d, [g for g, _ in runs.local_ranks({**par, "rank": 0})]).items():
            found[r] = {"node": nodes.HEAD, **v}

    def remote(i: int, node: nodes.Node):
        expected = [g for g, _ in runs.local_ranks({**par, "rank": i})]
        if node.kind == "manual":
            for r in expected:
                found[str(r)] = {"node": node.name, "state": "unknown", "where": "a manual node: not reachable from here"}
            return
        nd = nodes.node_dir(node, d.name)
        try:
            ans = nodes.call(node, "stacks", nd, json.dumps(expected), module="core.train.cluster", timeout=timeout)
            for r, v in ans.get("ranks", {}).items():
                found[r] = {"node": node.name, **v}
        except nodes.NodeError as e:
            for r in expected:
                found[str(r)] = {"node": node.name, "state": "unreachable", "where": f"node unreachable: {e}"}

    threads = [threading.Thread(target=head)]
    threads += [threading.Thread(target=remote, args=(i, nodes.Node.from_dict(n)))
                for i, n in enumerate(meta.get("nodes", []), start=1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 5)
    ranks = {k: found[k] for k in sorted(found, key=int)}
    summary = "; ".join(f"rank {r} ({v['node']}): {v['where']}" for r, v in ranks.items())
    res = {"time": time.time(), "ranks": ranks, "summary": summary}
    try:
        workspace.write_json_atomic(d / STACKS, res)
    except OSError:
        pass
    return res


def doctor(run_id: str) -> dict:
    """"Why is it stuck?": where every rank of a running run is now."""
    d = runs.run_dir(run_id)
    if runs.status(d).get("state") != "running":
        raise ValueError(f"run {run_id} is not running: nothing to diagnose")
    return diagnose(d)


def last_diagnosis(run_id_or_dir) -> dict | None:
    d = run_id_or_dir if isinstance(run_id_or_dir, Path) else runs.run_dir(run_id_or_dir)
    return jobs.read_json(d / STACKS, None)


def strip(run_id_or_dir) -> list[dict]:
    """One row per machine of a multi-node run (the head first): node, ranks, state, step, last log
    line, memory; [] for a one-machine run."""
    d = run_id_or_dir if isinstance(run_id_or_dir, Path) else runs.run_dir(run_id_or_dir)
    meta = jobs.read_json(d / "studio.json", {}) or {}
    if not meta.get("nodes"):
        return []
    par = meta["parallel"]
    st = runs.status(d)
    rep = report(d, st if st.get("state") == "running" else None)
    steps = [v.get("step") for v in rep["progress"].values() if v.get("step") is not None]
    rows = [{"node": nodes.HEAD, "label": "head (this machine)", "ranks": [g for g, _ in runs.local_ranks({**par, "rank": 0})],
             "state": st.get("state"), "step": max(steps) if steps else None, "last_line": rep["last_line"],
             "rss": rep["rss"] if st.get("state") == "running" else None}]
    for i, n in enumerate(meta["nodes"], start=1):
        rec = jobs.read_json(d / "nodes" / f"{n['name']}.json", {}) or {}
        nsteps = [v.get("step") for v in (rec.get("progress") or {}).values() if v.get("step") is not None]
        rows.append({"node": n["name"], "label": rec.get("label") or n["name"],
                     "ranks": [g for g, _ in runs.local_ranks({**par, "rank": i})],
                     "state": rec.get("state") or ("queued" if st.get("state") == "queued" else "-"),
                     "step": max(nsteps) if nsteps else None, "last_line": rec.get("last_line") or rec.get("reason") or "",
                     "rss": rec.get("rss") if rec.get("state") == "running" else None,
                     "command": (d / "nodes" / f"{n['name']}.command.sh").read_text()
                     if (d / "nodes" / f"{n['name']}.command.sh").is_file() else None})
    return rows


def node_log(run_id: str, node_name: str, max_bytes: int = 20000) -> str:
    """A node's own training log (its first rank's), fetched over SSH when asked."""
    d = runs.run_dir(run_id)
    if node_name == nodes.HEAD:
        return runs.tail_log(d, max_bytes)
    meta = jobs.read_json(d / "studio.json", {}) or {}
    for n in meta.get("nodes", []):
        if n["name"] == node_name:
            node = nodes.Node.from_dict(n)
            if node.kind == "manual":
                raise nodes.NodeError("manual", f"{node_name} is a manual node: its log stays in its terminal")
            nd = nodes.node_dir(node, d.name)
            return nodes.call(node, "log", nd, str(max_bytes), module="core.train.cluster", timeout=20)["text"]
    raise nodes.NodeError("no_node", f"run {run_id} has no node {node_name!r}")


def pick_master(cfg) -> str:
    """The run's master HOST:PORT: as given, else this machine's address towards the first SSH
    node and the first port of the run's range free here. ValueError when there is none."""
    p = cfg.parallel
    if p.master:
        return p.master
    a, b = nodes.parse_port_range(p.port_range or nodes.DEFAULT_PORT_RANGE)
    known = {n.name: n for n in nodes.list_nodes()}  # an unknown name is the preflight's to report
    first = next((known[x] for x in p.node_names() if x in known and known[x].kind == "ssh"), None)
    host = nodes.head_address_towards(first.host) if first else "127.0.0.1"
    return f"{host}:{nodes.free_port_in(a, b)}"


def create(cfg, master: str | None = None) -> str:
    """Create a run over this machine and the nodes ``cfg.parallel.nodes`` names (core.train.runs
    .create with the layout filled in: nnodes, the master address and port (``master``: the one
    the preflight checked), the port range, the stall window, and a copy of each node's settings
    as they are now)."""
    p = cfg.parallel
    found = [nodes.get(n) for n in p.node_names()]
    a, b = nodes.parse_port_range(p.port_range or nodes.DEFAULT_PORT_RANGE)
    p.master = master or pick_master(cfg)
    p.port_range = f"{a}:{b}"
    p.nnodes, p.rank = 1 + len(found), 0
    if p.stall_timeout == 1800:  # the field's default: a multi-node run should not hang half an hour
        p.stall_timeout = MULTINODE_STALL
    run_id = runs.create(cfg)
    d = runs.run_dir(run_id)
    meta = jobs.read_json(d / "studio.json")
    meta["nodes"] = [asdict(n) for n in found]
    workspace.write_json_atomic(d / "studio.json", meta)
    return run_id


def preflight(cfg) -> dict:
    """The config's own check, then every node (nodes.preflight), all problems at once; "master"
    is the address checked (pass it to create)."""
    from core.train import config

    problems = [{"node": nodes.HEAD, "code": p["code"], "message": config.check_message(p)} for p in config.check(cfg)]
    par = cfg.to_dict()["parallel"]
    try:
        par["master"] = pick_master(cfg)
    except (ValueError, nodes.NodeError) as e:
        problems.append({"node": nodes.HEAD, "code": "bad_port_range", "message": str(e)})
    flat = cfg.to_paddlenlp(output_dir=str(workspace.runs_dir() / "<run>" / "output"))
    res = nodes.preflight(flat, par, cfg.parallel.node_names())
    res["problems"] = problems + res["problems"]
    res["ok"] = res["ok"] and not problems
    res["master"] = par.get("master")
    return res


def main(argv: list[str]) -> int:
    verb = argv[0] if argv else ""
    if verb == "supervise" and len(argv) >= 2:
        return supervise(Path(argv[1]), "--resume" in argv)
    if verb == "agent":
        return agent(manual="--manual" in argv)
    if verb == "stacks" and len(argv) >= 2:
        expected = json.loads(argv[2]) if len(argv) > 2 else []
        print(json.dumps({"ranks": stacks(Path(argv[1]), expected)}))
        return 0
    if verb == "log" and len(argv) >= 2:
        d, n = Path(argv[1]), int(argv[2]) if len(argv) > 2 else 20000
        print(json.dumps({"text": runs.tail_log(d, n) if d.is_dir() else ""}))
        return 0
    sys.stderr.write("usage: python -m core.train.cluster supervise RUN_DIR [--resume] | agent [--manual] | "
                     "stacks NODE_RUN_DIR [RANKS] | log NODE_RUN_DIR [BYTES]\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
