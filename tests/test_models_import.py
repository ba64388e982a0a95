"""Models users bring: `models inspect / import / list`, Hugging Face weights converted, broken
folders refused with the file and what was expected, nothing left behind."""

import json
import os
import shutil

import numpy as np
import pytest

from core.models import imports
from tests.conftest import link_demo
from tests.test_runs import cli


@pytest.fixture(scope="module")
def home(demo_home, tmp_path_factory):
    return link_demo(tmp_path_factory.mktemp("import") / "ws", demo_home)


def _logits(model_dir):
    import paddle

    from core.data.datasets import load_tokenizer
    from core.models import layouts
    from core.models.loading import model_class

    paddle.set_device("cpu")
    m = model_class(model_dir).from_pretrained(str(model_dir), dtype="float32")  # GLM: AutoModelForConditionalGeneration
    m.eval()

    ids = paddle.to_tensor([[1, 7, 42, 99, 5, 300, 11, 2], [1, 250, 8, 8, 64, 3, 3, 3]])
    # the family's own mask and positions where it needs them (ChatGLM-6B v1), else the model's default
    extra = {}
    if layouts.attach(m, model_dir, load_tokenizer(model_dir)):
        extra = layouts.inputs(m, ids, paddle.ones_like(ids))
    with paddle.no_grad():
        out = m(input_ids=ids, **extra)
    out = out[0] if isinstance(out, (tuple, list)) else getattr(out, "logits", out)
    return out.numpy()


@pytest.mark.parametrize("family", ["llama", "qwen2"])
def test_hf_folder_converts_to_the_same_logits(home, family):
    hf = home / "uploads" / f"hf-{family}"
    r = cli("demo", "init", "--family", family, "--out", str(hf), "--hf", "--json", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    r = cli("demo", "init", "--family", family, "--json", home=home)  # the same weights, Paddle layout
    assert r.returncode == 0, r.stderr[-2000:]
    info = imports.inspect(hf)
    assert info["format"] == "torch" and info["family"] == family and info["chat_template"]
    assert info["parameters"] == json.loads(r.stdout)["parameters"]
    r = cli("models", "import", str(hf), "--name", f"imported-{family}", "--json", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["converted"] and out["parameters"] == info["parameters"]
    imported = home / "models" / f"imported-{family}"
    assert not (hf / "model_state.pdparams").exists()  # the user's folder is untouched
    assert imports.inspect(imported)["format"] == "paddle"
    diff = float(np.abs(_logits(imported) - _logits(home / "models" / f"tiny-{family}")).max())
    print(f"\n{family}: HF -> Paddle conversion, max |logits diff| = {diff:.3g}")
    assert diff < 1e-4
    listed = json.loads(cli("models", "list", "--json", home=home).stdout)
    row = next(m for m in listed if m["name"] == f"imported-{family}")
    assert row["family"] == family and row["kind"] == "base" and "converted from PyTorch" in row["origin_text"]
    assert row["parameters"] == info["parameters"] and row["size_bytes"] > 0


def test_paddle_folder_copied_and_linked(home):
    src = home / "models" / "demo-base"
    r = cli("models", "import", str(src), "--name", "copy-of-demo", "--json", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["format"] == "paddle"
    assert (home / "models" / "copy-of-demo" / "model.safetensors").is_file()
    r = cli("models", "import", str(src), "--name", "linked-demo", "--link", "--json", home=home)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (home / "models" / "linked-demo").is_symlink()
    text = cli("models", "list", home=home).stdout
    assert "linked-demo" in text and "imported (linked)" in text and "copy-of-demo" in text


def _broken(tmp_path, home, how):
    d = tmp_path / "broken"
    shutil.copytree(home / "models" / "demo-base", d)
    how(d)
    return d


def _write(d, name, text):
    (d / name).write_text(text, encoding="utf-8")


def _truncate(d):
    f = d / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-1000])


def _shard_index(d):
    _write(d, "model.safetensors.index.json", json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                                                          "b": "model-00002-of-00002.safetensors"}}))


