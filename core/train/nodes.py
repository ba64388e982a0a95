"""Nodes: the other machines a multi-node run spans, as the studio knows them, and the checks
made on all of them before a run starts (preflight).

A node is a host reached over SSH (host, port, user, key file) where the studio is installed too
(its python, its folder, its own workspace), or a *manual* node: one the studio cannot reach, for
which it prints the command to paste there. The machine the studio runs on is the *head*: it holds
global rank 0 (metrics, checkpoints, outputs) and the run's folder. Nodes are kept in
``$PADDLE_STUDIO_HOME/nodes.json``.

Everything a node is asked runs as ``python -m core.train.nodes VERB`` there over ``ssh`` (no
paddle import: a probe answers in well under a second). ``core.train.cluster`` runs and watches
the ranks on the nodes; this module only knows nodes and checks them.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from core import jobs, system, workspace

NODES_FILE = "nodes.json"
KINDS = ("ssh", "manual")
HEAD = "head"
STUDIO_DIR = Path(__file__).resolve().parents[2]
SSH_TIMEOUT = 8  # seconds for an SSH connection to be made
DEFAULT_PORT_RANGE = "36000:36199"
NODE_DISK_BYTES = 64 << 20  # a node writes logs only (outputs are saved on the head, global rank 0)
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
INPUT_KEYS = (("model_name_or_path", "model"), ("tokenizer_name_or_path", "tokenizer"),
              ("dataset_name_or_path", "dataset"), ("train_dataset_path", "train data"), ("dev_dataset_path", "dev data"))
NODE_RUNS = "node-runs"  # a node's share of a run: <node workspace>/node-runs/<run id>/


class NodeError(ValueError):
    """A node that cannot be saved or used: ``code`` and ``field`` for the page."""

    def __init__(self, code: str, message: str, field: str = ""):
        super().__init__(message)
        self.code, self.field = code, field


@dataclass
class Node:
    name: str
    kind: str = "ssh"
    host: str = ""
    port: int = 22
    user: str = ""
    key_file: str = ""
    python: str = ""  # the studio's python on that node (its venv)
    studio_dir: str = ""  # where the studio is installed there
    home: str = ""  # the node's workspace (its PADDLE_STUDIO_HOME)
    env: dict = field(default_factory=dict)  # e.g. GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME, PYTHONPATH
    head_address: str = ""  # how this node reaches the head, when not by the run's master host

    @classmethod
    def from_dict(cls, d: dict) -> "Node":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise NodeError("unknown_key", f"unknown node field(s): {', '.join(unknown)}", unknown[0])
        return cls(**d)

    def label(self) -> str:
        return f"{self.name} ({self.user + '@' if self.user else ''}{self.host}:{self.port})" if self.kind == "ssh" \
            else f"{self.name} (manual)"


# ---------------------------------------------------------------- the list


def _file() -> Path:
    return workspace.home() / NODES_FILE


def list_nodes() -> list[Node]:
    raw = jobs.read_json(_file(), {}) or {}
    out = []
    for d in raw.get("nodes", []):
        try:
            out.append(Node.from_dict(d))
        except (NodeError, TypeError):
            continue
    return out


def get(name: str) -> Node:
    for n in list_nodes():
        if n.name == name:
            return n
    raise NodeError("no_node", f"no node named {name!r} (add it in the Cluster tab or with `paddle-studio nodes add`)",
                    "name")


def validate(node: Node) -> None:
    code = workspace.check_name(node.name)
    if code or node.name == HEAD:
        raise NodeError("bad_name", f"{node.name!r} is not a usable node name (letters, digits, _ . -; not 'head')",
                        "name")
    if node.kind not in KINDS:
        raise NodeError("bad_kind", f"kind must be one of {', '.join(KINDS)}, not {node.kind!r}", "kind")
    if not isinstance(node.env, dict) or any(not _ENV_KEY.fullmatch(str(k)) for k in node.env) \
            or any("\n" in str(v) or "\0" in str(v) for v in node.env.values()):
        raise NodeError("bad_env", "env must be NAME=value pairs (NAME: letters, digits, _)", "env")
    if node.kind == "manual":
        return
    if node.head_address and not re.fullmatch(r"[A-Za-z0-9_.:\-\[\]]+", node.head_address):
        raise NodeError("bad_host", f"head address {node.head_address!r} is not a host name or address", "head_address")
    if not node.host or any(c.isspace() for c in node.host) or node.host.startswith("-"):
        raise NodeError("bad_host", f"host {node.host!r} is not a host name or address", "host")
    if isinstance(node.port, bool) or not isinstance(node.port, int) or not 0 < node.port < 65536:
        raise NodeError("bad_port", f"SSH port must be 1-65535, not {node.port!r}", "port")
    if node.user and not re.fullmatch(r"[A-Za-z0-9_.][A-Za-z0-9_.\-]*", node.user):
        raise NodeError("bad_user", f"user {node.user!r} is not a user name", "user")
    if node.key_file and not Path(node.key_file).expanduser().is_file():
        raise NodeError("no_key", f"key file {node.key_file} does not exist on this machine", "key_file")
    for f in ("python", "studio_dir", "home"):
        if not str(getattr(node, f) or "").startswith("/"):
            raise NodeError("not_absolute", f"{f} must be an absolute path on the node, not {getattr(node, f)!r}", f)


def save(node: Node | dict, replace: str | None = None) -> Node:
    """Add a node, or replace the one named ``replace`` (an edit; the name may change)."""
    node = node if isinstance(node, Node) else Node.from_dict(node)
    if isinstance(node.port, str) and node.port.strip().isdigit():
        node.port = int(node.port)
    validate(node)
    nodes = list_nodes()
    if replace is None and any(n.name == node.name for n in nodes):
        raise NodeError("exists", f"a node named {node.name!r} exists already: edit it, or pick another name", "name")
    if replace is not None and node.name != replace and any(n.name == node.name for n in nodes):
        raise NodeError("exists", f"a node named {node.name!r} exists already", "name")
    kept = [n for n in nodes if n.name != (replace if replace is not None else node.name)]
    kept.append(node)
    workspace.write_json_atomic(_file(), {"nodes": [asdict(n) for n in sorted(kept, key=lambda n: n.name)]})
    return node


def remove(name: str) -> None:
    nodes = list_nodes()
    if not any(n.name == name for n in nodes):
        raise NodeError("no_node", f"no node named {name!r}", "name")
    workspace.write_json_atomic(_file(), {"nodes": [asdict(n) for n in nodes if n.name != name]})


# ---------------------------------------------------------------- reaching a node


def _known_hosts() -> Path:
    return workspace.home() / "nodes.known_hosts"


def ssh_base(node: Node) -> list[str]:
    """ssh with no prompt ever (a prompt would hang a run): keys only, a host key learnt on first
    contact and checked after (kept in the workspace), keep-alives so a dead link is noticed."""
    argv = ["ssh", "-p", str(node.port), "-o", "BatchMode=yes", "-o", f"ConnectTimeout={SSH_TIMEOUT}",
            "-o", "StrictHostKeyChecking=accept-new", "-o", f"UserKnownHostsFile={_known_hosts()}",
            "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", "-o", "LogLevel=ERROR"]
    if node.key_file:
        argv += ["-i", str(Path(node.key_file).expanduser()), "-o", "IdentitiesOnly=yes"]
    return argv + [f"{node.user}@{node.host}" if node.user else node.host]


def node_command(node: Node, *args: str, module: str = "core.train.nodes") -> str:
    """The shell line that runs ``python -m MODULE ARGS`` in the studio on ``node``."""
    env = {**{str(k): str(v) for k, v in (node.env or {}).items()},
           "PADDLE_STUDIO_HOME": node.home, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = node.studio_dir + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return (f"cd {shlex.quote(node.studio_dir)} && exec env {assigns} {shlex.quote(node.python)} "
            f"-m {module} {' '.join(shlex.quote(a) for a in args)}")


def ssh_argv(node: Node, *args: str, module: str = "core.train.nodes") -> list[str]:
    return ssh_base(node) + ["--", node_command(node, *args, module=module)]


def _ssh_error(stderr: str, code: int) -> str:
    lines = [x.strip() for x in (stderr or "").strip().splitlines() if x.strip()]
    last = lines[-1] if lines else f"ssh exit code {code}"
    if code == 255:
        return f"cannot reach it over SSH: {last}"
    return last[:300]


def call(node: Node, *args: str, request: dict | None = None, timeout: float = 30,
         module: str = "core.train.nodes") -> dict:
    """Run a node verb over SSH and return the JSON object it prints; NodeError when it cannot."""
    try:
        r = subprocess.run(ssh_argv(node, *args, module=module), input=json.dumps(request or {}), capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise NodeError("timeout", f"no answer in {timeout:.0f} s") from None
    except OSError as e:
        raise NodeError("no_ssh", f"cannot run ssh here: {e}") from None
    if r.returncode != 0:
        raise NodeError("unreachable", _ssh_error(r.stderr, r.returncode))
    for line in reversed(r.stdout.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    raise NodeError("bad_answer", "the node answered no JSON: is the studio installed at "
                                  f"{node.studio_dir} with python {node.python}? {r.stderr.strip()[-200:]}")


# ---------------------------------------------------------------- what a machine says of itself


def studio_hash(root: Path = STUDIO_DIR) -> str:
    """A short hash of the studio's engine (core/**.py): two machines with the same hash run the same code."""
    h = hashlib.sha256()
    for f in sorted((root / "core").rglob("*.py")):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def versions() -> dict:
    return {"python": ".".join(platform.python_version_tuple()[:2]),
            "paddle": system.version("paddlepaddle-gpu") or system.version("paddlepaddle"),
            "paddlenlp": system.version("paddlenlp"), "studio": studio_hash()}


