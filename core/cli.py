"""`paddle-studio`: every studio action, headless. Each verb is a thin call into core/.

``--json`` prints one JSON object on stdout. Exit 0 on success; otherwise a clear message on
stderr and a non-zero code (1: the data or config has problems, 2: the command was refused).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _print_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


def _fail(msg: str, code: int = 2) -> int:
    sys.stderr.write(f"paddle-studio: {msg}\n")
    return code


def os_error_message(e: OSError) -> str:
    """An OSError as one line: the file it is about and what to do."""
    import errno

    hints = {errno.ENOSPC: "the disk is full; free some space and try again",
             errno.EDQUOT: "the disk quota is used up; free some space and try again",
             errno.EROFS: "the workspace is on a read-only file system",
             errno.EACCES: "permission denied; check the workspace's owner and mode",
             errno.EPERM: "operation not permitted; check the workspace's owner and mode",
             errno.EADDRINUSE: "the address is already in use; pick another port with --port"}
    what = hints.get(e.errno) or e.strerror or str(e)
    return f"{e.filename}: {what}" if getattr(e, "filename", None) else what


# ---------------------------------------------------------------- verbs


def cmd_ui(a) -> int:
    # the studio is loaded by name: the engine never imports the UI (tests/test_architecture.py)
    import importlib

    # a secret on the command line is visible to every user in `ps`: the environment is not; read,
    # it leaves this process's environment, so no child (warm spare, run, job, worker) inherits it
    env_auth = os.environ.pop("PADDLE_STUDIO_AUTH", None)
    auth = a.auth or env_auth or None
    try:
        bind = importlib.import_module("studio.bind")  # light: a refused --host is said before gradio loads
    except ImportError as e:
        return _fail(f"the studio UI is not installed ({e}); every other verb works without it")
    try:
        bind.check_bind(a.host, auth)
    except ValueError as e:
        return _fail(str(e))
    try:
        app = importlib.import_module("studio.app")
    except ImportError as e:
        return _fail(f"the studio UI is not installed ({e}); every other verb works without it")
    return app.main(host=a.host, port=a.port, auth=auth, lang=a.lang, demo=a.demo)


def cmd_demo_init(a) -> int:
    from core import demo

    log = (lambda m: sys.stderr.write(m + "\n")) if a.json else print
    if a.family:
        out = demo.family_model(a.family, seed=a.seed, name=a.name, out=a.out, hf=a.hf, log=log)
        if a.json:
            _print_json(out)
        return 0
    if a.hf or a.name or a.out:
        return _fail("--name, --out and --hf go with --family")
    out = demo.init(seed=a.seed, log=log)
    if a.json:
        _print_json(out)
    else:
        print(f"demo dataset: {out['dataset']}\ndemo model:   {out['model']}")
        print(f"created: {', '.join(out['created']) or 'nothing (already there)'} in {out['seconds']} s")
    return 0


def _size(n) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{n} B"
        n /= 1024


def _count(n) -> str:
    if n is None:
        return "?"
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return str(n)


def cmd_models_inspect(a) -> int:
    from core.models import imports

    info = imports.inspect(a.folder)
    if a.json:
        _print_json(info)
    else:
        print(f"{info['path']}\n  family {info['family']} ({info['architecture']}), {info['format']} weights "
              f"({', '.join(info['weights'])}), {_count(info['parameters'])} parameters, {info['dtype']}, "
              f"{_size(info['size_bytes'])}\n  tokenizer {info['tokenizer']}; chat template: "
              f"{'yes' if info['chat_template'] else 'no'}")
    return 0


def cmd_models_import(a) -> int:
    from core.models import imports

    log = (lambda m: sys.stderr.write(m + "\n")) if a.json else print
    out = imports.import_model(a.folder, a.name, link=a.link, log=log)
    if a.json:
        _print_json(out)
    return 0


def cmd_models_list(a) -> int:
    from core import catalog

    rows = catalog.model_rows()
    if a.json:
        _print_json(rows)
        return 0
    if not rows:
        print("no models (paddle-studio demo init, or paddle-studio models import DIR --name NAME)")
    for r in rows:
        print(f"{r['name']:28} {r['kind']:9} {r['family'] or '?':9} {_count(r['parameters']):>7} {_size(r['size_bytes']):>10}"
              f"  template {'yes' if r['chat_template'] else 'no '}  {r['origin_text']}")
    return 0


def _format_problem(p: dict) -> str:
    where = p["file"] + (f":{p['line']}" if p["line"] else "")
    fld = f" [{p['field']}]" if p["field"] else ""
    return f"{where}{fld} {p['severity']}: {p['message']}"


def cmd_data_validate(a) -> int:
    from core.data import datasets

    rep = datasets.validate(a.file, fmt=a.format, max_errors=a.max_errors, max_line_bytes=a.max_line_bytes)
    out = rep.to_dict()
    if a.tokenizer:
        out["token_stats"] = datasets.token_stats(
            a.file, a.tokenizer, src_length=a.src_length, max_length=a.max_length, fmt=rep.format
        )
    if a.json:
        _print_json(out)
    else:
        for p in out["problems"]:
            print(_format_problem(p))
        if rep.problems_omitted:
            print(f"... and {rep.problems_omitted} more problems")
        print(
            f"format {rep.format}: {rep.records} records, {rep.good} good, {rep.bad} bad, "
            f"{rep.duplicates} duplicates, {rep.multi_turn} multi-turn, {rep.warnings} warnings "
            f"({rep.bytes / 1e6:.1f} MB in {rep.seconds:.2f} s)"
        )
        if a.tokenizer:
            ts = out["token_stats"]
            if ts.get("text"):
                print(f"tokens over {ts['records']} records of raw text: mean {ts['total']['mean']:.1f} max "
                      f"{ts['total']['max']} (pretraining packs them into blocks of max_length={a.max_length}: "
                      f"nothing is truncated)")
            else:
                print(
                f"tokens over {ts['records']} records: src mean {ts['src']['mean']:.1f} max {ts['src']['max']}, "
                f"src+tgt mean {ts['total']['mean']:.1f} max {ts['total']['max']}; "
                f"truncated by src_length={a.src_length}: {ts['truncated_src']}, "
                f"by max_length={a.max_length}: {ts['truncated_total']}"
                )
    return 0 if rep.ok else 1


def cmd_data_convert(a) -> int:
    from core.data import datasets

    out = datasets.convert(a.input, a.output, fmt=a.from_format, skip_bad=not a.strict)
    if a.json:
        _print_json(out)
    else:
        print(f"{out['format']} -> src/tgt: wrote {out['written']} records to {a.output}, skipped {out['skipped']} bad")
        for p in out["report"]["problems"]:
            if p["severity"] == "error":
                print("  skipped " + _format_problem(p))
    return 0


def cmd_data_import(a) -> int:
    from core.data import datasets

    meta = datasets.import_dataset(
        a.file, a.name, dev_ratio=a.dev_ratio, fmt=a.from_format, seed=a.seed, skip_bad=a.skip_bad
    )
    if a.json:
        _print_json(meta)
    else:
        print(f"imported {meta['name']}: {meta['train']} train, {meta['dev']} dev ({meta['format']})")
    return 0


def cmd_data_list(a) -> int:
    from core.data import datasets

    items = datasets.list_datasets()
    if a.json:
        _print_json({"datasets": items})
    else:
        for m in items:
            print(f"{m['name']:24} train {m.get('train', '?'):>7} dev {m.get('dev', '?'):>6}  {m.get('source', '')}")
    return 0


def cmd_data_preview(a) -> int:
    from core.data import datasets

    res = datasets.preview_page(a.dataset, split=a.split, page=a.page, page_size=a.page_size, fmt=a.format)
    if a.json:
        _print_json(res)
        return 0
    print(f"{res['path']} [{res['split']}] format {res['format']} ({res['kind']}): page {res['page']} of "
          f"{res['pages']}, {res['total']} rows")
    cols = res["columns"][1:]
    for r in res["rows"]:
        where = f"{r['file']}:{r['line']}" if len(res["files"]) > 1 else str(r["line"])
        if r["problem"]:
            fld = f" [{r['problem']['field']}]" if r["problem"]["field"] else ""
            print(f"{where:>6}{fld} {r['problem']['message']}")
        else:
            print(f"{where:>6} " + " | ".join(f"{c}: {str(r[c]).replace(chr(10), ' / ')}" for c in cols if r[c] != ""))
    return 0


def _mix_part(count: bool):
    def parse(spec: str):
        from core.data import mix

        try:
            return mix.parse_part(spec, count=count)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{spec!r}: expected DATASET={'N' if count else 'RATIO'} ({e})") from None

    return parse


def cmd_data_mix(a) -> int:
    from core.data import mix

    meta = mix.mix(a.name, [*(a.part or []), *(a.part_count or [])], seed=a.seed)
    if a.json:
        _print_json(meta)
    else:
        print(f"mixed {meta['name']}: {meta['train']} train, {meta['dev']} dev ({meta['format']}, seed {meta['seed']})")
        for p in meta["mix"]["parts"]:
            amount = f"ratio {p['ratio']:g}" if p["ratio"] is not None else f"count {p['count']}"
            print(f"  {p['dataset']}: {amount}: train {p['train_taken']} of {p['train_available']}, "
                  f"dev {p['dev_taken']} of {p['dev_available']}")
    return 0


def _load_run_config(path: str, name: str | None = None):
    """A PaddleNLP argument JSON, a run preset file, or a preset name -> RunConfig."""
    from core.train import config

    return config.load_run_file(path, name)


def _file_problems(e, as_json: bool, code: int = 1) -> int:
    """A config file refused before any check of its values: every problem; exit ``code`` (1 for
    `config check`, which reports problems; 2 for `train`, which is refused)."""
    if as_json:
        _print_json({"ok": False, "problems": e.problems})
    else:
        for p in e.problems:
            sys.stderr.write(f"paddle-studio: {e.path}: {_problem_line(p, p['message'])}\n")
    return code


def _problem_line(p: dict, message: str) -> str:
    """``field: message``, the field once: most messages already begin with their field."""
    field = p.get("field") or ""
    return message if field and message.startswith(field) else f"{field or '-'}: {message}"


def _apply_parallel(cfg, a) -> None:
    p = cfg.parallel
    if a.nproc:
        p.nproc = a.nproc
    if a.devices:
        p.devices = a.devices
    if a.nnodes:
        p.nnodes = a.nnodes
    if a.master:
        p.master = a.master
    if a.rank is not None:
        p.rank = a.rank
    if getattr(a, "stall_timeout", None) is not None:
        p.stall_timeout = a.stall_timeout
    if getattr(a, "nodes", None):
        p.nodes = a.nodes
    if getattr(a, "port_range", None):
        p.port_range = a.port_range


def _quantization_file(path: str) -> bool:
    """Is ``path`` an llm/run_quantization.py argument file (do_ptq / do_gptq / ...)? Those go to Quantize."""
    from core.train import upstream

    try:
        return upstream.is_quantization(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return False


def _dry_run(cfg, steps: int, as_json: bool) -> int:
    """Train ``steps`` steps of ``cfg`` as a run of its own and wait for it; 0 when it succeeded."""
    import time

    from core.train import estimate, runs

    if steps < 1:
        print("--steps must be at least 1", file=sys.stderr)
        return 2
    run_id = estimate.dry_run(cfg, steps)
    if not as_json:
        print(f"dry run {run_id}: {steps} steps ...", flush=True)
    try:
        while (st := runs.status(run_id))["state"] in runs.ACTIVE:
            time.sleep(0.5)
    except KeyboardInterrupt:
        runs.stop(run_id)
        print(f"dry run {run_id} stopped", file=sys.stderr)
        return 130
    if st["state"] != "succeeded":
        print(f"dry run {run_id} {st['state']}: {st.get('reason') or ''} (paddle-studio runs log {run_id})",
              file=sys.stderr)
        return 1
    return 0


def cmd_config_check(a) -> int:
    from core.train import config

    if _quantization_file(a.config):
        from core.quant import pipeline

        plan = pipeline.plan_from_paddlenlp(a.config)
        pipeline.print_plan(plan, a.json)
        if not a.json:
            print("ok: `paddle-studio train FILE` (or quantize --config FILE) starts it" if plan["ok"]
                  else f"{len(plan['problems'])} problem(s)")
        return 0 if plan["ok"] else 1
    try:
        cfg = _load_run_config(a.config)
    except config.FileProblems as e:
        return _file_problems(e, a.json)
    problems = config.check(cfg)
    from core.train import estimate

    if a.dry_run and not problems:
        dry = _dry_run(cfg, a.steps, a.json)
        if dry:
            return dry
    est = estimate.estimate(cfg) if not problems else None  # will it fit? (calibrated by this machine's runs)
    if a.json:
        _print_json({"ok": not problems, "problems": [{**p, "message": config.check_message(p)} for p in problems],
                     "estimate": est})
    else:
        for p in problems:
            print(_problem_line(p, config.check_message(p)))
        print("ok" if not problems else f"{len(problems)} problem(s)")
        if est:
            secs = f"{est['seconds']:.0f} s" if est["seconds"] is not None else "?"
            by = f"its dry run {est['dry_run']}" if est.get("dry_run") else f"{est['calibrated_runs']} run(s)"
            print(f"estimate: {est['per_process_mib']:.0f} MiB per process ({est['total_mib']:.0f} MiB in all, "
                  f"{est['free_mib']:.0f} MiB free), {secs} for {est['steps'] or '?'} steps; calibrated by "
                  f"{by}" + ("" if est["fits_memory"] else "; DOES NOT FIT the free memory"))
    return 0 if not problems else 1


def _follow(run_id: str, as_json: bool) -> int:
    """Print metrics as they arrive until the run ends; Ctrl-C stops the run."""
    import time

    from core.train import runs

    offset = 0
    try:
        while True:
            recs, offset = runs.read_metrics(run_id, offset)
            if not as_json:
                for r in recs:
                    if "loss" in r:
                        print(f"step {r['step']}/{r.get('max_steps')} loss {r['loss']:.4f} lr {r.get('lr', 0):.2e}"
                              + (f" eta {r['eta']:.0f}s" if r.get("eta") is not None else ""), flush=True)
                    if "eval_loss" in r:
                        print(f"step {r['step']} eval_loss {r['eval_loss']:.4f} ppl {r.get('eval_ppl', 0):.3f}", flush=True)
            st = runs.status(run_id)
            if st.get("state") not in runs.ACTIVE:
                recs, offset = runs.read_metrics(run_id, offset)
                break
            time.sleep(0.2)
    except KeyboardInterrupt:
        sys.stderr.write(f"stopping {run_id}\n")
        st = runs.stop(run_id)
    if as_json:
        _print_json(runs.show(run_id))
    else:
        print(f"run {run_id}: {st['state']}" + (f" ({st.get('reason')})" if st.get("reason") else ""))
    return 0 if st.get("state") == "succeeded" else 1


def cmd_train(a) -> int:
    from core.train import config
    from core.train import runs

    if _quantization_file(a.config):  # PaddleNLP runs it with run_quantization.py; the studio with Quantize
        from core.quant import pipeline

        return pipeline.cli_main(["--config", a.config, *(["--out", a.name] if a.name else []),
                                  *(["--json"] if a.json else [])])
    try:
        cfg = _load_run_config(a.config, a.name)
    except config.FileProblems as e:
        return _file_problems(e, a.json, code=2)
    _apply_parallel(cfg, a)
    problems = config.check(cfg)
    if problems:  # refused: exit 2 (README), every problem, as JSON too when asked
        if a.json:
            _print_json({"ok": False, "problems": [{**p, "message": config.check_message(p)} for p in problems]})
        for p in problems:
            sys.stderr.write(f"paddle-studio: {_problem_line(p, config.check_message(p))}\n")
        return 2
    if cfg.parallel.node_names():  # several machines: every node checked first, all problems at once
        from core.train import cluster, nodes

        if a.copy:
            for c in nodes.copy_missing(cfg.to_paddlenlp(output_dir="-"), cfg.parallel.node_names()):
                sys.stderr.write(f"copied {c['what']} to {c['node']}:{c['dest']} ({c['bytes'] / 1e6:.3g} MB)\n")
        pre = cluster.preflight(cfg)
        if not pre["ok"]:
            if a.json:
                _print_json({"ok": False, "problems": pre["problems"]})
            for p in pre["problems"]:
                sys.stderr.write(f"paddle-studio: {p['node']}: {p['message']}\n")
            return 2
        run_id = cluster.create(cfg, master=pre["master"])
    else:
        run_id = runs.create(cfg)
    st = runs.start(run_id)
    if a.detach:
        if a.json:
            _print_json({"run_id": run_id, "status": st, "dir": str(runs.run_dir(run_id))})
        else:
            print(f"{run_id} {st['state']}  ({runs.run_dir(run_id)})")
        return 0
    if not a.json:
        print(f"run {run_id} {st['state']}: {runs.run_dir(run_id)}")
    return _follow(run_id, a.json)


def verify_line(res: dict, summary: dict | None = None) -> str:
    """One line for a run's round-trip verdict (core.train.verify)."""
    from core.train import verify

    s = summary or verify.summary(res) or {}
    state = s.get("state")
    if state == "verified" and s.get("reloaded_eval_loss") is not None:
        return (f"verified: reloaded eval loss {s['reloaded_eval_loss']:.4g} vs {s['training_eval_loss']:.4g} in training "
                f"(step {s['step']}, {s['target']})")
    if state in ("failed", "error"):
        return f"{state}: {s.get('reason') or res.get('reason') or 'see verify.json'}"
    return f"verification: {state or 'not run'}"