@pytest.mark.parametrize("how,expect", [
    (lambda d: (d / "config.json").unlink(), "no config.json"),
    (lambda d: _write(d, "config.json", '{"model_type": "llama",\n  "hidden_size": 128,,\n}'), "config.json: line 2 column"),
    (lambda d: _write(d, "config.json", '{"model_type": "mamba"}'), "model_type 'mamba' has no family preset"),
    (lambda d: [(d / f).unlink() for f in ("tokenizer_config.json", "sentencepiece.bpe.model")], "no tokenizer"),
    (_truncate, "cut short"),
    (lambda d: (d / "model.safetensors").unlink(), "no weights"),
    (_shard_index, "missing: model-00001-of-00002.safetensors, model-00002-of-00002.safetensors"),
])
def test_broken_folder_is_refused_and_leaves_nothing(home, tmp_path, how, expect):
    d = _broken(tmp_path, home, how)
    before = sorted(p.name for p in (home / "models").iterdir())
    r = cli("models", "import", str(d), "--name", "broken", home=home)
    assert r.returncode == 2
    assert expect in r.stderr and "Traceback" not in r.stderr, r.stderr[-1500:]
    assert sorted(p.name for p in (home / "models").iterdir()) == before  # no model, no temp folder


def test_name_taken_and_bad_name(home):
    r = cli("models", "import", str(home / "models" / "demo-base"), "--name", "demo-base", home=home)
    assert r.returncode == 2 and "already exists" in r.stderr
    r = cli("models", "import", str(home / "models" / "demo-base"), "--name", "../escape", home=home)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert not (home / "escape").exists()


# ---------------------------------------------------------------- issue 30: messages that mislead


def _paddle_folder(tmp_path):
    """A folder inspect() accepts without loading anything: a llama config, a tokenizer file, Paddle weights."""
    d = tmp_path / "src-model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "llama", "dtype": "float32"}))
    (d / "tokenizer_config.json").write_text("{}")
    (d / "model_state.pdparams").write_bytes(b"\0" * 64)
    return d


@pytest.mark.parametrize("link", [True, False])
def test_an_import_that_loses_the_race_for_its_name_says_so(tmp_path, workspace_home, monkeypatch, link):
    """Two imports into one name at once: the one that finishes second says a model of that name was
    created meanwhile (not just a path), leaves the other's model as it is and nothing of its own."""
    src = _paddle_folder(tmp_path)
    monkeypatch.setattr(imports, "_load_check", lambda d, info, log: (None, 0))
    other = workspace_home / "models" / "twin"

    def meanwhile(msg):  # called once the folder is checked: the other import publishes now
        if not other.exists():
            other.mkdir(parents=True)
            (other / "config.json").write_text('{"model_type": "llama"}')

    with pytest.raises(FileExistsError) as e:
        imports.import_model(src, "twin", link=link, log=meanwhile)
    assert "a model named 'twin' was created meanwhile by another import" in str(e.value)
    assert sorted(p.name for p in (workspace_home / "models").iterdir()) == ["twin"]  # no temp folder, no marker
    assert (other / "config.json").read_text() == '{"model_type": "llama"}' and not other.is_symlink()


def test_an_empty_name_says_the_model_name_is_empty(tmp_path, workspace_home):
    with pytest.raises(ValueError, match="the model name is empty"):
        imports.import_model(_paddle_folder(tmp_path), "  ")