def path_state(p: str) -> str:
    path = Path(p)
    if not path.exists():
        return "missing"
    if not os.access(path, os.R_OK) or (path.is_dir() and not os.access(path, os.X_OK)):
        return "unreadable"
    return "ok"


def free_bytes(p: Path) -> int | None:
    p = Path(p)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def try_connect(host: str, port: int, timeout: float = 3.0) -> str:
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
        return "ok"
    except OSError as e:
        return e.strerror or str(e) or type(e).__name__


def probe(request: dict) -> dict:
    """What this machine is (versions, CPUs, GPUs, free disk), which of ``paths`` it can read,
    and whether it reaches ``connect`` = [host, port]."""
    home = workspace.home()
    out = {"versions": versions(), "cpus": os.cpu_count() or 1, "gpus": len(system.gpus()), "home": str(home),
           "free_bytes": free_bytes(home), "paths": {p: path_state(p) for p in request.get("paths", [])}}
    if request.get("connect"):
        host, port = request["connect"]
        out["connect"] = try_connect(host, port)
    return out


# ---------------------------------------------------------------- paths on a node


def node_path(node: Node, p: str) -> str:
    """Where ``p`` (a path on the head) is on ``node``: under the node's workspace when it is under
    the head's, else the same path (shared storage)."""
    try:
        rel = Path(p).resolve().relative_to(workspace.home().resolve())
    except ValueError:
        try:
            rel = Path(p).relative_to(workspace.home())
        except ValueError:
            return str(p)
    return str(Path(node.home) / rel)


