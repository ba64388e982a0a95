"""Multi-node runs: node 1 is a real OpenSSH server on a loopback port (tests/sshnode.py) with a
workspace of its own; this process's workspace is the head (node 0). Nodes are added, tested and
checked through the CLI; runs go through core.train.cluster, which runs the node's ranks over SSH."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from conftest import ROOT, link_demo
from sshnode import SshNode, available

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))


def cli(home: Path, *args, check=True) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "core.cli", *args], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PADDLE_STUDIO_HOME": str(home)}, timeout=300)
    if check:
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return r


@pytest.fixture(scope="module")
def cluster_ws(tmp_path_factory, demo_home):
    """(head workspace, node workspace, sshd): node n1 registered; its workspace already holds the
    demo model and dataset (copying is tested on its own)."""
    root = tmp_path_factory.mktemp("cluster")
    head = link_demo(root / "head", demo_home)
    node = link_demo(root / "node", demo_home)
    old = os.environ.get("PADDLE_STUDIO_HOME")
    os.environ["PADDLE_STUDIO_HOME"] = str(head)
    with SshNode(root / "ssh") as sshd:
        cli(head, "nodes", "add", "n1", "--host", "127.0.0.1", "--port", str(sshd.port), "--user", sshd.user,
            "--key", str(sshd.key), "--python", sys.executable, "--studio-dir", str(ROOT), "--home", str(node))
        yield head, node, sshd
    if old is None:
        os.environ.pop("PADDLE_STUDIO_HOME", None)
    else:
        os.environ["PADDLE_STUDIO_HOME"] = old


def run_processes(*folders: Path) -> list:
    """Live processes whose command line names one of ``folders`` (a run's, on either node)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if p.pid != os.getpid() and any(str(f) in a for a in (p.info["cmdline"] or []) for f in folders):
                out.append(p)
        except psutil.Error:
            continue
    return out


def small_config(steps: int, **parallel):
    from core.train import config

    cfg = config.load_run_file(str(ROOT / "presets" / "runs" / "demo-lora.json"))
    cfg.training.max_steps, cfg.training.eval_steps, cfg.training.save_steps = steps, max(steps // 2, 1), max(steps // 2, 1)
    for k, v in parallel.items():
        setattr(cfg.parallel, k, v)
    return cfg


def wait_state(run_id: str, timeout: float) -> dict:
    from core.train import runs

    deadline = time.time() + timeout
    while time.time() < deadline:
        st = runs.status(run_id)
        if st.get("state") not in runs.ACTIVE:
            return st
        time.sleep(0.3)
    raise AssertionError(f"run {run_id} still {runs.status(run_id)} after {timeout} s")


def wait_step(progress_file: Path, step: int, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if json.loads(progress_file.read_text()).get("step", 0) >= step:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.3)
    raise AssertionError(f"{progress_file} did not reach step {step}")


def test_nodes_are_listed_edited_tested_and_refused_with_the_field(cluster_ws):
    head, node, sshd = cluster_ws
    listed = json.loads(cli(head, "nodes", "list", "--json").stdout)["nodes"]
    assert [n["name"] for n in listed] == ["n1"] and listed[0]["port"] == sshd.port
    tested = json.loads(cli(head, "nodes", "test", "n1", "--json").stdout)
    assert tested["differs"] == {} and tested["home"] == str(node) and tested["cpus"] >= 1
    # a wrong key: the node is unreachable, said in one line (ssh's own reason), exit 2
    bad_key = sshd.root / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(bad_key)], check=True)
    cli(head, "nodes", "add", "n2", "--host", "127.0.0.1", "--port", str(sshd.port), "--user", sshd.user,
        "--key", str(bad_key), "--python", sys.executable, "--studio-dir", str(ROOT), "--home", str(node))
    r = cli(head, "nodes", "test", "n2", check=False)
    assert r.returncode == 2 and "cannot reach it over SSH" in r.stderr and "Permission denied" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    r = cli(head, "nodes", "edit", "n2", "--port", "70000", check=False)
    assert r.returncode == 2 and "SSH port must be 1-65535" in r.stderr
    r = cli(head, "nodes", "add", "n3", "--host", "h", "--python", "venv/bin/python", "--studio-dir", "/s", "--home", "/w",
            check=False)
    assert r.returncode == 2 and "python must be an absolute path" in r.stderr
    cli(head, "nodes", "edit", "n2", "--rename", "n2b", "--env", "GLOO_SOCKET_IFNAME=lo")
    names = {n["name"]: n for n in json.loads(cli(head, "nodes", "list", "--json").stdout)["nodes"]}
    assert set(names) == {"n1", "n2b"} and names["n2b"]["env"] == {"GLOO_SOCKET_IFNAME": "lo"}
    cli(head, "nodes", "remove", "n2b")
    assert [n["name"] for n in json.loads(cli(head, "nodes", "list", "--json").stdout)["nodes"]] == ["n1"]


