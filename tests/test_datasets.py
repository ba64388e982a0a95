"""Dataset engine on real files: every validation reason, every conversion, import rules."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.data import datasets
from core.data.datasets import DatasetError


def write_lines(path: Path, lines: list, mode="text") -> Path:
    if mode == "bytes":
        path.write_bytes(b"".join(lines))
    else:
        path.write_text("".join(l + "\n" for l in lines), encoding="utf-8")
    return path


def codes_at(rep):
    return {(p.line, p.field, p.code) for p in rep.problems}


GOOD = json.dumps({"src": "问题", "tgt": "回答"}, ensure_ascii=False)


def test_good_file_single_and_multi_turn(tmp_path):
    f = write_lines(
        tmp_path / "a.json",
        [GOOD, json.dumps({"src": ["a", "b"], "tgt": ["c", "d"]}), json.dumps({"src": "x", "tgt": "y"})],
    )
    rep = datasets.validate(f)
    assert rep.ok and rep.format == "paddlenlp"
    assert (rep.records, rep.good, rep.bad, rep.multi_turn, rep.duplicates) == (3, 3, 0, 1, 0)
    assert [p.code for p in rep.problems] == ["mixed_shapes"]  # a warning only (strings and lists)


@pytest.mark.parametrize(
    "line, field, code",
    [
        ('{"src": "a", "tgt": ', "", "invalid_json"),
        ('["a", "b"]', "", "not_object"),
        ('{"tgt": "b"}', "src", "missing_field"),
        ('{"src": "a"}', "tgt", "missing_field"),
        ('{"src": 3, "tgt": "b"}', "src", "wrong_type"),
        ('{"src": ["a", 5], "tgt": ["b", "c"]}', "src[1]", "wrong_type"),
        ('{"src": ["a", "b"], "tgt": ["c"]}', "src/tgt", "turns_mismatch"),
        ('{"src": "a", "tgt": ["c"]}', "src/tgt", "mixed_types"),
        ('{"src": "  ", "tgt": "b"}', "src", "empty_text"),
        ('{"src": ["a", ""], "tgt": ["b", "c"]}', "src[1]", "empty_text"),
    ],
)
def test_each_record_problem_names_line_and_field(tmp_path, line, field, code):
    f = write_lines(tmp_path / "d.json", [GOOD, GOOD.replace("回答", "答2"), line, GOOD.replace("回答", "答3")])
    rep = datasets.validate(f)
    assert (3, field, code) in codes_at(rep), rep.problems
    assert rep.bad == 1 and rep.good == 3 and not rep.ok
    p = next(p for p in rep.problems if p.code == code)
    assert p.file == str(f) and p.severity == "error" and p.message


def test_byte_level_problems(tmp_path):
    f = write_lines(
        tmp_path / "b.json",
        [
            b"\xef\xbb\xbf" + GOOD.encode() + b"\n",  # BOM on line 1
            b'{"src": "ok", "tgt": "fine"}\r\n',  # CRLF
            b"\n",  # blank line
            b'{"src": "caf\xe9", "tgt": "x"}\n',  # latin-1 byte, not UTF-8
            b'{"src": "' + b"x" * 300 + b'", "tgt": "long"}\n',  # over-long with the limit below
            b'{"src": "last", "tgt": "one"}\n',
        ],
        mode="bytes",
    )
    rep = datasets.validate(f, max_line_bytes=200)
    got = codes_at(rep)
    assert (1, "", "bom") in got
    assert (2, "", "crlf") in got
    assert (3, "", "blank_line") in got
    assert (4, "", "not_utf8") in got
    assert (5, "", "line_too_long") in got
    nu = next(p for p in rep.problems if p.code == "not_utf8")
    assert nu.params["position"] == len(b'{"src": "caf') + 1
    assert {p.code: p.severity for p in rep.problems}["crlf"] == "warning"
    # BOM line and CRLF line still parse as records; not-UTF-8 and over-long lines are bad
    assert rep.good == 3 and rep.bad == 2


def test_error_list_is_capped_with_count_of_rest(tmp_path):
    f = write_lines(tmp_path / "c.json", ['{"src": 1, "tgt": "x"}'] * 30 + [GOOD])
    rep = datasets.validate(f, max_errors=10)
    assert len(rep.problems) == 10 and rep.problems_omitted == 20
    assert rep.by_code["wrong_type"] == 30 and rep.good == 1
    assert [p.line for p in rep.problems] == list(range(1, 11))


def test_duplicates_are_counted_with_examples(tmp_path):
    f = write_lines(tmp_path / "dup.json", [GOOD, '{"src": "x", "tgt": "y"}', GOOD, GOOD])
    rep = datasets.validate(f)
    assert rep.duplicates == 2
    assert rep.duplicate_examples[0][1] in (3, 4) and rep.duplicate_examples[0][3] == 1


def test_folder_layouts(tmp_path):
    d = tmp_path / "ds"
    d.mkdir()
    write_lines(d / "train.json", [GOOD])
    write_lines(d / "dev.json", ['{"src": "q"}'])
    files = datasets.resolve_files(d)
    assert [f.name for f in files["train"]] == ["train.json"] and files["dev"][0].name == "dev.json"
    rep = datasets.validate(d)
    assert rep.good == 1 and rep.bad == 1
    assert rep.problems[0].file.endswith("dev.json") and rep.problems[0].line == 1

    d2 = tmp_path / "ds2"
    (d2 / "train").mkdir(parents=True)
    (d2 / "dev").mkdir()
    write_lines(d2 / "train" / "part-1.json", [GOOD])
    write_lines(d2 / "train" / "part-2.json", ['{"src": "a", "tgt": "b"}'])
    write_lines(d2 / "dev" / "x.json", [GOOD])
    files = datasets.resolve_files(d2)
    assert len(files["train"]) == 2 and len(files["dev"]) == 1
    with pytest.raises(DatasetError) as e:
        datasets.resolve_files(tmp_path / "nope")
    assert e.value.code == "not_found"


# ---------------------------------------------------------------- conversion

ALPACA = [
    {"instruction": "Translate", "input": "猫", "output": "cat"},
    {"instruction": "Say hi", "output": "hi", "system": "Be brief."},
    {"instruction": "And then?", "input": "", "output": "done", "history": [["q1", "a1"]]},
]
SHAREGPT = [
    {"conversations": [{"from": "human", "value": "hello"}, {"from": "gpt", "value": "hi"}]},
    {
        "conversations": [
            {"from": "system", "value": "You are terse."},
            {"from": "human", "value": "1+1?"},
            {"from": "gpt", "value": "2"},
            {"from": "human", "value": "+1?"},
            {"from": "gpt", "value": "3"},
        ]
    },
]
MESSAGES = [
    {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]},
    {"messages": [{"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"}, {"role": "assistant", "content": "a2"}]},
]


def _jsonl(path, recs):
    return write_lines(path, [json.dumps(r, ensure_ascii=False) for r in recs])


def _read(path):
    return [json.loads(l) for l in Path(path).read_text(encoding="utf-8").splitlines()]


def test_convert_alpaca_jsonl_and_array(tmp_path):
    for src in (_jsonl(tmp_path / "a.jsonl", ALPACA), tmp_path / "a_array.json"):
        if src.name == "a_array.json":
            src.write_text(json.dumps(ALPACA, ensure_ascii=False, indent=1), encoding="utf-8")
        assert datasets.detect_format(src) == "alpaca"
        out = datasets.convert(src, tmp_path / "out.json")
        assert out["format"] == "alpaca" and out["written"] == 3
        recs = _read(tmp_path / "out.json")
        assert recs[0] == {"src": "Translate\n猫", "tgt": "cat"}
        assert recs[1] == {"src": "Say hi", "tgt": "hi", "system": "Be brief."}
        assert recs[2] == {"src": ["q1", "And then?"], "tgt": ["a1", "done"]}
        assert datasets.validate(tmp_path / "out.json").ok


def test_convert_sharegpt_keeps_system_and_turns(tmp_path):
    src = _jsonl(tmp_path / "s.jsonl", SHAREGPT)
    assert datasets.detect_format(src) == "sharegpt"
    datasets.convert(src, tmp_path / "o.json")
    recs = _read(tmp_path / "o.json")
    assert recs[0] == {"src": "hello", "tgt": "hi"}
    assert recs[1] == {"src": ["1+1?", "+1?"], "tgt": ["2", "3"], "system": "You are terse."}


def test_convert_messages(tmp_path):
    src = _jsonl(tmp_path / "m.jsonl", MESSAGES)
    assert datasets.detect_format(src) == "messages"
    datasets.convert(src, tmp_path / "o.json", fmt="messages")
    recs = _read(tmp_path / "o.json")
    assert recs == [{"src": "u", "tgt": "a", "system": "sys"}, {"src": ["u1", "u2"], "tgt": ["a1", "a2"]}]


def test_conversion_errors_name_the_line_and_field(tmp_path):
    bad = SHAREGPT + [
        {"conversations": [{"from": "human", "value": "q"}, {"from": "robot", "value": "a"}]},
        {"conversations": [{"from": "gpt", "value": "a"}, {"from": "human", "value": "q"}]},
        {"conversations": [{"from": "human", "value": "only a question"}]},
    ]
    src = _jsonl(tmp_path / "s.jsonl", bad)
    rep = datasets.validate(src)
    got = codes_at(rep)
    assert (3, "conversations[1].from", "bad_role") in got
    assert (4, "conversations[0].value", "bad_order") in got
    assert (5, "", "no_assistant_reply") in got
    out = datasets.convert(src, tmp_path / "o.json")
    assert out["written"] == 2 and out["skipped"] == 3
    with pytest.raises(DatasetError) as e:
        datasets.convert(src, tmp_path / "o2.json", skip_bad=False)
    assert e.value.code == "has_bad_records" and not (tmp_path / "o2.json").exists()

    al = _jsonl(tmp_path / "al.jsonl", [{"instruction": "x"}, {"instruction": "y", "output": 3}])
    got = codes_at(datasets.validate(al))
    assert (1, "output", "missing_field") in got and (2, "output", "wrong_type") in got
    arr = tmp_path / "arr.json"
    arr.write_text(json.dumps([ALPACA[0], {"instruction": "z"}]), encoding="utf-8")
    got = codes_at(datasets.validate(arr))
    assert (1, "[1].output", "missing_field") in got  # the line the item starts on, and its index


# ---------------------------------------------------------------- import


def test_import_split_is_deterministic_and_source_untouched(tmp_path, workspace_home):
    recs = [{"src": f"q{i}", "tgt": f"a{i}"} for i in range(100)]
    src = _jsonl(tmp_path / "up.jsonl", recs)
    before = src.read_bytes()
    m1 = datasets.import_dataset(src, "one", dev_ratio=0.2, seed=7)
    m2 = datasets.import_dataset(src, "two", dev_ratio=0.2, seed=7)
    assert (m1["train"], m1["dev"]) == (80, 20)
    d1, d2 = workspace_home / "datasets" / "one", workspace_home / "datasets" / "two"
    assert (d1 / "dev.json").read_text() == (d2 / "dev.json").read_text()
    dev = _read(d1 / "dev.json")
    train = _read(d1 / "train.json")
    assert sorted(r["src"] for r in dev + train) == sorted(r["src"] for r in recs)
    assert src.read_bytes() == before
    assert json.loads((d1 / "meta.json").read_text())["source_sha256"]
    assert {m["name"] for m in datasets.list_datasets()} == {"one", "two"}
    with pytest.raises(DatasetError) as e:
        datasets.import_dataset(src, "one")
    assert e.value.code == "dataset_exists"


@pytest.mark.parametrize("name", ["../evil", "a/b", "..", "", "a\\b", "x..y"])
def test_import_refuses_unsafe_names(tmp_path, workspace_home, name):
    src = _jsonl(tmp_path / "up.jsonl", [{"src": "q", "tgt": "a"}])
    with pytest.raises(DatasetError) as e:
        datasets.import_dataset(src, name)
    assert e.value.code in ("name_unsafe", "name_empty")
    assert not (workspace_home / "datasets").exists() or list((workspace_home / "datasets").iterdir()) == []


def test_import_with_bad_records_refused_or_skipped_and_failure_leaves_nothing(tmp_path, workspace_home, monkeypatch):
    src = write_lines(tmp_path / "up.jsonl", [GOOD, "{oops", '{"src": "b", "tgt": "c"}'])
    with pytest.raises(DatasetError) as e:
        datasets.import_dataset(src, "bad")
    assert e.value.code == "has_bad_records" and e.value.params == {"bad": 1, "total": 3}
    root = workspace_home / "datasets"
    assert not root.exists() or list(root.iterdir()) == []
    meta = datasets.import_dataset(src, "bad", skip_bad=True, dev_ratio=0.5)
    assert meta["train"] + meta["dev"] == 2 and meta["skipped_bad"] == 1

    # a failure part-way (disk full while splitting) leaves no folder, not even a temp one
    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(datasets, "_split_file", boom)
    with pytest.raises(OSError):
        datasets.import_dataset(src, "half", skip_bad=True)
    assert sorted(p.name for p in root.iterdir()) == ["bad"]


def test_import_folder_keeps_its_split_and_converts(tmp_path, workspace_home):
    d = tmp_path / "ds"
    d.mkdir()
    _jsonl(d / "train.json", MESSAGES)
    _jsonl(d / "dev.json", MESSAGES[:1])
    meta = datasets.import_dataset(d, "chat")
    assert (meta["train"], meta["dev"], meta["format"]) == (2, 1, "messages")
    out = workspace_home / "datasets" / "chat"
    # one shape for the whole dataset: its multi-turn train records make every record a list
    assert _read(out / "dev.json") == [{"src": ["u"], "tgt": ["a"], "system": "sys"}]


# ---------------------------------------------------------------- CLI


def _cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "core.cli", *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )


def test_cli_validate_convert_import(tmp_path, workspace_home):
    bad = write_lines(tmp_path / "bad.json", [GOOD, '{"src": "x"}'])
    r = _cli("data", "validate", str(bad), "--json")
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert out["bad"] == 1 and out["problems"][0]["line"] == 2 and out["problems"][0]["field"] == "tgt"
    r = _cli("data", "validate", str(bad))
    assert f"{bad}:2 [tgt] error: missing field" in r.stdout

    al = _jsonl(tmp_path / "al.jsonl", ALPACA)
    r = _cli("data", "convert", str(al), str(tmp_path / "conv.json"), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["written"] == 3
    r = _cli("data", "import", str(al), "--name", "cli-ds", "--dev-ratio", "0.34", "--json",
             env={"PADDLE_STUDIO_HOME": str(workspace_home)})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["dev"] == 1
    r = _cli("data", "import", str(al), "--name", "../x", env={"PADDLE_STUDIO_HOME": str(workspace_home)})
    assert r.returncode == 2 and "not allowed" in r.stderr


def test_hostile_files_give_line_numbered_problems_and_a_consistent_ok(tmp_path):
    """A JSON array of PaddleNLP records, nesting deeper than the parser goes, an unpaired surrogate
    escape and a BOM: never an exception; each problem has its line; ``ok`` follows the severities."""
    arr = tmp_path / "arr.json"
    arr.write_text('[{"src": "hi", "tgt": "yo"},\n {"src": "a",\n  "tgt": ""},\n {"src": ["x"], "tgt": ["y"]}]')
    rep = datasets.validate(arr)
    assert (rep.records, rep.good, rep.bad) == (3, 2, 1) and not rep.ok
    assert codes_at(rep) == {(2, "[1].tgt", "empty_text"), (None, "src", "mixed_shapes")}
    assert [r["src"] for r in datasets.iter_records(arr)] == ["hi", ["x"]]
    out = datasets.convert(arr, tmp_path / "arr-out.json")
    assert out["written"] == 2

    deep = write_lines(tmp_path / "deep.json", ['{"src": ' + "[" * 100_000 + "]" * 100_000 + ', "tgt": "x"}', GOOD])
    rep = datasets.validate(deep)
    assert codes_at(rep) == {(1, "", "too_deep")} and rep.good == 1 and rep.bad == 1
    deep_arr = tmp_path / "deep-arr.json"
    deep_arr.write_text("[" + GOOD + ",\n" + "[" * 100_000 + "]" * 100_000 + "]")
    rep = datasets.validate(deep_arr)
    assert codes_at(rep) == {(2, "[1]", "too_deep")} and rep.good == 1

    sur = write_lines(tmp_path / "sur.json", [GOOD, '{"src": "\\ud800 alone", "tgt": "x"}', '{"src": "\\ud83d\\ude00", "tgt": "ok"}'])
    rep = datasets.validate(sur)
    assert codes_at(rep) == {(2, "", "lone_surrogate")} and rep.good == 2 and rep.bad == 1
    res = datasets.convert(sur, tmp_path / "sur-out.json")  # the bad record is skipped, the rest written
    assert res["written"] == 2 and "\U0001F600" in (tmp_path / "sur-out.json").read_text(encoding="utf-8")

    bom = write_lines(tmp_path / "bom.json", [b"\xef\xbb\xbf" + GOOD.encode() + b"\n"], mode="bytes")
    rep = datasets.validate(bom)
    assert [(p.code, p.severity) for p in rep.problems] == [("bom", "warning")] and rep.ok and rep.good == 1
    for f in (arr, deep, sur, bom):
        r = subprocess.run([sys.executable, "-m", "core.cli", "data", "validate", str(f)], capture_output=True,
                           text=True, cwd=Path(__file__).resolve().parents[1],
                           env={**os.environ, "PADDLE_STUDIO_HOME": str(tmp_path / "ws")})
        assert "Traceback" not in r.stderr and r.returncode == (0 if f is bom else 1), (f, r.stderr)


def test_a_file_mixing_strings_and_lists_is_imported_in_one_shape(tmp_path, workspace_home):
    """PaddleNLP's JSON loader (HF datasets under paddlenlp.datasets.load_dataset("json")) cannot
    read a file whose src is a string on one line and a list on another: validation warns, and
    import writes every record with lists, which upstream reads."""
    f = tmp_path / "mixed.json"
    f.write_text("\n".join(json.dumps(r) for r in [
        {"src": "hi", "tgt": "yo"},
        {"src": ["a", "b"], "tgt": ["c", "d"]},
        {"src": "one more", "tgt": "answer"},
        {"src": "and", "tgt": "again"},
    ]) + "\n")
    rep = datasets.validate(f)
    assert rep.ok
    warn = [p for p in rep.problems if p.code == "mixed_shapes"]
    assert len(warn) == 1 and warn[0].severity == "warning" and warn[0].params == {"strings": 3, "lists": 1}
    meta = datasets.import_dataset(f, "mixed", dev_ratio=0.25)
    assert meta["shape"] == "list"
    out = workspace_home / "datasets" / "mixed"
    recs = [json.loads(x) for p in ("train.json", "dev.json") for x in (out / p).read_text().splitlines()]
    assert all(isinstance(r["src"], list) and isinstance(r["tgt"], list) for r in recs)
    assert sorted(r["src"][0] for r in recs) == ["a", "and", "hi", "one more"]
    from paddlenlp.datasets import load_dataset  # what upstream's run_finetune.py reads train.json with

    ds = load_dataset("json", data_files=str(out / "train.json"), lazy=False)[0]
    assert len(ds) == 3
    # a file of one shape is left as it is
    g = tmp_path / "plain.json"
    g.write_text(json.dumps({"src": "x", "tgt": "y"}) + "\n" + json.dumps({"src": "z", "tgt": "w"}) + "\n")
    assert not [p for p in datasets.validate(g).problems if p.code == "mixed_shapes"]
    assert datasets.import_dataset(g, "plain", dev_ratio=0)["shape"] == "string"


# ---------------------------------------------------------------- issue 30: messages that mislead


def test_a_number_too_long_for_python_is_a_bad_record_with_file_and_line(tmp_path):
    """A 5000-digit integer: one bad record named by line and column, not the whole file refused with
    Python's "Exceeds the limit (4300 digits)"; the other records stay good (as other bad lines)."""
    f = write_lines(tmp_path / "big.json", [GOOD, '{"src": "a", "tgt": "b", "n": ' + "7" * 5000 + "}", GOOD + " "])
    rep = datasets.validate(f)
    assert (rep.records, rep.good, rep.bad) == (3, 2, 1) and not rep.ok
    (p,) = [p for p in rep.problems if p.severity == "error"]
    assert (p.file, p.line, p.code) == (str(f), 2, "number_too_long")
    assert p.message == ("a number of 5000 digits at column 31: Python's JSON reader refuses integers of more than "
                         "4300 digits; write it as a string")
    assert len(list(datasets.iter_records(f))) == 2
    arr = tmp_path / "big-arr.json"
    arr.write_text("[" + GOOD + ',\n {"src": "a", "n": ' + "7" * 5000 + "}]")
    rep = datasets.validate(arr)
    assert codes_at(rep) == {(2, "[1]", "number_too_long")}