def node_dir(node: Node, run_id: str) -> str:
    """Where ``node`` keeps its share of run ``run_id``."""
    return f"{(node.home or '.').rstrip('/')}/{NODE_RUNS}/{run_id}"


def run_paths(flat: dict) -> dict[str, str]:
    """The inputs a run reads: {what: path on the head}, for those that are local paths."""
    out = {}
    for key, what in INPUT_KEYS:
        p = flat.get(key)
        if p and Path(str(p)).exists() and (what != "tokenizer" or p != flat.get("model_name_or_path")):
            out[what] = str(p)
    return out


def per_node(parallel: dict) -> int:
    """Processes on each machine: len(devices) on GPUs, else nproc."""
    if parallel.get("devices"):
        return len([x for x in str(parallel["devices"]).split(",") if x.strip()])
    return int(parallel.get("nproc", 1) or 1)


def folder_bytes(p: Path) -> int:
    total = 0
    for root, _, files in os.walk(p, followlinks=True):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


# ---------------------------------------------------------------- ports


def parse_port_range(text: str) -> tuple[int, int]:
    """'36000-36199' or '36000:36199' -> (36000, 36199); ValueError with the reason."""
    m = re.fullmatch(r"\s*(\d{2,5})\s*[-:]\s*(\d{2,5})\s*", str(text or ""))
    if not m:
        raise ValueError(f"a port range is FIRST-LAST, e.g. 36000-36199, not {text!r}")
    a, b = int(m.group(1)), int(m.group(2))
    if not (1024 <= a < b <= 65535):
        raise ValueError(f"port range {a}-{b}: ports 1024-65535, the first below the last")
    if b - a < 8:
        raise ValueError(f"port range {a}-{b} is too small: the launcher takes a port per process and a few of its own "
                         "(at least 9 ports)")
    return a, b


