"""Chat workers as jobs: one `paddle-studio serve` job per loaded model, found again by its key.

A key is "model:DIR" or "adapter:DIR". The worker's ready file lives in its job directory, so
listing the running serve jobs is the registry: a page reload or the Jobs view see the same
workers, and Stop in the Jobs view unloads a model as Unload does.

A worker is owned by the process that loaded it (the studio): its job's params name the owner's
pid and start time, and the worker ends by itself within a second or two of the owner's end (SIGTERM,
Ctrl-C or kill -9 alike), or after 30 min without a request ($PADDLE_STUDIO_SERVE_IDLE_S, in
seconds, changes that; 0 turns it off). Its job then ends "stopped", its reason saying why
({"ended": "owner_gone" | "idle", "reason": ...}); Unload and Stop end it "stopped".
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from core import jobs
from core.chat import server

_lock = threading.Lock()


def _job_for(key: str) -> dict | None:
    for j in jobs.list_jobs("serve"):
        if j.get("params", {}).get("key") == key and j["status"].get("state") in jobs.ACTIVE:
            return j
    return None


def worker_for(key: str | None) -> server.Worker | None:
    """The live worker serving ``key``, if any."""
    if not key:
        return None
    j = _job_for(key)
    if j is None:
        return None
    d = jobs.jobs_dir() / j["job_id"]
    return server.attach_worker(str(d / "ready.json"), str(d / "log.txt"))


def load(key: str, timeout: float = 300, owner: int | None = None) -> server.Worker:
    """Start (or find) the worker for ``key`` and wait until it listens. ``owner``: the process
    whose end ends a worker started here (default: this one; 0: none)."""
    with _lock:
        w = worker_for(key)
        if w is not None:
            return w
        kind, _, path = key.partition(":")
        if kind not in ("model", "adapter") or not path:
            raise ValueError(f"bad model key {key!r} (model:DIR or adapter:DIR)")
        name = Path(path).parent.name if Path(path).name == "output" else Path(path).name
        args = ["serve", "--host", "127.0.0.1", "--port", "0", "--ready-file", "{job}/ready.json", "--name", name,
                "--adapter" if kind == "adapter" else "--model", path]
        owner = os.getpid() if owner is None else owner
        params = {"key": key, "name": name}
        if owner:
            params.update(owner=owner, owner_start=jobs.proc_start(owner))
        job_id = jobs.submit("serve", args, title=name, params=params)
    d = jobs.jobs_dir() / job_id
    deadline = time.time() + timeout
    while time.time() < deadline:
        if (d / "ready.json").is_file():
            info = json.loads((d / "ready.json").read_text(encoding="utf-8"))
            return server.Worker(pid=info["pid"], port=info["port"], url=info["url"], log_path=str(d / "log.txt"),
                                 ready_file=str(d / "ready.json"), name=info.get("name"))
        st = jobs.status(d)
        if st.get("state") not in jobs.ACTIVE:
            raise server.ServeError(f"the serve worker ended ({st.get('reason') or st.get('state')}):\n"
                                    f"{jobs.read_log(d, 3000)}")
        time.sleep(0.1)
    jobs.stop(job_id)
    raise server.ServeError(f"the serve worker was not ready within {timeout:.0f} s:\n{jobs.read_log(d, 3000)}")


def unload(key: str) -> bool:
    """Stop the worker for ``key``; False when none was running."""
    with _lock:
        j = _job_for(key)
        if j is None:
            return False
        jobs.stop(j["job_id"])
        return True


def loaded() -> list[dict]:
    """Keys and names of the running workers."""
    return [{"key": j["params"].get("key"), "name": j["params"].get("name"), "job_id": j["job_id"]}
            for j in jobs.list_jobs("serve") if j["status"].get("state") in jobs.ACTIVE]


def context_at(url: str, timeout: float = 5) -> int | None:
    """The context length a serve worker at ``url`` reports (its /v1/models card); None if it says none."""
    import requests

    try:
        r = requests.get(url.rstrip("/") + "/v1/models", timeout=timeout)
        info = r.json()["data"][0].get("info") or {}
        return int(info["max_position"]) if info.get("max_position") else None
    except (requests.RequestException, ValueError, KeyError, IndexError, TypeError):
        return None
