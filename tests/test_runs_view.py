"""The Runs tab's view of a run, from its files (studio.tabs.runs.snapshot, no browser)."""
import json
import os

import gradio as gr

from core import jobs
from core.train import runs
from studio.tabs import runs as runs_tab


def _write_run(home, run_id, state):
    d = home / "runs" / run_id
    d.mkdir(parents=True, exist_ok=True)
    (d / "studio.json").write_text(json.dumps({"run_id": run_id}))
    jobs.write_status(d, state=state, supervisor_pid=os.getpid(), supervisor_start=jobs.proc_start(os.getpid()),
                      started=jobs.now())
    return d


def _append(d, steps):
    with open(d / "metrics.jsonl", "a") as f:
        for s in steps:
            f.write(json.dumps({"step": s, "max_steps": 3, "loss": 1.0 / s}) + "\n")


def _points(fig):
    if fig == gr.skip():
        return "not redrawn"
    return sorted({len(tr.x) for tr in fig.data if tr.name == "loss"})


def test_points_read_between_redraws_are_drawn_when_the_run_ends(workspace_home):
    d = _write_run(workspace_home, "r1", "running")
    _append(d, [1, 2])
    snap = runs_tab.snapshot("r1", None, None, "en", force=True)
    assert _points(snap["plot"]) == [2]
    # a new point right after a redraw: the charts wait (at most FIGURE_EVERY s while training)
    _append(d, [3])
    snap = runs_tab.snapshot("r1", None, snap["view"], "en")
    assert snap["plot"] == gr.skip()
    assert "0.3333" in snap["status"]
    # the run ends with no new point: the waiting point is drawn now
    jobs.write_status(d, state="succeeded", finished=jobs.now())
    assert runs.status(d)["state"] == "succeeded"
    snap = runs_tab.snapshot("r1", None, snap["view"], "en")
    assert _points(snap["plot"]) == [3]
    # nothing changed since: nothing is sent again
    assert runs_tab.snapshot("r1", None, snap["view"], "en") is None


def test_the_first_loss_point_is_drawn_at_once(workspace_home):
    d = _write_run(workspace_home, "r2", "running")
    snap = runs_tab.snapshot("r2", None, None, "en", force=True)  # the empty chart, just drawn
    assert _points(snap["plot"]) == []
    _append(d, [1])  # well within FIGURE_EVERY of that draw
    snap = runs_tab.snapshot("r2", None, snap["view"], "en")
    assert _points(snap["plot"]) == [1]
    _append(d, [2])  # later points wait for the next redraw, as before
    assert runs_tab.snapshot("r2", None, snap["view"], "en")["plot"] == gr.skip()


def test_long_curves_are_thinned_keeping_spikes_and_ends():
    from studio import charts

    pts = [(s, 1.0 / s) for s in range(1, 10001)]
    pts[5000] = (5001, 50.0)  # a loss spike mid-run
    fig = charts.line_figure({"loss": pts}, "loss")
    xs, ys = list(fig.data[0].x), list(fig.data[0].y)
    assert len(xs) <= charts.LINE_POINTS + 2
    assert xs[0] == 1 and xs[-1] == 10000 and xs == sorted(xs)
    assert 50.0 in ys and min(ys) == pts[-1][1]  # the spike and the lowest point stay drawn
    short = [(1, 2.0), (2, 1.0)]
    assert charts.thin(short) == short


def test_the_second_chart_redraws_at_half_the_pace_while_training(workspace_home, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(runs_tab.time, "monotonic", lambda: clock[0])
    d = _write_run(workspace_home, "r3", "running")
    _append(d, [1])
    snap = runs_tab.snapshot("r3", None, None, "en", force=True)
    assert snap["plot"] != gr.skip() and snap["speed"] != gr.skip()
    drawn = []
    for i in range(2, 6):  # a new point every FIGURE_EVERY seconds
        clock[0] += runs_tab.FIGURE_EVERY
        _append(d, [i])
        snap = runs_tab.snapshot("r3", None, snap["view"], "en")
        drawn.append((snap["plot"] != gr.skip(), snap["speed"] != gr.skip()))
    assert drawn == [(True, False), (True, True), (True, False), (True, True)]
    jobs.write_status(d, state="succeeded", finished=jobs.now())  # the end draws both at once
    clock[0] += 1
    _append(d, [6])
    snap = runs_tab.snapshot("r3", None, snap["view"], "en")
    assert snap["plot"] != gr.skip() and snap["speed"] != gr.skip()


def test_jobs_tab_sends_only_what_changed(workspace_home):
    """The Jobs tab's tick sends what differs from what the page was last sent: a run's new metrics
    line changes the list's progress, not the picker's choices or the command."""
    from studio.tabs import jobs as jobs_tab

    d = _write_run(workspace_home, "r3", "running")
    (d / "studio.json").write_text(json.dumps({"run_id": "r3", "command": ["python", "-m", "core.train.entry"]}))
    _append(d, [1])
    *out, record = jobs_tab.view_updates(None, "en")  # tab shown: everything, the newest item picked
    names = jobs_tab.OUT_NAMES
    assert len(out) == len(names) and not any(v == gr.skip() for v in out)
    assert out[names.index("pick")]["value"] == "r3"
    *again, record2 = jobs_tab.view_updates("r3", "en", record)
    assert all(v == gr.skip() for v in again) and record2 == record  # nothing changed: nothing sent
    _append(d, [2])  # the run logs a step
    *tick, _ = jobs_tab.view_updates("r3", "en", record2)
    sent = {n for n, v in zip(names, tick) if v != gr.skip()}
    assert "table" in sent and "pick" not in sent and "command" not in sent
    assert "2/3" in tick[names.index("table")]
    # a language switch (no ``last``) sends every output again
    *zh, _ = jobs_tab.view_updates("r3", "zh")
    assert not any(v == gr.skip() for v in zh)


def test_a_resumed_run_draws_one_line_and_counts_each_step_once():
    """Stopped at step 20, resumed from checkpoint-10: steps 11-20 are logged again. The curve is one
    line rising in step (it jumped back to 11 before), the caption counts 20 points (30 before), and
    in compare mode the learning rate's axis has one short title."""
    from studio.tabs.runs import curve_caption, curve_figures

    first = [{"event": "train_begin", "step": 0}] + [{"step": s, "loss": 5.0 - s / 10, "lr": 1e-4} for s in range(1, 21)]
    again = [{"event": "train_begin", "step": 10}] + [{"step": s, "loss": 4.0 - s / 10, "lr": 1e-4} for s in range(11, 21)]
    records = first + again
    loss, speed = curve_figures({"": records}, "en", False)
    xs = list(loss.data[0].x)
    assert xs == list(range(1, 21)) and loss.data[0].y[-1] == 4.0 - 2.0  # the resumed launch's values
    assert "data-points='20'" in curve_caption("r", records, "en")
    # mid-resume: the earlier launch's steps after the resume point are not drawn until logged again
    loss, _ = curve_figures({"": first + again[:4]}, "en", False)
    assert list(loss.data[0].x) == list(range(1, 14))
    _, speed = curve_figures({"a: ": records, "b: ": first}, "en", False)
    assert speed.layout.yaxis2.title.text == "lr"
