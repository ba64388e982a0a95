"""`paddle-studio`: every studio action, headless. Each verb is a thin call into core/.

``--json`` prints one JSON object on stdout. Exit 0 on success; otherwise a clear message on
stderr and a non-zero code (1: the data or config has problems, 2: the command was refused).
"""

from __future__ import annotations

import argparse
import json
import sys


def _print_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


def _fail(msg: str, code: int = 2) -> int:
    sys.stderr.write(f"paddle-studio: {msg}\n")
    return code


# ---------------------------------------------------------------- verbs


def cmd_ui(a) -> int:
    from studio.app import main as ui_main

    return ui_main(host=a.host, port=a.port, auth=a.auth, lang=a.lang)


def cmd_demo_init(a) -> int:
    from core import demo

    log = (lambda m: sys.stderr.write(m + "\n")) if a.json else print
    out = demo.init(seed=a.seed, log=log)
    if a.json:
        _print_json(out)
    else:
        print(f"demo dataset: {out['dataset']}\ndemo model:   {out['model']}")
        print(f"created: {', '.join(out['created']) or 'nothing (already there)'} in {out['seconds']} s")
    return 0


def _format_problem(p: dict) -> str:
    where = p["file"] + (f":{p['line']}" if p["line"] else "")
    fld = f" [{p['field']}]" if p["field"] else ""
    return f"{where}{fld} {p['severity']}: {p['message']}"


def cmd_data_validate(a) -> int:
    from core import datasets

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
            print(
                f"tokens over {ts['records']} records: src mean {ts['src']['mean']:.1f} max {ts['src']['max']}, "
                f"src+tgt mean {ts['total']['mean']:.1f} max {ts['total']['max']}; "
                f"truncated by src_length={a.src_length}: {ts['truncated_src']}, "
                f"by max_length={a.max_length}: {ts['truncated_total']}"
            )
    return 0 if rep.ok else 1


def cmd_data_convert(a) -> int:
    from core import datasets

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
    from core import datasets

    meta = datasets.import_dataset(
        a.file, a.name, dev_ratio=a.dev_ratio, fmt=a.from_format, seed=a.seed, skip_bad=a.skip_bad
    )
    if a.json:
        _print_json(meta)
    else:
        print(f"imported {meta['name']}: {meta['train']} train, {meta['dev']} dev ({meta['format']})")
    return 0


def cmd_data_list(a) -> int:
    from core import datasets

    items = datasets.list_datasets()
    if a.json:
        _print_json({"datasets": items})
    else:
        for m in items:
            print(f"{m['name']:24} train {m.get('train', '?'):>7} dev {m.get('dev', '?'):>6}  {m.get('source', '')}")
    return 0


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="paddle-studio", description="Paddle LLM Studio: UI and headless verbs")
    sub = p.add_subparsers(dest="verb")

    def ui_args(q):
        q.add_argument("--host", default="127.0.0.1", help="address to bind (non-loopback needs --auth)")
        q.add_argument("--port", type=int, default=7860)
        q.add_argument("--auth", default=None, metavar="USER:PASS", help="require this login")
        q.add_argument("--lang", default="en", choices=["en", "zh"], help="initial UI language")

    ui_args(p)
    ui = sub.add_parser("ui", help="start the studio (default)")
    ui_args(ui)
    ui.set_defaults(func=cmd_ui)

    demo = sub.add_parser("demo", help="demo workspace").add_subparsers(dest="demo_verb", required=True)
    di = demo.add_parser("init", help="tiny model + tokenizer + dataset, idempotent")
    di.add_argument("--seed", type=int, default=1234)
    di.add_argument("--json", action="store_true")
    di.set_defaults(func=cmd_demo_init)

    data = sub.add_parser("data", help="datasets").add_subparsers(dest="data_verb", required=True)
    v = data.add_parser("validate", help="check a file or dataset folder line by line")
    v.add_argument("file")
    v.add_argument("--format", default="auto", choices=["auto", "paddlenlp", "alpaca", "sharegpt", "messages"])
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
    c.add_argument("--from", dest="from_format", default="auto", choices=["auto", "paddlenlp", "alpaca", "sharegpt", "messages"])
    c.add_argument("--strict", action="store_true", help="refuse if any record is bad (default: skip them)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_data_convert)

    i = data.add_parser("import", help="import into workspace/datasets/NAME with a train/dev split")
    i.add_argument("file")
    i.add_argument("--name", required=True)
    i.add_argument("--dev-ratio", type=float, default=0.1)
    i.add_argument("--from", dest="from_format", default="auto", choices=["auto", "paddlenlp", "alpaca", "sharegpt", "messages"])
    i.add_argument("--seed", type=int, default=42)
    i.add_argument("--skip-bad", action="store_true", help="import the good records, skip the bad ones")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=cmd_data_import)

    dl = data.add_parser("list", help="datasets in the workspace")
    dl.add_argument("--json", action="store_true")
    dl.set_defaults(func=cmd_data_list)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func = getattr(args, "func", None) or cmd_ui
    from core.datasets import DatasetError

    try:
        return func(args) or 0
    except DatasetError as e:
        return _fail(str(e), 1 if e.code == "has_bad_records" else 2)
    except (FileNotFoundError, FileExistsError, ValueError) as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