def free_port_in(a: int, b: int, host: str = "") -> int:
    for port in range(a, b + 1):
        with socket.socket() as s:
            try:
                s.bind((host, port))
                return port
            except OSError:
                continue
    raise ValueError(f"no free port in {a}-{b} on this machine")


def head_address_towards(host: str) -> str:
    """The address of this machine on the route to ``host`` (what a node reaches the head by)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((socket.gethostbyname(host), 9))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


# ---------------------------------------------------------------- preflight


def _problem(node: str, code: str, message: str) -> dict:
    return {"node": node, "code": code, "message": message}


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} TB"


def preflight(flat: dict, parallel: dict, node_names: list[str], timeout: float = 30) -> dict:
    """Check every node at once before a run spans them; every problem is listed with its node.
    ``parallel`` holds nproc/devices, master (host:port of the head), port_range. Returns
    {"ok", "problems": [{node, code, message}], "nodes": {name: probe}}."""
    problems: list[dict] = []
    nodes: list[Node] = []
    for name in node_names:
        try:
            nodes.append(get(name))
        except NodeError as e:
            problems.append(_problem(name, e.code, str(e)))
    if len(set(node_names)) != len(node_names):
        problems.append(_problem(HEAD, "duplicate_node", "a node is named twice: each machine takes one node rank"))
    here = probe({"paths": list(run_paths(flat).values())})
    per = per_node(parallel)
    inputs = run_paths(flat)
    need_head = NODE_DISK_BYTES + 3 * sum(folder_bytes(Path(p)) for w, p in inputs.items() if w == "model")
    if here["free_bytes"] is not None and here["free_bytes"] < need_head:
        problems.append(_problem(HEAD, "disk", f"{_fmt_bytes(here['free_bytes'])} free in {here['home']}; checkpoints of "
                                               f"this model need about {_fmt_bytes(need_head)}"))
    master = str(parallel.get("master") or "")
    host, _, port = master.rpartition(":")
    listener = None
    if not host or not port.isdigit():
        problems.append(_problem(HEAD, "bad_master", f"master must be HOST:PORT, not {master!r}"))
    else:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((host, int(port)))
            listener.listen(64)
        except (OSError, OverflowError) as e:
            problems.append(_problem(HEAD, "master_port_busy",
                                     f"cannot listen on {host}:{port} here ({e.strerror or e}): another program holds "
                                     "the port, or this machine does not have that address"))
            listener.close()
            listener = None
    stop = threading.Event()

    def accept():
        while listener is not None and not stop.is_set():
            try:
                listener.settimeout(0.2)
                c, _ = listener.accept()
            except OSError:
                continue
            # the node closes first: the wait after a close (TIME_WAIT) stays on its side, and the
            # head's port is free for the run's launcher at once
            c.settimeout(5)
            try:
                while c.recv(64):
                    pass
            except OSError:
                pass
            c.close()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()

    def check(node: Node) -> tuple[Node, dict | None, list[dict]]:
        found: list[dict] = []
        if node.kind == "manual":
            return node, None, [_problem(node.name, "manual_unchecked", "a manual node cannot be checked from here: "
                                                                       "run its command there and watch its output")]
        req = {"paths": [node_path(node, p) for p in inputs.values()]}
        if listener is not None:
            req["connect"] = [node.head_address or host, int(port)]
        try:
            info = call(node, "probe", request=req, timeout=timeout)
        except NodeError as e:
            return node, None, [_problem(node.name, e.code, str(e))]
        for k in ("python", "paddle", "paddlenlp", "studio"):
            mine, theirs = here["versions"].get(k), info["versions"].get(k)
            if mine != theirs:
                what = {"studio": "studio code (hash of core/)", "python": "python"}.get(k, k)
                found.append(_problem(node.name, "version_differs",
                                      f"{what} {theirs or 'missing'} there, {mine} on the head: install the same version"))
        for (what, p), q in zip(inputs.items(), req["paths"]):
            state = info["paths"].get(q, "missing")
            if state != "ok":
                found.append(_problem(node.name, "path_" + state,
                                      f"{what} {q} is {state} there: copy it (Copy to nodes / `paddle-studio nodes copy`) "
                                      "or put it on storage every node mounts"))
        if parallel.get("devices"):
            if info["gpus"] < per:
                found.append(_problem(node.name, "devices", f"{per} GPU(s) per node asked, {info['gpus']} there"))
        elif per > info["cpus"]:
            found.append(_problem(node.name, "devices", f"{per} processes per node asked, {info['cpus']} CPU core(s) there"))
        if info.get("free_bytes") is not None and info["free_bytes"] < NODE_DISK_BYTES:
            found.append(_problem(node.name, "disk", f"{_fmt_bytes(info['free_bytes'])} free in {info['home']} "
                                                     f"(logs need about {_fmt_bytes(NODE_DISK_BYTES)})"))
        if req.get("connect") and info.get("connect") != "ok":
            a, b = req["connect"]
            rng = parallel.get("port_range") or DEFAULT_PORT_RANGE
            found.append(_problem(node.name, "master_unreachable",
                                  f"cannot reach the head at {a}:{b} ({info.get('connect')}): open ports {rng} on the "
                                  "head's firewall, or set the address this node reaches the head by"))
        return node, info, found

    infos = {}
    try:
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(nodes)))) as pool:
            for node, info, found in pool.map(check, nodes):
                problems.extend(found)
                if info is not None:
                    infos[node.name] = info
    finally:
        stop.set()
        if listener is not None:
            listener.close()
    return {"ok": not [p for p in problems if p["code"] != "manual_unchecked"], "problems": problems,
            "nodes": infos, "head": here}


def test_node(name: str) -> dict:
    """The Cluster tab's "Test": reach the node, compare its versions with this machine's."""
    node = get(name)
    if node.kind == "manual":
        raise NodeError("manual", "a manual node is not reached from here")
    info = call(node, "probe", request={"paths": [node.home]})
    mine = versions()
    differs = {k: (info["versions"].get(k), mine.get(k)) for k in mine if info["versions"].get(k) != mine.get(k)}
    return {"node": name, **info, "differs": differs}


# ---------------------------------------------------------------- copying inputs to a node


def copy_to(node: Node, src: str, progress=None, dest: str | None = None, replace: bool = False) -> dict:
    """Copy the folder or file ``src`` (on the head) to where the run will read it on ``node``: a tar
    stream over SSH into a temporary folder there, renamed into place only once both ends said the
    whole archive went through (``replace``: an existing ``dest`` is removed first, e.g. a
    checkpoint folder whose copy did not complete)."""
    src_p = Path(src).resolve()
    dest = Path(dest or node_path(node, src))
    total = folder_bytes(src_p) if src_p.is_dir() else src_p.stat().st_size
    tmp = f"{dest.parent}/.incoming-{os.getpid()}-{threading.get_ident()}-{dest.name}"
    q = shlex.quote
    receive = f"set -e; rm -rf {q(tmp)}; mkdir -p {q(tmp)}; tar -C {q(tmp)} -xf -"
    err_file, ssh_err = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # what either says, never a pipe left unread
    # tar's stdout is the archive itself: read to its end by the loop below, which feeds ssh and counts the bytes
    tar = subprocess.Popen(["tar", "-C", str(src_p.parent), "-chf", "-", src_p.name], stdout=subprocess.PIPE,
                           stderr=err_file)
    ssh = subprocess.Popen(ssh_base(node) + ["--", receive], stdin=subprocess.PIPE, stderr=ssh_err)
    sent = 0
    try:
        while chunk := tar.stdout.read(1 << 20):
            ssh.stdin.write(chunk)
            sent += len(chunk)
            if progress:
                progress(min(sent, total), total)
        ssh.stdin.close()
    except (BrokenPipeError, OSError):
        tar.kill()  # the node stopped reading: a tar blocked on its pipe would never end
    finally:
        tar.stdout.close()
    tar_code = tar.wait()
    code = ssh.wait()
    ssh_err.seek(0)
    err = ssh_err.read().decode(errors="replace")
    ssh_err.close()
    err_file.seek(0)
    tar_err = err_file.read().decode(errors="replace").strip()
    err_file.close()
    if code != 0 or tar_code != 0:
        subprocess.run(ssh_base(node) + ["--", f"rm -rf {q(tmp)}"], capture_output=True, timeout=60)
        if tar_code != 0 and code == 0:
            raise NodeError("copy_failed", f"reading {src} here failed ({tar_err.splitlines()[-1] if tar_err else tar_code}):"
                                           " nothing was put in place on the node")
        raise NodeError("copy_failed", f"copying {src} to {node.name}:{dest} failed: {_ssh_error(err, code)}")
    place = (f"set -e; {'rm -rf ' + q(str(dest)) + '; ' if replace else ''}"
             f"if [ -e {q(str(dest))} ]; then rm -rf {q(tmp)}; exit 3; fi; "
             f"mv {q(tmp)}/{q(src_p.name)} {q(str(dest))}; rmdir {q(tmp)}")
    r = subprocess.run(ssh_base(node) + ["--", place], capture_output=True, text=True, timeout=120)
    if r.returncode == 3:
        raise NodeError("exists", f"{dest} appeared on {node.name} meanwhile; nothing was overwritten")
    if r.returncode != 0:
        raise NodeError("copy_failed", f"putting {dest} in place on {node.name} failed: {_ssh_error(r.stderr, r.returncode)}")
    return {"node": node.name, "src": str(src), "dest": str(dest), "bytes": total}


def copy_missing(flat: dict, node_names: list[str], progress=None) -> list[dict]:
    """Copy each input of the run that a node lacks (model, tokenizer, dataset) to that node."""
    done = []
    inputs = run_paths(flat)
    for name in node_names:
        node = get(name)
        if node.kind != "ssh":
            continue
        info = call(node, "probe", request={"paths": [node_path(node, p) for p in inputs.values()]})
        for what, p in inputs.items():
            if (info.get("paths") or {}).get(node_path(node, p)) == "missing":
                done.append({**copy_to(node, p, progress=(lambda s, t, w=what, n=name: progress(n, w, s, t))
                                       if progress else None), "what": what})
    return done


# ---------------------------------------------------------------- node side


def main(argv: list[str]) -> int:
    verb = argv[0] if argv else ""
    if verb == "probe":
        request = json.loads(sys.stdin.read() or "{}")
        print(json.dumps(probe(request)))
        return 0
    sys.stderr.write("usage: python -m core.train.nodes probe < REQUEST.json\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