def _board(a) -> int:
    """`runs board RUN`: VisualDL's board of the run, served until Ctrl-C (it ends with this process)."""
    import time

    from core import jobs
    from core.train import tracking

    if a.stop:
        stopped = tracking.stop_board(a.run)
        print(f"stopped the VisualDL board of {a.run}" if stopped else f"no VisualDL board of {a.run} was running")
        return 0
    try:
        rec = tracking.start_board(a.run, port=a.port)
    except jobs.Refused as e:
        return _fail(str(e))
    if a.json:
        _print_json(rec)
    else:
        print(f"VisualDL: {rec['url']} (logs {rec['logdir']}); Ctrl-C stops it", flush=True)
    if rec.get("owner") != os.getpid():
        return 0  # the studio's board, already running: it stays the studio's
    try:
        while tracking.board(a.run):
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        tracking.stop_board(a.run)
    return 0


def cmd_runs(a) -> int:
    from core.train import runs

    if a.runs_verb == "list":
        items = runs.list_runs()
        if a.json:
            _print_json({"runs": items})
        else:
            for r in items:
                p = r["progress"]
                loss = f"{p['loss']:.4f}" if p["loss"] is not None else "-"
                print(f"{r['run_id']:40} {r['status'].get('state', '?'):10} {p['step']}/{p['max_steps']} loss {loss}")
        return 0
    if a.runs_verb == "show":
        out = runs.show(a.run)
        if a.json:
            _print_json(out)
        else:
            st, p = out["status"], out["progress"]
            print(f"{a.run}: {st.get('state')} step {p['step']}/{p['max_steps']} loss {p['loss']} eval_loss {p['eval_loss']}")
            print(f"dir: {out['dir']}\ncommand: {' '.join(out['command'])}")
            if st.get("reason"):
                print(f"reason: {st['reason']}")
            if out.get("verify"):
                print(verify_line({"state": out["verify"]["state"], "targets": {}}, out["verify"]))
        return 0
    if a.runs_verb == "board":
        return _board(a)
    if a.runs_verb == "verify":
        from core.train import verify

        d = runs.run_dir(a.run)
        if runs.status(d).get("state") in runs.ACTIVE:
            print(f"run {a.run} is {runs.status(d)['state']}: verify it once it has ended", file=sys.stderr)
            return 1
        res = verify.verify_run(d)
        if a.json:
            _print_json({"run_id": a.run, **res, "summary": verify.summary(res)})
        else:
            print(verify_line(res))
            for name, t in res["targets"].items():
                print(f"  {name}: {t['state']}" + (f" - {t['reason']}" if t.get("reason") else ""))
        return 0 if res["state"] in ("verified", "none") else 1
    if a.runs_verb in ("doctor", "nodes", "node-log"):
        return _runs_cluster(a)
    if a.runs_verb == "control":
        from core.train import control

        if a.action == "history":
            items = control.history(runs.run_dir(a.run))
            if a.json:
                _print_json({"run_id": a.run, "control": items})
            for r in ([] if a.json else items):
                what = r["action"] + (f"={r['value']:g}" if "value" in r else "")
                where = (f"step {r['applied_step']}: {r.get('effect', '')}" if "applied_step" in r
                         else f"accepted for step {r['at_step']}" if "at_step" in r else "waiting for the next step")
                print(f"{what:18} {where}")
            return 0
        try:
            req = runs.control_run(a.run, a.action)
        except control.ControlError as e:
            return _fail(str(e))
        if a.json:
            _print_json({"run_id": a.run, "request": req})
        else:
            print(f"{a.run}: {a.action} requested; it takes effect at the next step boundary "
                  f"(paddle-studio runs control {a.run} history)")
        return 0
    if a.runs_verb == "stop":
        st = runs.stop(a.run)
    elif a.runs_verb == "resume":
        st = runs.resume(a.run, nproc=a.nproc)
    else:  # continue
        st = runs.continue_run(a.run, epochs=a.epochs, steps=a.steps)
    if a.json:
        _print_json({"run_id": a.run, "status": st})
    else:
        print(f"{a.run}: {st.get('state')}")
    if a.runs_verb in ("resume", "continue") and a.follow:
        return _follow(a.run, a.json)
    return 0