@pytest.mark.timeout(20)  # reading a FIFO would block, /dev/zero would never end
def test_a_symlink_loop_a_fifo_and_a_device_say_what_they_are(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop")
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    (tmp_path / "gone.json").symlink_to(tmp_path / "nothing-here.json")
    for name, code, says in (("loop", "symlink_loop", "is a loop of symbolic links"),
                             ("fifo.json", "is_fifo", "is a FIFO (named pipe), not a regular file"),
                             ("zero.json", "is_device", "is a device (/dev/zero), not a regular file"),
                             ("gone.json", "dangling_link", "which does not exist")):
        for call in (datasets.validate, datasets.detect_format, lambda p: list(datasets.iter_records(p))):
            with pytest.raises(DatasetError) as e:
                call(tmp_path / name)
            assert e.value.code == code and says in str(e.value) and str(tmp_path / name) in str(e.value)
    # inside a dataset folder: train.json a FIFO is named, not skipped into "no train.json"
    d = tmp_path / "ds"
    d.mkdir()
    os.mkfifo(d / "train.json")
    with pytest.raises(DatasetError) as e:
        datasets.validate(d)
    assert e.value.code == "is_fifo" and str(d / "train.json") in str(e.value)


def test_bare_cr_line_ends_are_read_as_line_breaks(tmp_path):
    f = write_lines(tmp_path / "mac.json", [(GOOD + "\r" + GOOD.replace("回答", "答2") + "\r").encode()],
                    mode="bytes")
    rep = datasets.validate(f)
    assert rep.ok and (rep.records, rep.good) == (2, 2)
    assert [(p.line, p.code, p.severity) for p in rep.problems] == [(1, "cr_line_ends", "warning")]
    assert [r["tgt"] for r in datasets.iter_records(f)] == ["回答", "答2"]
    # past the 1 MB line bound (the whole file is one LF-line), and mixed with CRLF and LF
    big = tmp_path / "mac-big.json"
    lines = [json.dumps({"src": f"q{i}", "tgt": "a" * 60}) for i in range(20000)]
    big.write_bytes(("\r".join(lines[:10000]) + "\r\n" + "\n".join(lines[10000:])).encode())
    rep = datasets.validate(big)
    assert rep.ok and rep.good == 20000 and rep.duplicates == 0
    out = datasets.convert(big, tmp_path / "lf.json")
    assert out["written"] == 20000 and b"\r" not in (tmp_path / "lf.json").read_bytes()


@pytest.mark.parametrize("content, code, says", [(b"\n\n  \n\n", "only_blank_lines", "only blank lines (4)"),
                                                 (b"", "empty_file", "the file is empty (0 bytes)"),
                                                 (b"[\n]\n", "empty_array", "empty JSON array")])
def test_a_file_without_records_is_an_error_naming_the_file(tmp_path, workspace_home, content, code, says):
    f = tmp_path / "train.json"
    f.write_bytes(content)
    rep = datasets.validate(f)
    assert not rep.ok
    errs = [p for p in rep.problems if p.severity == "error"]
    assert [(p.file, p.line, p.code) for p in errs] == [(str(f), None, code)] and says in errs[0].message
    with pytest.raises(DatasetError) as e:  # import says why too, not just "no usable records"
        datasets.import_dataset(f, "empty")
    assert e.value.code == code and says in str(e.value)
    # a folder whose dev.json is empty (as import writes it) is fine; an empty train split is not
    d = tmp_path / "ds"
    d.mkdir()
    (d / "train.json").write_text(GOOD + "\n")
    (d / "dev.json").write_text("")
    assert datasets.validate(d).ok
    (d / "train.json").write_bytes(content)
    assert [p.code for p in datasets.validate(d).problems if p.severity == "error"] == [code]


def test_an_import_that_loses_the_race_for_its_name_says_so(tmp_path, workspace_home, monkeypatch):
    f = write_lines(tmp_path / "a.json", [GOOD, GOOD.replace("回答", "答2")])
    real = datasets._split_file

    def meanwhile(*a, **kw):  # another import publishes the same name while this one writes
        (workspace_home / "datasets" / "same").mkdir(parents=True)
        return real(*a, **kw)

    monkeypatch.setattr(datasets, "_split_file", meanwhile)
    with pytest.raises(DatasetError) as e:
        datasets.import_dataset(f, "same", dev_ratio=0)
    assert e.value.code == "dataset_exists" and "a dataset named 'same' already exists" in str(e.value)
    assert sorted(p.name for p in (workspace_home / "datasets").iterdir()) == ["same"]  # no temp folder left


def test_array_item_fields_split_into_record_and_key(tmp_path):
    """A JSON-array item's problems name the item as "[i]" or "[i].key": split_item_field reads them
    back (the Dataset tab shows "record i+1" / "key of record i+1" instead of a raw list index)."""
    f = tmp_path / "arr.json"
    f.write_text(json.dumps([{"src": "a", "tgt": "b"}, 5, {"src": "q"}]), encoding="utf-8")
    fields = [p.field for p in datasets.validate(f).problems]
    assert fields == ["[1]", "[2].tgt"], fields
    assert [datasets.split_item_field(x) for x in fields] == [(1, ""), (2, "tgt")]
    assert datasets.split_item_field("conversations[3].from") == (None, "conversations[3].from")
    assert datasets.split_item_field("[0].conversations[3].from") == (0, "conversations[3].from")
    assert datasets.split_item_field("") == (None, "")


def test_problem_texts_in_chinese_hold_no_parser_or_type_english(tmp_path):
    """The Dataset tab's problems table in zh: Python's JSON messages, the engine's type words and
    a JSON-array item's field are Chinese too (they showed in English inside the Chinese text)."""
    from studio.tabs.dataset import field_text, problems_frame, record_problem

    f = tmp_path / "mixed.json"
    f.write_text('{not json}\n{"src": 1, "tgt": "b"}\n', encoding="utf-8")
    rep = datasets.validate(f).to_dict()
    zh = [record_problem(p["code"], p["params"], "zh") for p in rep["problems"]]
    assert zh == ["JSON 无效：此处应为双引号括起的键名（第 2 列）", "类型应为字符串或字符串列表，实际为整数"], zh
    en = [record_problem(p["code"], p["params"], "en") for p in rep["problems"]]
    assert en == ["invalid JSON: Expecting property name enclosed in double quotes (column 2)",
                  "expected string or list of strings, got int"], en
    assert (field_text("[61]", "en"), field_text("[61]", "zh")) == ("record 62", "第 62 条记录")
    assert (field_text("[0].tgt", "en"), field_text("[0].tgt", "zh")) == ("tgt of record 1", "第 1 条记录的 tgt")
    assert field_text("conversations[3].from", "zh") == "conversations[3].from"
    empty = tmp_path / "empty.json"
    empty.write_text("[]", encoding="utf-8")
    assert "<td>" not in problems_frame(datasets.validate(empty).to_dict(), "en")  # no row: the summary says it


def test_token_histograms_axes_follow_the_language():
    """The token-length histograms' axis titles and hover text are the page's language (they were
    "tokens" / "records" in Chinese too)."""
    from studio.tabs.dataset import token_figures

    hist = {"counts": [1, 2], "edges": [0.0, 5.0, 10.0], "mean": 5.0, "p95": 9.0, "max": 10}
    stats = {"src": hist, "total": hist, "src_length": 8, "max_length": 16}
    for lang, x, y, hover in (("en", "tokens", "records", "tokens: %{y} records"),
                              ("zh", "token 数", "记录数", "个 token：%{y} 条记录")):
        for fig in token_figures(stats, lang):
            assert (fig.layout.xaxis.title.text, fig.layout.yaxis.title.text) == (x, y)
            assert hover in fig.data[0].hovertemplate