def test_preflight_reports_every_problem_at_once_and_nothing_starts(cluster_ws, tmp_path):
    """A node with another paddlenlp, without the dataset, and that cannot reach the master port:
    all three problems named with the node, before anything starts; copy then mends the path."""
    head, _, sshd = cluster_ws
    fake = tmp_path / "site"  # a paddlenlp distribution of another version first on the node's path
    (fake / "paddlenlp-9.9.9.dist-info").mkdir(parents=True)
    (fake / "paddlenlp-9.9.9.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: paddlenlp\nVersion: 9.9.9\n")
    bare = tmp_path / "bare-ws"
    (bare / "models").mkdir(parents=True)
    (bare / "models" / "demo-base").symlink_to(head / "models" / "demo-base")  # the model is there, not the dataset
    cli(head, "nodes", "add", "odd", "--host", "127.0.0.1", "--port", str(sshd.port), "--user", sshd.user,
        "--key", str(sshd.key), "--python", sys.executable, "--studio-dir", str(ROOT), "--home", str(bare),
        "--env", f"PYTHONPATH={fake}", "--head-address", "127.0.0.3")  # nothing of the head answers there
    try:
        preset = str(ROOT / "presets" / "runs" / "demo-lora.json")
        t0 = time.time()
        r = cli(head, "nodes", "preflight", preset, "--nodes", "odd,n1", "--json", check=False)
        took = time.time() - t0
        assert r.returncode == 1, r.stderr
        res = json.loads(r.stdout)
        codes = {(p["node"], p["code"]) for p in res["problems"]}
        assert codes == {("odd", "version_differs"), ("odd", "path_missing"), ("odd", "master_unreachable")}, res
        text = " ".join(p["message"] for p in res["problems"])
        assert "paddlenlp 9.9.9 there" in text and "datasets/demo is missing there" in text and "127.0.0.3" in text
        assert took < 20, took  # the nodes are checked in parallel, each answers in about a second
        runs_before = set((head / "runs").iterdir()) if (head / "runs").exists() else set()
        r = cli(head, "train", preset, "--nodes", "odd,n1", check=False)
        assert r.returncode == 2 and r.stderr.count("paddle-studio: odd:") == 3, r.stderr
        assert (set((head / "runs").iterdir()) if (head / "runs").exists() else set()) == runs_before
        # copy the dataset there (tar over SSH into a temporary folder, then renamed)
        out = json.loads(cli(head, "nodes", "copy", preset, "--nodes", "odd", "--json").stdout)["copied"]
        assert [(c["what"], c["dest"]) for c in out] == [("dataset", str(bare / "datasets" / "demo"))]
        assert (bare / "datasets" / "demo" / "train.json").read_bytes() == (head / "datasets" / "demo" / "train.json").read_bytes()
        res = json.loads(cli(head, "nodes", "preflight", preset, "--nodes", "odd", "--json", check=False).stdout)
        assert {p["code"] for p in res["problems"]} == {"version_differs", "master_unreachable"}
    finally:
        cli(head, "nodes", "remove", "odd")