def _runs_cluster(a) -> int:
    from core.train import cluster

    if a.runs_verb == "doctor":
        res = cluster.doctor(a.run)
        if a.json:
            _print_json(res)
        else:
            for r, v in res["ranks"].items():
                print(f"rank {r} ({v['node']}): {v['where']}")
        return 0
    if a.runs_verb == "node-log":
        print(cluster.node_log(a.run, a.node), end="")
        return 0
    rows = cluster.strip(a.run)
    if a.json:
        _print_json({"run_id": a.run, "nodes": rows})
    elif not rows:
        print(f"{a.run} runs on this machine only")
    for r in rows if not a.json else []:
        mem = f"{r['rss'] / 2**20:.0f} MiB" if r.get("rss") else "-"
        print(f"{r['node']:12} ranks {','.join(map(str, r['ranks'])):6} {r['state'] or '-':10} step {r['step'] if r['step'] is not None else '-':>5} "
              f"mem {mem:>9}  {r['last_line'][:80]}")
        if r.get("command"):
            print(f"  paste on {r['node']}:\n{r['command']}")
    return 0


def cmd_nodes(a) -> int:
    from core.train import nodes

    v = a.nodes_verb
    if v == "list":
        items = nodes.list_nodes()
        if a.json:
            _print_json({"nodes": [nodes.asdict(n) for n in items]})
        for n in items if not a.json else []:
            print(f"{n.name:12} {n.label():40} home {n.home or '-'}")
        if not items and not a.json:
            print("no nodes (add one: paddle-studio nodes add NAME --host H --python P --studio-dir D --home W)")
        return 0
    if v in ("add", "edit"):
        if v == "edit":
            old = nodes.asdict(nodes.get(a.name))
        else:
            old = {"name": a.name}
        given = {"kind": "manual" if a.manual else None, "host": a.host, "port": a.port, "user": a.user,
                 "key_file": a.key, "python": a.python, "studio_dir": a.studio_dir, "home": a.home,
                 "head_address": a.head_address, "name": a.rename}
        if a.env is not None:
            given["env"] = dict(kv.split("=", 1) for kv in a.env if "=" in kv)
            bad = [kv for kv in a.env if "=" not in kv]
            if bad:
                return _fail(f"--env takes NAME=value, not {bad[0]!r}")
        node = nodes.save({**old, **{k: x for k, x in given.items() if x is not None}},
                          replace=a.name if v == "edit" else None)
        print(f"{v == 'add' and 'added' or 'saved'} {node.label()}")
        return 0
    if v == "remove":
        nodes.remove(a.name)
        print(f"removed {a.name}")
        return 0
    if v == "test":
        res = nodes.test_node(a.name)
        if a.json:
            _print_json(res)
        else:
            ver = res["versions"]
            print(f"{a.name}: reachable; paddle {ver['paddle']}, paddlenlp {ver['paddlenlp']}, studio {ver['studio']}, "
                  f"python {ver['python']}; {res['cpus']} CPU core(s), {res['gpus']} GPU(s), "
                  f"{(res['free_bytes'] or 0) / 2**30:.3g} GiB free in {res['home']}")
            for k, (theirs, mine) in res["differs"].items():
                print(f"  differs: {k} {theirs} there, {mine} here")
        return 0 if not res["differs"] else 1
    # preflight / copy: a run config and the nodes it would span
    from core.train import cluster, config

    try:
        cfg = _load_run_config(a.config)
    except config.FileProblems as e:
        return _file_problems(e, a.json, code=2)
    _apply_parallel(cfg, a)
    if not cfg.parallel.node_names():
        return _fail("name the nodes: --nodes NAME[,NAME...]")
    if v == "copy":
        done = nodes.copy_missing(cfg.to_paddlenlp(output_dir="-"), cfg.parallel.node_names(),
                                  progress=None if a.json else
                                  (lambda n, w, sent, total: print(f"\r{n}: {w} {sent / 1e6:.3g}/{total / 1e6:.3g} MB",
                                                                   end="", flush=True)))
        if a.json:
            _print_json({"copied": done})
        else:
            print()
            for c in done:
                print(f"copied {c['what']} to {c['node']}:{c['dest']} ({c['bytes'] / 1e6:.3g} MB)")
            if not done:
                print("every node has the run's inputs already")
        return 0
    res = cluster.preflight(cfg)
    if a.json:
        _print_json(res)
    else:
        for p in res["problems"]:
            print(f"{p['node']}: {p['message']}")
        print(f"ok: every node is ready (master {res['master']})" if res["ok"] else f"{len(res['problems'])} problem(s)")
    return 0 if res["ok"] else 1


