"""The round-trip check's records read back as verdicts in every state, never as an exception:
a check killed before its verdict, a checkpoint that decided a failure, a folder without (or with
a skipped) reference."""

import json
import os

from core.train import verify


def test_verdicts_of_odd_records(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "verify.json").write_text(json.dumps({"state": "error", "targets": {}, "reason": "the check died"}))
    assert verify.summary(verify.read(d))["reason"] == "the check died"
    # a checkpoint decided the failure: the headline is that checkpoint's numbers, not the output's absence
    (d / "verify.json").write_text(json.dumps({"state": "failed", "targets": {
        "output": {"state": "no_reference", "reason": "old"},
        "checkpoint-5": {"state": "failed", "reloaded_eval_loss": 2.5, "training_eval_loss": 0.4, "step": 5}}}))
    s = verify.summary(verify.read(d))
    assert (s["target"], s["reloaded_eval_loss"], s["step"]) == ("checkpoint-5", 2.5, 5)
    # "running" written by a process that is gone reads as an error (its supervisor was killed)
    (d / "verify.json").write_text(json.dumps({"state": "running", "targets": {}, "pid": 2 ** 22 + 7, "pid_start": 1.0}))
    assert verify.read(d)["state"] == "error"
    (d / "verify.json").write_text(json.dumps({"state": "running", "targets": {}, "pid": os.getpid(),
                                               "pid_start": __import__("core.jobs", fromlist=["x"]).proc_start(os.getpid())}))
    assert verify.read(d)["state"] == "running"


def test_folders_without_a_usable_reference(tmp_path):
    assert verify.verify_folder(tmp_path)["state"] == "no_reference"
    (tmp_path / verify.REFERENCE).write_text("{not json")
    assert verify.verify_folder(tmp_path)["state"] == "no_reference"
    (tmp_path / verify.REFERENCE).write_text(json.dumps({"skipped": "tensor parallel: a forward needs every rank"}))
    v = verify.verify_folder(tmp_path)
    assert v["state"] == "no_reference" and "tensor parallel" in v["reason"]
    assert verify.skip_reason({"tensor_parallel_degree": 2}) and verify.skip_reason({"sharding": "stage3"})
    assert verify.skip_reason({"sharding": "stage1", "tensor_parallel_degree": 1}) is None
    assert verify.tolerance(1.0, "paddle.bfloat16") > 10 * verify.tolerance(1.0, "paddle.float32")