@pytest.mark.slow
def test_kill_of_a_node_launcher_ends_the_run_on_every_node_and_names_it(cluster_ws):
    from core.train import cluster, runs

    head, node, _ = cluster_ws
    run_id = cluster.create(small_config(400, nodes="n1"))
    runs.start(run_id)
    nd = node / cluster.NODE_RUNS / run_id
    wait_step(nd / "progress.rank1.json", 3)
    launcher = [p for p in run_processes(nd) if any("paddle.distributed.launch" in a for a in p.cmdline())]
    assert len(launcher) == 1
    t0 = time.time()
    os.kill(launcher[0].pid, signal.SIGKILL)
    st = wait_state(run_id, 30)
    assert st["state"] == "failed"
    assert st["reason"].startswith("node n1 (") and "(rank 1): the launcher was killed (SIGKILL)" in st["reason"], st
    deadline = time.time() + 30 - (time.time() - t0)
    while run_processes(runs.run_dir(run_id), nd) and time.time() < deadline:
        time.sleep(0.2)
    assert run_processes(runs.run_dir(run_id), nd) == []
    rows = {r["node"]: r for r in cluster.strip(run_id)}
    assert rows["n1"]["state"] == "failed" and rows["head"]["state"] == "failed"


@pytest.mark.slow
def test_a_frozen_rank_is_found_by_the_hang_doctor_and_the_run_ends(cluster_ws):
    """SIGSTOP of the head's rank 0 (the case where node 1 used to hang for half an hour): when no
    rank progressed for the stall window, every rank's stack is taken, the frozen one is named,
    the waiting one says where it waits, and every process ends."""
    from core.train import cluster, runs

    head, node, _ = cluster_ws
    run_id = cluster.create(small_config(400, nodes="n1", stall_timeout=15))
    runs.start(run_id)
    d, nd = runs.run_dir(run_id), node / cluster.NODE_RUNS / run_id
    wait_step(d / "progress.rank0.json", 3)
    asked = cluster.doctor(run_id)  # "Why is it stuck?" while it is not: both ranks answer
    assert {r: v["state"] for r, v in asked["ranks"].items()} == {"0": "answered", "1": "answered"}, asked
    assert asked["ranks"]["1"]["node"] == "n1" and "entry.py" in asked["ranks"]["1"]["text"]
    rank0 = cluster.rank_processes(d)[0]
    t0 = time.time()
    os.kill(rank0.pid, signal.SIGSTOP)
    st = wait_state(run_id, 60)
    took = time.time() - t0
    assert st["state"] == "failed" and "no progress for" in st["reason"], st
    assert "rank 0 (head): frozen" in st["reason"] and "rank 1 (n1): waits in" in st["reason"], st["reason"]
    assert took < 15 + 20, took
    diag = cluster.last_diagnosis(run_id)
    assert diag["ranks"]["0"]["state"] == "frozen" and diag["ranks"]["1"]["state"] == "answered"
    time.sleep(1)
    assert run_processes(d, nd) == []


@pytest.mark.slow
def test_a_manual_node_joins_with_the_command_the_studio_prints(cluster_ws):
    """A node the studio cannot reach: the run waits for it, the Runs tab shows the command to paste
    there, and pasting it (here: bash on the same machine) makes it train as node 1."""
    from core.train import cluster, runs

    head, node, _ = cluster_ws
    cli(head, "nodes", "add", "m1", "--manual", "--python", sys.executable, "--studio-dir", str(ROOT), "--home", str(node))
    try:
        run_id = cluster.create(small_config(12, nodes="m1"))
        runs.start(run_id)
        d = runs.run_dir(run_id)
        rows = {}
        deadline = time.time() + 30
        while not (rows.get("m1") or {}).get("command") and time.time() < deadline:
            rows = {r["node"]: r for r in cluster.strip(run_id)}
            time.sleep(0.3)
        command = rows["m1"]["command"]
        assert rows["m1"]["state"] == "manual" and "-m core.train.cluster agent --manual" in command
        shown = cli(head, "runs", "nodes", run_id).stdout
        assert "paste on m1" in shown and "STUDIO_RUN" in shown
        pasted = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300)
        assert pasted.returncode == 0 and "ended: exit code 0" in pasted.stdout, pasted.stdout[-1500:] + pasted.stderr[-1500:]
        st = wait_state(run_id, 60)
        assert st["state"] == "succeeded", st
        node_steps = json.loads((node / cluster.NODE_RUNS / run_id / "progress.rank1.json").read_text())["step"]
        assert node_steps == 12 and json.loads((d / "progress.rank0.json").read_text())["step"] == 12
    finally:
        cli(head, "nodes", "remove", "m1")