def cmd_merge(a) -> int:
    from core.models import merge

    log = (lambda m: sys.stderr.write(m + "\n")) if a.json else print
    out = merge.merge(a.base, a.adapter, a.out, log=log)
    if a.json:
        _print_json(out)
    else:
        print(f"merged into {out['out']}; max |merged - adapter| logits = {out['check']['max_abs_diff']:.3g}")
    return 0


def cmd_export(a) -> int:
    from core.models import export

    export.check(a.model, a.out, a.dtype)  # every refusal before paddle is imported
    log = (lambda m: sys.stderr.write(m + "\n")) if a.json else print
    res = export.export(a.model, a.out, a.dtype, log=log)
    if a.json:
        _print_json(res)
    else:
        print(f"exported to {res['out']} ({', '.join(res['graph'])}); check {res['check']['matched']}/"
              f"{res['check']['prompts']} prompts token for token against dygraph; {res['seconds']} s")
    return 0


def cmd_eval(a) -> int:
    from core.models import evaluate

    kw = dict(limit=a.limit, max_new_tokens=a.max_new_tokens, src_length=a.src_length, max_length=a.max_length,
              with_generation=not a.no_generation, split=a.split)
    if a.predictions and a.no_generation:
        return _fail("--predictions writes the model's answers: drop --no-generation")
    if a.target:
        if a.predictions:
            return _fail("--predictions takes one model (--model/--adapter), not --target")
        res = evaluate.compare([evaluate.parse_target(s) for s in a.target], a.data, **kw)
        if a.json:
            _print_json(res)
        else:
            for r in res["rows"]:
                print(f"{r['label']:14} " + "  ".join(f"{k} {r[k]:.4g}" for k in evaluate.METRICS if r.get(k) is not None))
        return 0
    if a.predictions:
        res = evaluate.predict(a.model, a.adapter, a.data, a.predictions, **kw)
    else:
        res = evaluate.evaluate(a.model, a.adapter, a.data, **kw)
    if a.json:
        _print_json(res)
    else:
        keys = ["eval_loss", "perplexity", "token_accuracy", "exact_match", "bleu4", "rouge_l"]
        print("  ".join(f"{k} {res[k]:.4f}" for k in keys if k in res) + f"  ({res['records']} records, {res['seconds']} s)")
        for n in res.get("notes", []):
            print(f"note: {n['message']}")
        if res.get("predictions_file"):
            print(f"predictions: {res['predictions_file']} ({res['predictions_count']} records)")
    return 0