@pytest.mark.timeout(20)
def test_odd_paths_as_the_model_folder_say_what_they_are(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    (tmp_path / "file").write_text("x")
    for name, says in (("loop", "is a loop of symbolic links"), ("fifo", "is a FIFO (named pipe)"),
                       ("zero", "is a device (/dev/zero)"), ("file", "is a file, not a folder"),
                       ("nothing", "no such folder")):
        with pytest.raises(imports.ModelFolderError) as e:
            imports.inspect(tmp_path / name)
        assert str(e.value).startswith(str(tmp_path / name)) and says in str(e.value), str(e.value)
    d = _paddle_folder(tmp_path)
    (d / "config.json").unlink()
    os.mkfifo(d / "config.json")
    with pytest.raises(imports.ModelFolderError, match="config.json is a FIFO"):
        imports.inspect(d)


def test_models_list_says_what_merged_quantized_and_adapter_models_are(demo_home, tmp_path, monkeypatch):
    """Parameters and origin for every kind (they were blank for merged, quantized and adapters), an
    adapter's own parameter count from its weights file (read without running pickled code), and a
    run output's size without its checkpoints."""
    import pickle

    import numpy as np

    from core import catalog
    from studio.tabs.models import origin_text
    from tests.conftest import link_demo

    ws = link_demo(tmp_path / "ws", demo_home)
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(ws))
    base = ws / "models" / "demo-base"
    n = json.loads((base / "studio_model.json").read_text())["parameters"]
    cfg = (base / "config.json").read_text()
    for name, marker in (("m", {"merged_from": {"base": str(base), "adapter": str(ws / "runs/r1/output"), "kind": "lora"}}),
                         ("q", {"quantized_from": str(ws / "models" / "m"), "preset": "wint8", "algorithm": "weight_only_int8"})):
        (ws / "models" / name).mkdir()
        (ws / "models" / name / "config.json").write_text(cfg)
        (ws / "models" / name / "studio_model.json").write_text(json.dumps(marker))
    (ws / "models" / "q" / "studio_quant.json").write_text("{}")
    out = ws / "runs" / "r1" / "output"
    (out / "checkpoint-4").mkdir(parents=True)
    (out / "checkpoint-4" / "optimizer.pdopt").write_bytes(b"x" * 100_000)
    (out / "lora_config.json").write_text(json.dumps({"r": 8, "target_modules": [".*q_proj.*"]}))
    with open(out / "lora_model_state.pdparams", "wb") as f:
        pickle.dump({"a.lora_A": np.zeros((128, 8), "float32"), "a.lora_B": np.zeros((8, 128), "float32")}, f, protocol=4)
    (out / "studio_model.json").write_text(json.dumps({"base": str(base), "method": "lora", "adapter": True, "run": "r1",
                                                      "steps": 40}))
    rows = {r["name"]: r for r in catalog.model_rows()}
    assert rows["m"]["parameters"] == rows["q"]["parameters"] == n
    assert rows["r1"]["kind"] == "adapter" and rows["r1"]["parameters"] == 2 * 128 * 8 and rows["r1"]["family"] == "llama"
    assert rows["r1"]["size_bytes"] < 100_000  # the checkpoint is not the adapter
    assert origin_text(rows["m"]["origin"], "en") == "lora adapter runs/r1/output merged into models/demo-base"
    assert origin_text(rows["q"]["origin"], "zh") == "由 models/m 量化（weight_only_int8，预设 wint8）"
    assert origin_text(rows["r1"]["origin"], "en") == "lora adapter of models/demo-base, run r1, 40 steps"

    class Boom:  # a weights file that would run code when unpickled: counted as unknown, never run
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "ran"),))

    with open(out / "lora_model_state.pdparams", "wb") as f:
        pickle.dump({"x": Boom()}, f)
    assert {r["name"]: r for r in catalog.model_rows()}["r1"]["parameters"] is None
    assert not (tmp_path / "ran").exists()


def test_every_model_folder_refusal_reads_in_chinese(tmp_path):
    """Each ModelFolderError code has zh/en text with the fields core sends (the Models tab shows the
    refusal in the user's language), and a real refusal comes out in Chinese."""
    import string

    from studio.locales import TEXT
    from studio.tabs.models import folder_error

    fields = lambda s: {f.split("!")[0].split(":")[0] for _, f, _, _ in string.Formatter().parse(s) if f}  # noqa: E731
    for code, english in imports.MESSAGES.items():
        entry = TEXT[f"models.err.{code}"]
        assert entry["en"] == english and fields(entry["zh"]) == fields(english), code
    (tmp_path / "m").mkdir()
    with pytest.raises(imports.ModelFolderError) as e:
        imports.inspect(tmp_path / "m")
    assert e.value.code == "no_config" and folder_error(e.value, "zh").endswith("：没有 config.json（模型文件夹应包含 "
                                                                                "config.json、分词器文件和权重）")
    (tmp_path / "m" / "config.json").write_text("{\n  \"model_type\": 1,\n")
    with pytest.raises(imports.ModelFolderError) as e:
        imports.inspect(tmp_path / "m")
    assert e.value.code == "bad_json" and "第 3 行" in folder_error(e.value, "zh")
