"""The one job mechanism (core.jobs) and the workspace listings (core.catalog), with real
supervisor and child processes: results and failures recorded from files, Stop reaching every
process, a killed supervisor judged right, outputs claimed once, listings that see new folders."""

import json
import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from core import catalog, jobs, workspace


def wait_state(job_id, states=jobs.FINAL, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = jobs.status(job_id)
        if st.get("state") in states:
            return st
        time.sleep(0.05)
    raise AssertionError(f"{job_id} still {jobs.status(job_id)}")


def test_job_result_log_and_listing(workspace_home, tmp_path):
    f = tmp_path / "a.jsonl"
    f.write_text('{"instruction": "hi", "output": "yo"}\n{"instruction": "", "output": "x"}\n', encoding="utf-8")
    job_id = jobs.submit("data", ["data", "validate", str(f), "--json"], title="validate a")
    st = wait_state(job_id)
    info = jobs.show(job_id)
    # `data validate` exits 1 for a file with bad records: the job failed, with the CLI's message
    assert st["state"] == "failed" and st["exit_code"] == 1, st
    f.write_text('{"instruction": "hi", "output": "yo"}\n', encoding="utf-8")
    ok = jobs.submit("data", ["data", "validate", str(f), "--json"], title="validate b")
    st = wait_state(ok)
    info = jobs.show(ok)
    assert st["state"] == "succeeded" and st["exit_code"] == 0
    assert info["result"]["ok"] is True and info["result"]["records"] == 1
    assert info["argv"][1:4] == ["-m", "core.cli", "data"]
    rows = catalog.activity()
    assert [r["id"] for r in rows][:2] == [ok, job_id] or {r["id"] for r in rows} == {ok, job_id}
    assert {r["state"] for r in rows} == {"succeeded", "failed"}
    assert not jobs.processes(st)


def test_failure_reason_is_the_cli_message(workspace_home):
    job_id = jobs.submit("data", ["data", "validate", "/nonexistent/file.jsonl", "--json"])
    st = wait_state(job_id)
    assert st["state"] == "failed" and "/nonexistent/file.jsonl" in st["reason"]
    assert "\x1b[" not in jobs.read_log(job_id)


def test_strip_ansi():
    assert jobs.strip_ansi("\x1b[32mINFO\x1b[0m step 1\r\n\x1b[2K\x1b[1Adone") == "INFO step 1\ndone"


SLEEPER = ("import subprocess, sys, time\n"
           "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)\n"
           "print('working', file=sys.stderr, flush=True); time.sleep(120)")


def _sleeper_job(outputs=()):
    """A job that keeps running and has a grandchild in a process group of its own (as
    paddle.distributed.launch's ranks are)."""
    return jobs.submit("data", [SLEEPER], title="sleeper", outputs=outputs, program=[sys.executable, "-c"])


def test_stop_ends_every_process_and_records_stopped(workspace_home):
    job_id = _sleeper_job()
    deadline = time.time() + 20
    while not jobs.status(job_id).get("pgid") and time.time() < deadline:
        time.sleep(0.05)
    st = jobs.status(job_id)
    child = psutil.Process(st["pid"])
    deadline = time.time() + 20
    while len(child.children()) < 1 and time.time() < deadline:
        time.sleep(0.05)
    tree = [child, *child.children(recursive=True)]
    assert len(tree) == 2 and st["state"] == "running"
    st = catalog.stop(job_id)
    assert st["state"] == "stopped" and st["reason"] == "stopped by the user"
    gone, alive = psutil.wait_procs(tree, timeout=5)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    assert not jobs.processes(st)
    assert jobs.stop(job_id)["state"] == "stopped"  # stopping again changes nothing


def test_killed_supervisor_is_judged_failed_once_its_child_ends(workspace_home):
    job_id = _sleeper_job()
    deadline = time.time() + 20
    while not jobs.status(job_id).get("pgid") and time.time() < deadline:
        time.sleep(0.05)
    st = jobs.status(job_id)
    os.kill(st["supervisor_pid"], signal.SIGKILL)
    time.sleep(0.3)
    assert jobs.status(job_id)["state"] == "running"  # the child still works
    os.killpg(st["pgid"], signal.SIGKILL)
    psutil.wait_procs([psutil.Process(st["pid"])], timeout=5)
    st = jobs.status(job_id)
    assert st["state"] == "failed" and "supervisor vanished" in st["reason"]


def test_an_output_is_claimed_by_one_job(workspace_home):
    out = workspace.models_dir() / "m1"
    job_id = _sleeper_job(outputs=[out])
    try:
        with pytest.raises(jobs.Refused) as e:
            jobs.check_output("m1", workspace.models_dir())
        assert e.value.code == "claimed" and e.value.params["job"] == job_id
    finally:
        jobs.stop(job_id)
    assert jobs.check_output("m1", workspace.models_dir()) == out  # free again once the job ended
    with pytest.raises(jobs.Refused) as e:
        jobs.check_output("../etc", workspace.models_dir())
    assert e.value.code == "name_unsafe"
    out.mkdir(parents=True)
    with pytest.raises(jobs.Refused) as e:
        jobs.check_output("m1", workspace.models_dir())
    assert e.value.code == "exists"


def test_catalog_kinds_and_signature(workspace_home):
    models = workspace.models_dir()
    sig0 = catalog.signature()
    (models / "base1").mkdir(parents=True)
    (models / "base1" / "config.json").write_text("{}")
    (models / ".merged.tmp-x").mkdir()  # a merge being written: not offered
    (models / ".merged.tmp-x" / "config.json").write_text("{}")
    (models / "merged1").mkdir()
    (models / "merged1" / "config.json").write_text("{}")
    workspace.write_json_atomic(models / "merged1" / workspace.MODEL_MARKER, {"merged_from": {"base": "b", "adapter": "a"}})
    (models / "q1").mkdir()
    (models / "q1" / "config.json").write_text("{}")
    workspace.write_json_atomic(models / "q1" / workspace.QUANT_MARKER, {})
    run_out = workspace.runs_dir() / "r1" / "output"
    run_out.mkdir(parents=True)
    (run_out / "lora_config.json").write_text("{}")  # training not finished: no marker yet
    assert catalog.signature() != sig0
    kinds = {m["name"]: m["kind"] for m in catalog.models()}
    assert kinds == {"base1": "base", "merged1": "merged", "q1": "quantized"}
    workspace.write_json_atomic(run_out / workspace.MODEL_MARKER, {"base": "/x/base1", "method": "lora"})
    adapters = catalog.models(["adapter"])
    assert [(m["name"], m["adapter"], m["base"]) for m in adapters] == [("r1", "lora", "/x/base1")]
    assert [m["name"] for m in catalog.models(["base", "merged"])] == ["base1", "merged1"]


def test_process_start_is_counted_from_boot_not_from_the_wall_clock():
    """A start time that moved with the wall clock (psutil's create_time adds the boot time, which
    shifts when the clock is adjusted) made a live supervisor look vanished, and its run was
    ended: starts are seconds since boot, the same in every process."""
    import os

    from core import jobs

    start = jobs.proc_start(os.getpid())
    uptime = float(open("/proc/uptime").read().split()[0])
    assert 0 <= start <= uptime + 1
    assert jobs.alive(os.getpid(), start) and not jobs.alive(os.getpid(), start - 5)


def test_a_stopped_verb_runs_its_finally_blocks_after_importing_paddle(tmp_path):
    """Importing paddle puts a C++ SIGTERM handler (stack dump, death by the signal) over the CLI's;
    the CLI puts its own back, so a stopped merge/quantize/eval job still removes its temp folders."""
    import subprocess

    script = tmp_path / "verb.py"
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})\n"
        "from core import cli\n"
        "def verb(a):\n"
        "    import paddle  # noqa: F401\n"
        "    try:\n"
        "        print('ready', flush=True)\n"
        "        time.sleep(60)\n"
        "    finally:\n"
        "        open(sys.argv[1], 'w').write('cleaned up')\n"
        "cli.cmd_merge = verb\n"
        f"sys.exit(cli.main(['merge', '--adapter', 'x', '--out', {str(tmp_path / 'out')!r}]))\n")
    mark = tmp_path / "mark"
    err = tmp_path / "stderr.txt"
    with open(err, "wb") as e:
        proc = subprocess.Popen([sys.executable, str(script), str(mark)], stdout=subprocess.PIPE, stderr=e, text=True)
    try:
        line = proc.stdout.readline()  # the only line it prints: read, then the pipe is done
        assert line.strip() == "ready", (line, err.read_text()[-2000:])
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        assert code == 128 + signal.SIGTERM, (code, err.read_text()[-2000:])
    finally:
        proc.kill()
        proc.stdout.close()
    assert mark.read_text() == "cleaned up"