def _gen_kwargs(a) -> dict:
    kw = {"temperature": a.temperature, "top_p": a.top_p, "top_k": a.top_k,
          "repetition_penalty": a.repetition_penalty, "seed": a.seed, "src_length": a.src_length}
    if a.max_new_tokens is not None:
        kw["max_new_tokens"] = a.max_new_tokens
    return kw


def cmd_chat(a) -> int:
    import time

    from core.chat.engine import ChatEngine, GenParams

    params = GenParams.of(**_gen_kwargs(a))  # check before loading the model
    engine = ChatEngine(a.model, a.adapter)
    system = [{"role": "system", "content": a.system}] if a.system else []
    if a.prompt is not None:
        t = time.perf_counter()
        g = engine.start(system + [{"role": "user", "content": a.prompt}], params)
        try:
            for d in g:
                if not a.json:
                    sys.stdout.write(d)
                    sys.stdout.flush()
        except KeyboardInterrupt:
            g.close()
        if a.json:
            _print_json({"model": engine.model_dir, "adapter": engine.adapter_dir, "prompt": a.prompt,
                         "system": a.system, "answer": g.text, "finish_reason": g.finish_reason,
                         "usage": g.usage, "seconds": round(time.perf_counter() - t, 3)})
        else:
            sys.stdout.write("\n")
        return 0
    # a REPL: one line per question; /reset forgets the conversation, /exit or EOF ends
    history: list[dict] = []
    sys.stderr.write(f"chatting with {engine.name} ({engine.kind}); /reset clears the history, /exit quits\n")
    while True:
        try:
            line = input("> " if sys.stdin.isatty() else "")
        except (EOFError, KeyboardInterrupt):
            return 0
        if line.strip() in ("/exit", "/quit"):
            return 0
        if line.strip() == "/reset":
            history = []
            continue
        if not line.strip():
            continue
        msgs = system + history + [{"role": "user", "content": line}]
        try:
            g = engine.start(msgs, params)
        except ValueError as e:
            sys.stderr.write(f"paddle-studio: {e}\n")
            continue
        try:
            for d in g:
                sys.stdout.write(d)
                sys.stdout.flush()
        except KeyboardInterrupt:
            g.close()
        sys.stdout.write("\n")
        sys.stdout.flush()
        history += [{"role": "user", "content": line}, {"role": "assistant", "content": g.text}]


def cmd_serve(a) -> int:
    from core.chat import server as serve

    return serve.serve(a.model, a.adapter, host=a.host, port=a.port, api_key=a.api_key, name=a.name,
                       ready_file=a.ready_file)


