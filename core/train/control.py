"""Steer a run while it trains: save a checkpoint now, evaluate now, change the learning rate,
stop and save, stop after the next evaluation.

A request is one line appended to ``control.jsonl`` in the run folder (the Runs tab and
``paddle-studio runs control`` both call :func:`request`). Rank 0's callback reads new requests at
each step boundary and accepts each for a step a little ahead (``control.accepted.jsonl``: the
next step with one process, the one after with several); every rank reads the accepted list at its
own step boundaries and acts at that step, so all ranks save, evaluate or stop on the same step.
That works because data-parallel ranks meet in every step's gradient all-reduce: no rank can finish
step s+1 before rank 0 has finished step s and written what it accepted there. What happened is
appended to ``control.applied.jsonl`` (rank 0) and to the run's history.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

from core import workspace

REQUESTS = "control.jsonl"
ACCEPTED = "control.accepted.jsonl"
APPLIED = "control.applied.jsonl"
ACTIONS = ("save", "eval", "stop-after-eval", "stop-and-save", "lr")


class ControlError(ValueError):
    """A request that cannot be made, with a code the UI turns into zh/en text."""

    def __init__(self, code: str, message: str, **params):
        super().__init__(message)
        self.code, self.params = code, params


def parse(spec: str) -> tuple[str, float | None]:
    """``save``, ``eval``, ``stop-after-eval``, ``stop-and-save`` or ``lr=X`` as (action, value)."""
    spec = (spec or "").strip()
    if spec.startswith("lr="):
        raw = spec[3:]
        try:
            lr = float(raw)
        except ValueError:
            raise ControlError("bad_lr", f"lr={raw!r}: expected a number, e.g. lr=1e-4", value=raw) from None
        if not (lr > 0 and lr < 10):  # also refuses NaN and inf
            raise ControlError("bad_lr", f"lr={raw}: expected a learning rate above 0 and below 10", value=raw)
        return "lr", lr
    if spec not in ACTIONS or spec == "lr":
        raise ControlError("unknown_action", f"{spec!r}: expected one of save, eval, stop-after-eval, stop-and-save, lr=X",
                           action=spec)
    return spec, None


def request(run_dir: Path, spec: str, state: str | None = None) -> dict:
    """Append a request to the run's control file; ``state`` is the run's state (only a running run
    is steered). Returns the request."""
    action, value = parse(spec)
    if state is not None and state != "running":
        raise ControlError("not_running", f"the run is {state}: only a running run takes {action}", state=state,
                           action=action)
    req = {"id": uuid.uuid4().hex[:12], "action": action, "time": time.time(), **({"value": value} if value is not None else {})}
    _append(Path(run_dir) / REQUESTS, req)
    return req


def _append(path: Path, rec: dict) -> None:
    """One line, written with a single O_APPEND write (a reader never sees half of it)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (json.dumps(rec) + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def _read_new(path: Path, offset: int) -> tuple[list[dict], int]:
    return workspace.read_jsonl(path, offset)


def history(run_dir: Path) -> list[dict]:
    """Requests with what became of them: [{id, action, value, time, at_step, applied_step, effect}]."""
    d = Path(run_dir)
    reqs = {r["id"]: dict(r) for r in _read_new(d / REQUESTS, 0)[0] if isinstance(r, dict) and "id" in r}
    for r in _read_new(d / ACCEPTED, 0)[0]:
        if r.get("id") in reqs:
            reqs[r["id"]]["at_step"] = r.get("at_step")
    for r in _read_new(d / APPLIED, 0)[0]:
        if r.get("id") in reqs:
            reqs[r["id"]].update({k: r[k] for k in ("applied_step", "effect") if k in r})
        elif r.get("id"):  # the run's own doing (early stopping)
            reqs[r["id"]] = dict(r)
    return sorted(reqs.values(), key=lambda r: r.get("time", 0))


def stopped_at(run_dir: Path, since: float = 0.0) -> int | None:
    """The step a stop-and-save (or stop-after-eval) request ended the run at, if one did after ``since``."""
    for r in reversed(_read_new(Path(run_dir) / APPLIED, 0)[0]):
        if r.get("action") in ("stop-and-save", "stop-after-eval") and r.get("stopped") and r.get("time", 0) >= since:
            return int(r["applied_step"])
    return None


def make_callback(run_dir: Path, world: int):
    """The TrainerCallback every rank runs (see the module's docstring)."""
    from paddlenlp.trainer import TrainerCallback

    rank = int(os.environ.get("PADDLE_TRAINER_ID", "0"))
    ahead = 1 if world <= 1 else 2

    class ControlCallback(TrainerCallback):
        def __init__(self):
            self.req_off = self.acc_off = 0
            self.backlog: list[dict] = []  # requests made while this launch was starting
            self.pending: list[dict] = []
            self.stop_after_eval: dict | None = None
            self.lr_scheduler = None

        def on_train_begin(self, args, state, control, **kw):
            # requests of an earlier launch (before a resume) were that launch's; those made since this
            # one started (while its processes were starting) are taken at the first step
            if rank == 0:
                since = launch_time(run_dir)
                old, self.req_off = _read_new(run_dir / REQUESTS, 0)
                done = {r.get("id") for r in _read_new(run_dir / ACCEPTED, 0)[0]}
                self.backlog = [r for r in old if isinstance(r, dict) and r.get("time", 0) >= since and r.get("id") not in done]
            self.acc_off = _size(run_dir / ACCEPTED)
            self.lr_scheduler = kw.get("lr_scheduler")

        def on_step_end(self, args, state, control, **kw):
            step = state.global_step
            if rank == 0:
                new, self.req_off = _read_new(run_dir / REQUESTS, self.req_off)
                new, self.backlog = self.backlog + new, []
                for r in new:
                    if isinstance(r, dict) and r.get("action") in ACTIONS:
                        _append(run_dir / ACCEPTED, {**r, "at_step": step + ahead})
            acc, self.acc_off = _read_new(run_dir / ACCEPTED, self.acc_off)
            self.pending += acc
            now = [r for r in self.pending if r["at_step"] <= step or step >= state.max_steps]
            self.pending = [r for r in self.pending if r not in now]
            for r in now:
                self._apply(r, args, state, control, kw)

        def _apply(self, r, args, state, control, kw):
            act, step = r["action"], state.global_step
            effect = {}
            if act == "save":
                control.should_save = True
                effect = {"effect": f"checkpoint-{step}"}
            elif act in ("eval", "stop-after-eval") and not args.do_eval:
                effect = {"effect": "not applied: this run has no dev split to evaluate on"}
            elif act == "eval":
                control.should_evaluate = True
                effect = {"effect": "evaluated"}
            elif act == "stop-and-save":
                control.should_save = True
                control.should_training_stop = True
                effect = {"effect": f"checkpoint-{step}, then stopped", "stopped": True}
            elif act == "stop-after-eval":
                self.stop_after_eval = r
                return  # applied when the next evaluation ends (on_evaluate)
            elif act == "lr":
                effect = {"effect": set_lr(kw.get("lr_scheduler") or self.lr_scheduler, kw.get("optimizer"), r["value"])}
            if rank == 0:
                _append(run_dir / APPLIED, {"id": r["id"], "action": act, "applied_step": step, "time": time.time(), **effect})

        def on_evaluate(self, args, state, control, **kw):
            r = self.stop_after_eval
            if r is None:
                return
            self.stop_after_eval = None
            control.should_save = True
            control.should_training_stop = True
            if rank == 0:
                _append(run_dir / APPLIED, {"id": r["id"], "action": r["action"], "applied_step": state.global_step,
                                            "time": time.time(), "effect": f"evaluated, checkpoint-{state.global_step}, then stopped",
                                            "stopped": True})

    return ControlCallback()


def launch_time(run_dir: Path) -> float:
    """When the run's current launch started (status.json's ``started``, written by its supervisor)."""
    from datetime import datetime

    try:
        started = json.loads((Path(run_dir) / "status.json").read_text(encoding="utf-8")).get("started")
        return datetime.fromisoformat(started).timestamp() - 1.0  # whole seconds: a request in that second counts
    except (OSError, ValueError, TypeError, AttributeError):
        return 0.0


def early_stopping(run_dir: Path, patience: int, threshold: float):
    """A TrainerCallback ending training (with a final save) when the eval loss has not improved by
    more than ``threshold`` for ``patience`` evaluations; what it did goes to control.applied.jsonl."""
    from paddlenlp.trainer import TrainerCallback

    rank = int(os.environ.get("PADDLE_TRAINER_ID", "0"))

    class EarlyStopping(TrainerCallback):
        def __init__(self):
            self.best, self.bad = None, 0

        def on_evaluate(self, args, state, control, metrics=None, **kw):
            loss = (metrics or {}).get("eval_loss")
            if loss is None:
                return
            if self.best is None or loss < self.best - threshold:
                self.best, self.bad = loss, 0
                return
            self.bad += 1
            if self.bad >= patience:
                control.should_training_stop = True
                control.should_save = True
                if rank == 0:
                    _append(run_dir / APPLIED, {"id": f"early-{state.global_step}", "action": "early-stopping",
                                                "applied_step": state.global_step, "time": time.time(),
                                                "effect": f"eval loss {loss:.4g} did not improve on {self.best:.4g} by more "
                                                          f"than {threshold:g} for {patience} evaluation(s): stopped"})

    return EarlyStopping()


def set_lr(scheduler, optimizer, lr: float) -> str:
    """The learning rate from the next step on: a schedule keeps its shape around the new peak
    (base_lr), a constant rate becomes ``lr``. Returns what was done."""
    if scheduler is not None and hasattr(scheduler, "base_lr"):
        old = float(scheduler.base_lr)
        scheduler.base_lr = float(lr)
        scheduler.last_lr = scheduler.get_lr()  # what the next optimizer step reads
        return f"base learning rate {old:.4g} -> {lr:.4g} (now {float(scheduler.last_lr):.4g})"
    if optimizer is not None and hasattr(optimizer, "set_lr"):
        optimizer.set_lr(float(lr))
        return f"learning rate -> {lr:.4g}"
    return "no scheduler or optimizer to change"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