def cmd_jobs(a) -> int:
    from core import catalog, jobs

    if a.jobs_verb == "list":
        rows = catalog.activity()
        if a.json:
            _print_json(rows)
            return 0
        for r in rows:
            pct = "" if r["fraction"] is None else f"{r['fraction'] * 100:.0f}%"
            print(f"{r['id']:44} {r['kind']:9} {r['state'] or '?':10} {pct:>5} {r['text'] or ''}")
        return 0
    if a.jobs_verb == "stop":
        st = catalog.stop(a.id)
        if a.json:
            _print_json(st)
        else:
            print(f"{a.id}: {st.get('state')}")
        return 0
    info = jobs.show(a.id)
    if a.jobs_verb == "log":
        sys.stdout.write(jobs.read_log(a.id, 200000))
        return 0
    if a.json:
        _print_json(info)
    else:
        st = info["status"]
        print(f"{info['job_id']} ({info['kind']}): {st.get('state')}" + (f" — {st['reason']}" if st.get("reason") else ""))
        print("command:", " ".join(info["argv"]))
        if info.get("progress"):
            print("progress:", info["progress"].get("text"))
    return 0


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="paddle-studio", description="Paddle LLM Studio: UI and headless verbs")
    sub = p.add_subparsers(dest="verb")

    def ui_args(q):
        q.add_argument("--host", default="127.0.0.1", help="address to bind (non-loopback needs --auth)")
        q.add_argument("--port", type=int, default=7860)
        q.add_argument("--auth", default=None, metavar="USER:PASS", help="require this login (default: $PADDLE_STUDIO_AUTH, which `ps` does not show)")
        q.add_argument("--lang", default="en", choices=["en", "zh"], help="initial UI language")
        q.add_argument("--demo", action="store_true",
                       help="build the demo dataset and model as a job if the workspace lacks them (the page opens at once)")

    ui_args(p)
    ui = sub.add_parser("ui", help="start the studio (default)")
    ui_args(ui)
    ui.set_defaults(func=cmd_ui)

    demo = sub.add_parser("demo", help="demo workspace").add_subparsers(dest="demo_verb", required=True)
    di = demo.add_parser("init", help="tiny model + tokenizer + dataset, idempotent")
    di.add_argument("--seed", type=int, default=1234)
    di.add_argument("--family", help="instead: a tiny random model of this family (presets/models) as models/tiny-FAMILY")
    di.add_argument("--name", help="with --family: the model's name in models/")
    di.add_argument("--out", metavar="DIR", help="with --family: write it to DIR, outside models/ (to try models import)")
    di.add_argument("--hf", action="store_true", help="with --out: in Hugging Face's layout (PyTorch names, safetensors)")
    di.add_argument("--json", action="store_true")
    di.set_defaults(func=cmd_demo_init)

    mo = sub.add_parser("models", help="models in the workspace: list, inspect, import").add_subparsers(dest="models_verb", required=True)
    ml = mo.add_parser("list", help="every model: base, imported, trained, merged, quantized, adapters")
    ml.add_argument("--json", action="store_true")
    ml.set_defaults(func=cmd_models_list)
    mi = mo.add_parser("inspect", help="check a model folder without importing it (headers only)")
    mi.add_argument("folder")
    mi.add_argument("--json", action="store_true")
    mi.set_defaults(func=cmd_models_inspect)
    mm = mo.add_parser("import", help="check a PaddleNLP or Hugging Face folder and import it as models/NAME (converted if PyTorch)")
    mm.add_argument("folder")
    mm.add_argument("--name", required=True)
    mm.add_argument("--link", action="store_true", help="link a PaddleNLP folder instead of copying it")
    mm.add_argument("--json", action="store_true")
    mm.set_defaults(func=cmd_models_import)

    data = sub.add_parser("data", help="datasets").add_subparsers(dest="data_verb", required=True)
    v = data.add_parser("validate", help="check a file or dataset folder line by line")
    v.add_argument("file")
    v.add_argument("--format", default="auto", choices=["auto", "paddlenlp", "alpaca", "sharegpt", "messages", "text"])
    v.add_argument("--tokenizer", help="tokenizer folder for token-length statistics")
    v.add_argument("--src-length", type=int, default=1024)
    v.add_argument("--max-length", type=int, default=2048)
    v.add_argument("--max-errors", type=int, default=50)
    v.add_argument("--max-line-bytes", type=int, default=1_000_000)
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=cmd_data_validate)

    c = data.add_parser("convert", help="alpaca / sharegpt / messages -> src/tgt JSON lines")
    c.add_argument("input")
    c.add_argument("output")
    c.add_argument("--from", dest="from_format", default="auto", choices=["auto", "paddlenlp", "alpaca", "sharegpt", "messages", "text"])
    c.add_argument("--strict", action="store_true", help="refuse if any record is bad (default: skip them)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_data_convert)

    i = data.add_parser("import", help="import into workspace/datasets/NAME with a train/dev split")
    i.add_argument("file")
    i.add_argument("--name", required=True)
    i.add_argument("--dev-ratio", type=float, default=0.1)
    i.add_argument("--from", dest="from_format", default="auto", choices=["auto", "paddlenlp", "alpaca", "sharegpt", "messages", "text"])
    i.add_argument("--seed", type=int, default=42)
    i.add_argument("--skip-bad", action="store_true", help="import the good records, skip the bad ones")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=cmd_data_import)

    dl = data.add_parser("list", help="datasets in the workspace")
    dl.add_argument("--json", action="store_true")
    dl.set_defaults(func=cmd_data_list)

    dp = data.add_parser("preview", help="one page of a dataset (workspace name, folder or file) as rows")
    dp.add_argument("dataset", help="a workspace dataset name, a dataset folder or a data file")
    dp.add_argument("--split", default="train", help="train or dev (a single file has one split)")
    dp.add_argument("--page", type=int, default=1, help="page number, from 1 (clamped to the last page)")
    dp.add_argument("--page-size", type=int, default=20)
    dp.add_argument("--format", default="auto", choices=["auto", "paddlenlp", "alpaca", "sharegpt", "messages", "text",
                                                         "preference", "chosen_rejected", "kto"])
    dp.add_argument("--json", action="store_true")
    dp.set_defaults(func=cmd_data_preview)

    dm = data.add_parser("mix", help="mix 2+ datasets of one kind into workspace/datasets/NAME by ratio or count",
                         description="Each part gives round(RATIO x its train records) (0.5 a random half, 1 all, "
                                     "2 each record twice) or exactly N (--part-count); dev takes the same fraction of "
                                     "each part's dev records. Shuffled with --seed; meta.json records parts, amounts "
                                     "and seed.")
    dm.add_argument("--name", required=True)
    dm.add_argument("--part", action="append", type=_mix_part(False), metavar="DATASET=RATIO",
                    help="a dataset and the fraction of its train records to take (repeat for each dataset)")
    dm.add_argument("--part-count", action="append", type=_mix_part(True), metavar="DATASET=N",
                    help="a dataset and exactly how many train records to take")
    dm.add_argument("--seed", type=int, default=42)
    dm.add_argument("--json", action="store_true")
    dm.set_defaults(func=cmd_data_mix)

    cfg = sub.add_parser("config", help="run configs").add_subparsers(dest="config_verb", required=True)
    cc = cfg.add_parser("check", help="report every problem of a config without running it")
    cc.add_argument("config", help="PaddleNLP argument JSON, a presets/runs/*.json file or a preset name")
    cc.add_argument("--json", action="store_true")
    cc.add_argument("--dry-run", action="store_true",
                    help="first train the config for --steps steps (a run of its own, no evaluation, no checkpoint) "
                         "and calibrate the estimate by what it measured")
    cc.add_argument("--steps", type=int, default=20, help="steps of the dry run (default 20)")
    cc.set_defaults(func=cmd_config_check)

    t = sub.add_parser("train", help="launch a run (paddle.distributed.launch)")
    t.add_argument("config", help="PaddleNLP argument JSON, a presets/runs/*.json file or a preset name")
    t.add_argument("--name")
    t.add_argument("--nproc", type=int, help="processes on this machine (CPU data parallel)")
    t.add_argument("--devices", help="GPU ids, e.g. 0,1")
    t.add_argument("--nnodes", type=int)
    t.add_argument("--master", help="host:port of rank 0 (multi-node)")
    t.add_argument("--rank", type=int, help="this node's rank (multi-node)")
    t.add_argument("--stall-timeout", type=int, metavar="S",
                   help="fail the run when its log and metrics stay unchanged S seconds (default 1800, 300 with "
                        "--nodes; 0: never)")
    t.add_argument("--nodes", metavar="A,B", help="also train on these nodes (paddle-studio nodes list): this machine "
                                                   "is node 0; every node is checked first (preflight)")
    t.add_argument("--port-range", metavar="FIRST-LAST", help="ports the launchers may use (default 36000-36199)")
    t.add_argument("--copy", action="store_true", help="with --nodes: first copy the model and dataset to nodes that lack them")
    t.add_argument("--detach", action="store_true", help="return at once; the run goes on")
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=cmd_train)

    r = sub.add_parser("runs", help="runs in the workspace").add_subparsers(dest="runs_verb", required=True)
    for verb in ("list", "show", "stop", "resume", "continue", "verify", "doctor", "nodes", "node-log", "control",
                 "board"):
        q = r.add_parser(verb, help={"verify": "reload what the run saved in a fresh process and compare its dev "
                                               "loss with training's (also run after every run)",
                                     "doctor": "why is it stuck? where every rank on every machine is now (its stacks)",
                                     "nodes": "a multi-node run: each machine's state, step, last log line, memory",
                                     "node-log": "a node's own training log, fetched over SSH",
                                     "control": "steer a running run at its next step: save (a checkpoint now), "
                                                "eval, stop-after-eval, stop-and-save, lr=X; history",
                                     "board": "serve the VisualDL board of a run trained with report_to visualdl "
                                              "on 127.0.0.1 until Ctrl-C (--stop: stop the studio's board of it)"}.get(verb))
        if verb != "list":
            q.add_argument("run")
        if verb == "node-log":
            q.add_argument("node", help="a node name of the run, or head")
        if verb == "control":
            q.add_argument("action", help="save | eval | stop-after-eval | stop-and-save | lr=X | history")
        if verb == "board":
            q.add_argument("--port", type=int, help="port on 127.0.0.1 (default: a free one)")
            q.add_argument("--stop", action="store_true", help="stop the board the studio started for the run")
        if verb in ("resume", "continue"):
            q.add_argument("--follow", action="store_true", help="print metrics until it ends")
        if verb == "resume":
            q.add_argument("--nproc", type=int, help="resume with this many processes (data parallel; the checkpoint "
                                                     "loads on another count)")
        if verb == "continue":
            q.add_argument("--epochs", type=float, help="more epochs (default 1)")
            q.add_argument("--steps", type=int, help="more steps (runs that count steps)")
        q.add_argument("--json", action="store_true")
        q.set_defaults(func=cmd_runs)

    no = sub.add_parser("nodes", help="other machines for multi-node runs: list, add, edit, remove, test, preflight, "
                                      "copy").add_subparsers(dest="nodes_verb", required=True)
    nl = no.add_parser("list", help="the nodes this workspace knows")
    nl.add_argument("--json", action="store_true")
    for verb in ("add", "edit"):
        q = no.add_parser(verb, help="a machine reached over SSH where the studio is installed (or --manual)")
        q.add_argument("name")
        q.add_argument("--manual", action="store_true", help="not reachable from here: the studio prints the command to paste")
        q.add_argument("--host")
        q.add_argument("--port", type=int, help="SSH port (default 22)")
        q.add_argument("--user")
        q.add_argument("--key", metavar="FILE", help="SSH private key file on this machine")
        q.add_argument("--python", help="the studio's python on the node (absolute path)")
        q.add_argument("--studio-dir", help="the studio's folder on the node (absolute path)")
        q.add_argument("--home", help="the node's workspace (its PADDLE_STUDIO_HOME, absolute path)")
        q.add_argument("--env", nargs="*", metavar="NAME=VALUE", help="environment for the node's processes")
        q.add_argument("--head-address", help="how this node reaches this machine, when not by the run's master host")
        q.add_argument("--rename", help=argparse.SUPPRESS if verb == "add" else "a new name")
    for verb in ("remove", "test"):
        q = no.add_parser(verb, help={"test": "reach the node and compare its versions with this machine's"}.get(verb))
        q.add_argument("name")
        q.add_argument("--json", action="store_true")
    for verb in ("preflight", "copy"):
        q = no.add_parser(verb, help={"preflight": "check every node for a run config: reachable, same versions, "
                                                   "inputs readable, master port reachable, devices, disk",
                                      "copy": "copy the run's model and dataset to the nodes that lack them"}[verb])
        q.add_argument("config")
        q.add_argument("--nodes", required=True, metavar="A,B")
        q.add_argument("--port-range", metavar="FIRST-LAST")
        q.add_argument("--nproc", type=int)
        q.add_argument("--json", action="store_true")
        q.set_defaults(devices=None, nnodes=None, master=None, rank=None)
    no.required = True
    for q in no.choices.values():
        q.set_defaults(func=cmd_nodes)

    m = sub.add_parser("merge", help="fold an adapter into its base; checks logits")
    m.add_argument("--base", help="base model folder (default: recorded beside the adapter)")
    m.add_argument("--adapter", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--json", action="store_true")
    m.set_defaults(func=cmd_merge)

    sub.add_parser("quantize", help="quantize a merged model with a preset (presets/quant); see quantize --help",
                   add_help=False)

    x = sub.add_parser("export", help="export a base, trained or merged model to a static Paddle Inference folder "
                                      "(chat, eval and serve take it like any model)")
    x.add_argument("--model", required=True, help="a base, imported, trained or merged model folder (not an adapter)")
    x.add_argument("--out", required=True, help="the static folder to write (must not exist)")
    x.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"),
                   help="weights and compute dtype of the graph (CPU: float32)")
    x.add_argument("--json", action="store_true")
    x.set_defaults(func=cmd_export)

    e = sub.add_parser("eval", help="eval loss, perplexity, token accuracy, exact match, BLEU-4, ROUGE-L on a "
                       "dataset's dev or train split or any file; --predictions writes every answer")
    e.add_argument("--model", help="model folder (default with --adapter: its recorded base)")
    e.add_argument("--adapter")
    e.add_argument("--data", required=True, help="a dev file or a dataset folder")
    e.add_argument("--limit", type=int)
    e.add_argument("--max-new-tokens", type=int, default=64)
    e.add_argument("--src-length", type=int, default=1024)
    e.add_argument("--max-length", type=int, default=2048)
    e.add_argument("--no-generation", action="store_true")
    e.add_argument("--split", choices=("dev", "train"),
                   help="which split of a dataset folder to evaluate (default: dev; a file is taken whole)")
    e.add_argument("--predictions", metavar="FILE",
                   help="write every record's prompt, history, reference, answer and per-record exact match, "
                        "ROUGE-L and BLEU-4 to FILE (JSON lines, written atomically); one model, not --target")
    e.add_argument("--target", action="append", metavar="LABEL=MODEL[+ADAPTER]",
                   help="evaluate several models on the same records (repeat); replaces --model/--adapter")
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=cmd_eval)

    ch = sub.add_parser("chat", help="answer one prompt (streamed), or a REPL without --prompt")
    ch.add_argument("--model", help="model folder (default with --adapter: its recorded base)")
    ch.add_argument("--adapter", help="an unmerged adapter folder (LoRA, prefix, VeRA, LoKr)")
    ch.add_argument("--prompt", help="the question; without it, read questions from stdin")
    ch.add_argument("--system", help="system prompt")
    ch.add_argument("--max-new-tokens", type=int, help="default: up to 256 within the model's context")
    ch.add_argument("--temperature", type=float, default=0.0, help="0 (default) is greedy; otherwise sampling")
    ch.add_argument("--top-p", type=float, default=1.0)
    ch.add_argument("--top-k", type=int, default=0, help="0 turns top-k off")
    ch.add_argument("--repetition-penalty", type=float, default=1.0)
    ch.add_argument("--seed", type=int)
    ch.add_argument("--src-length", type=int, help="longest prompt in tokens (default: the model's context)")
    ch.add_argument("--json", action="store_true", help="print one JSON object (answer, finish_reason, usage)")
    ch.set_defaults(func=cmd_chat)

    sv = sub.add_parser("serve", help="an OpenAI-compatible chat server (POST /v1/chat/completions)")
    sv.add_argument("--model", help="model folder (default with --adapter: its recorded base)")
    sv.add_argument("--adapter", help="an unmerged adapter folder (LoRA, prefix, VeRA, LoKr)")
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (non-loopback needs --api-key)")
    sv.add_argument("--port", type=int, required=True, help="port; 0 picks a free one (see --ready-file)")
    sv.add_argument("--api-key", help="require Authorization: Bearer KEY (default: $PADDLE_STUDIO_API_KEY)")
    sv.add_argument("--name", help="the model id clients send (default: the folder name)")
    sv.add_argument("--ready-file", help="write {pid, port, url} here (atomically) once listening")
    sv.set_defaults(func=cmd_serve)
    jb = sub.add_parser("jobs", help="every run and job the studio or CLI started: list, show, log, stop")
    jsub = jb.add_subparsers(dest="jobs_verb", required=True)
    jl = jsub.add_parser("list", help="runs and jobs, newest first")
    jl.add_argument("--json", action="store_true")
    for verb, text in (("show", "one job's command, status, progress and result"), ("log", "a job's log"),
                       ("stop", "stop a run or job and every process it started")):
        q = jsub.add_parser(verb, help=text)
        q.add_argument("id")
        q.add_argument("--json", action="store_true")
    jb.set_defaults(func=cmd_jobs)
    return p


def _check_writable(target) -> None:
    from core import workspace

    workspace.check_writable(target)


def _quantize_out(argv: list[str]):
    """Where `quantize` will write: its --out folder; with --config, --out is a model name in the
    workspace's models/ (and without --out the workspace)."""
    if any(a == "--config" or a.startswith("--config=") for a in argv):
        from core import workspace

        return workspace.models_dir()
    for i, a in enumerate(argv):
        if a == "--out" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--out="):
            return a.split("=", 1)[1]
    return None


def _writes_to(a) -> list:
    """The folders a verb will write in (None: the workspace), checked before it loads anything:
    a read-only workspace is one line and exit 2 at once, not a traceback after a model load."""
    func = getattr(a, "func", None)
    if func in (cmd_merge, cmd_export):
        return [a.out]
    if func is cmd_serve:
        return [Path(a.ready_file).parent] if a.ready_file else []
    if func is cmd_eval and getattr(a, "predictions", None):
        return [Path(a.predictions).resolve().parent]
    if func in (cmd_models_import, cmd_data_import, cmd_train) or (
            func is cmd_demo_init and not getattr(a, "out", None)):
        return [None]
    if func is cmd_demo_init:
        return [a.out]
    if func is cmd_runs and a.runs_verb in ("resume", "continue", "verify"):
        return [None]
    return []


def _terminate(signum, frame):
    raise SystemExit(128 + signum)  # so finally-blocks remove temp folders when a job is stopped


class _KeepTerminateOverPaddle:
    """A meta-path finder that puts _terminate back once `import paddle` is done: importing paddle
    installs a C++ SIGTERM handler (a stack dump, then death by the signal) over ours, so a
    stopped merge/quantize/eval job died without its finally-blocks (temp folders left behind)."""

    def find_spec(self, name, path=None, target=None):
        if name != "paddle":
            return None
        import importlib.util
        import signal

        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            try:
                signal.signal(signal.SIGTERM, _terminate)
            except ValueError:  # imported outside the main thread
                pass

        spec.loader.exec_module = exec_module
        return spec


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from core.system import quiet_import_warnings

    quiet_import_warnings()  # every verb and job starts here
    import signal

    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        try:
            signal.signal(signal.SIGTERM, _terminate)
            if "paddle" not in sys.modules:
                sys.meta_path.insert(0, _KeepTerminateOverPaddle())
        except ValueError:  # not the main thread (called in-process)
            pass
    from core.data.datasets import DatasetError

    try:
        if argv[:1] == ["quantize"]:  # its own parser (core.quant.pipeline.cli_main): one definition of its flags
            if not {"-h", "--help"} & set(argv):
                _check_writable(_quantize_out(argv[1:]))
            from core.quant import pipeline

            return pipeline.cli_main(argv[1:])
        args = build_parser().parse_args(argv)
        func = getattr(args, "func", None) or cmd_ui
        for target in _writes_to(args):
            _check_writable(target)
        return func(args) or 0
    except DatasetError as e:
        return _fail(str(e), 1 if e.code == "has_bad_records" else 2)
    except (FileNotFoundError, FileExistsError, ValueError) as e:
        return _fail(str(e))
    except OSError as e:  # a full disk, a read-only or vanished workspace: one line, never a traceback
        return _fail(os_error_message(e))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
