"""A key means what it means upstream (issue 31, items 3 and 4): a studio LoRA checkpoint resumes
under upstream's run_finetune code path (tests/upstream_finetune.py, only the paddlenlp wheel), a run
recorded in the old target order resumes in the studio in that order, and chat_template ("none",
null, a folder), lora_path, VeRA and NEFTune give the same tokens, the same losses or a refusal
with the reason. Runs are 2-3 steps of the demo LLaMA on 32 records (each process ~5 s)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from core.data import templates
from core.train import config, entry

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = ROOT / "tests" / "upstream_finetune.py"
# the studio's LLaMA LoRA targets before this change (a run of then records them in its checkpoints)
OLD_LLAMA_ORDER = [".*q_proj.*", ".*k_proj.*", ".*v_proj.*", ".*o_proj.*", ".*gate_proj.*", ".*up_proj.*",
                   ".*down_proj.*"]


@pytest.fixture(scope="module")
def home(demo_home, tmp_path_factory):
    """A workspace with the demo model and 32 demo records in one shape (upstream's JSON reader
    needs one shape per file)."""
    home = tmp_path_factory.mktemp("meaning") / "ws"
    (home / "models").mkdir(parents=True)
    (home / "models" / "demo-base").symlink_to(demo_home / "models" / "demo-base")
    ds = home / "datasets" / "tiny"
    ds.mkdir(parents=True)
    lines = (demo_home / "datasets" / "demo" / "train.json").read_text(encoding="utf-8").splitlines()[:32]
    recs = [json.loads(x) for x in lines]
    recs = [{k: r[k] if isinstance(r[k], list) else [r[k]] for k in ("src", "tgt")} for r in recs]
    (ds / "train.json").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PADDLE_STUDIO_HOME", str(home))
        yield home


def _run(home, method="lora", steps=2, batch=4, **extra) -> Path:
    """A studio run (runs.create, as the Train tab makes one) of the demo LoRA preset; its config.json."""
    from core.train import runs

    cfg = config.load_preset("demo-lora", home)
    cfg.data.dataset_name_or_path = str(home / "datasets" / "tiny")
    cfg.data.src_length, cfg.data.max_length = 32, 48
    cfg.method.method = method
    cfg.method.vera_rank = 8
    cfg.training.max_steps = steps
    cfg.training.save_steps = 2
    cfg.training.per_device_train_batch_size = batch
    cfg.training.evaluation_strategy = "no"
    for k, v in extra.items():  # a form field where the studio has one (neftune), else a plain PaddleNLP key
        sec = next((s for s in (cfg.method, cfg.data, cfg.training) if hasattr(s, k)), None)
        setattr(sec, k, v) if sec is not None else cfg.extra.update({k: v})
    assert config.check(cfg, has_gpu=False) == []
    return runs.run_dir(runs.create(cfg)) / "config.json"


def _studio(config_json: Path, *flags) -> list[float]:
    r = subprocess.run([sys.executable, str(ROOT / "core" / "train" / "entry.py"), str(config_json), *flags],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(x) for x in (config_json.parent / "metrics.jsonl").read_text().splitlines()]
    return [x["loss"] for x in rows if "loss" in x]


def _upstream(config_json: Path, cwd: Path, *flags) -> dict:
    r = subprocess.run([sys.executable, str(UPSTREAM), str(config_json), *flags], cwd=cwd, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _edit(config_json: Path, **changes):
    d = json.loads(config_json.read_text())
    for k, v in changes.items():
        if v is ...:
            d.pop(k, None)
        else:
            d[k] = v
    config_json.write_text(json.dumps(d, indent=1))


@pytest.fixture(scope="module")
def lora_run(home):
    """A studio LoRA run of 2 steps with its checkpoint-2."""
    path = _run(home)
    _studio(path)
    assert (path.parent / "output" / "checkpoint-2" / "optimizer.pdopt").is_file()
    return path


@pytest.mark.slow
def test_upstream_resumes_a_studio_lora_checkpoint(lora_run, tmp_path):
    """Upstream's run_finetune path finds the studio's checkpoint-2 in the unchanged config.json and
    resumes it: adapter layers made in get_lora_target_modules' order, so the optimizer state's
    names and shapes line up (before: "lo_ra_linear_24.w_1_moment1_0 need tensor with shape
    [128, 16] but load set tensor with shape [512, 16]"); one more step trains."""
    written = lora_run.read_text()
    out = _upstream(lora_run, tmp_path, "--max_steps", "3")  # a flag after the file, as upstream takes it
    assert out["resumed_from"] == str(lora_run.parent / "output" / "checkpoint-2")
    assert out["steps"] == 3 and len(out["losses"]) == 1 and 0 < out["losses"][0] < 20, out
    saved = json.loads((lora_run.parent / "output" / "checkpoint-2" / "lora_config.json").read_text())
    assert saved["target_modules"] == out["targets"] == config.family_preset("llama")["target_modules"]
    assert lora_run.read_text() == written


@pytest.mark.slow
def test_a_run_resumes_in_the_target_order_it_recorded(home, lora_run, tmp_path):
    """A checkpoint made in the studio's old target order (recorded in its lora_config.json) still
    resumes in the studio: the adapter is rebuilt in the recorded order, not the preset's. The old
    checkpoint is made by a run starting from an adapter (lora_path, as upstream) whose config lists
    the old order; lora_path is then taken out, as an old run's config never had it."""
    adapter = tmp_path / "old-order-adapter"
    adapter.mkdir()
    shutil.copy(lora_run.parent / "output" / "lora_model_state.pdparams", adapter)
    cfg = json.loads((lora_run.parent / "output" / "lora_config.json").read_text())
    (adapter / "lora_config.json").write_text(json.dumps({**cfg, "target_modules": OLD_LLAMA_ORDER}))
    path = _run(home, lora_path=str(adapter))
    _studio(path)
    ckpt = path.parent / "output" / "checkpoint-2"
    assert json.loads((ckpt / "lora_config.json").read_text())["target_modules"] == OLD_LLAMA_ORDER
    assert entry.recorded_targets(ckpt) == OLD_LLAMA_ORDER
    _edit(path, lora_path=..., max_steps=3)
    losses = _studio(path, "--resume")
    assert len(losses) == 3 and all(0 < x < 20 for x in losses)


@pytest.mark.slow
def test_vera_neftune_and_a_null_template_train_as_upstream(home, tmp_path):
    """One config through both entries, losses equal step by step: VeRA (pissa_init, upstream's
    targets), NEFTune (noise bound alpha / sqrt(batch * seq), ~2.8x the studio's old
    alpha / sqrt(seq * hidden) on the demo) and "chat_template": null, which upstream's parser reads
    as "None": no template (the studio kept the tokenizer's). Batch 1: upstream pads LLaMA batches
    on the left, the studio on the right, and the same noise would then land on other tokens."""
    path = _run(home, method="vera", steps=3, batch=1, neftune=True, neftune_noise_alpha=5.0)
    _edit(path, chat_template=None, save_strategy="no", learning_rate=0.002)
    ours = _studio(path)
    up = _upstream(path, tmp_path)
    assert len(ours) == len(up["losses"]) == 3
    assert all(abs(a - b) <= 1e-5 * max(1.0, abs(b)) for a, b in zip(ours, up["losses"])), (ours, up["losses"])
    assert up["template"] is False and up["targets"] == config.family_preset("llama")["target_modules"]
    # the saved tokenizer carries the template training used (none), so chat and the check agree
    saved = json.loads((path.parent / "output" / "tokenizer_config.json").read_text())
    assert "chat_template" not in saved


@pytest.fixture(scope="module")
def tokenizers(demo_home):
    from paddlenlp.transformers import AutoTokenizer

    model = str(demo_home / "models" / "demo-base")
    return model, lambda: AutoTokenizer.from_pretrained(model)


def test_chat_template_values_tokenize_as_upstream_reads_them(demo_home, tokenizers, tmp_path):
    """Token ids of demo records for each chat_template value, the studio's (template_for_run +
    build_example) against upstream's (the wheel's init_chat_template, then llm/utils/data.py's
    rules as tests/upstream_finetune.py applies them): "none" / "None" / null train without a
    template (the studio failed on "none": FileNotFoundError, and kept the tokenizer's template for
    null); the model folder (it failed: IsADirectoryError) and a folder without chat_template.json
    mean the tokenizer's own; a key left out, the tokenizer's own."""
    from paddlenlp.trl.llm_utils import init_chat_template

    from tests import upstream_finetune

    model, fresh = tokenizers
    lines = (demo_home / "datasets" / "demo" / "dev.json").read_text(encoding="utf-8").splitlines()[:6]
    recs = [json.loads(x) for x in lines]
    args = SimpleNamespace(src_length=32, max_length=48)
    empty = tmp_path / "no-template-here"
    empty.mkdir()
    tok = fresh()
    own = templates.load_template(tok, model)
    assert own
    for value, want in (("none", None), ("None", None), (None, None), (model, own), (str(empty), own), (..., own)):
        flat = {"model_name_or_path": model} | ({} if value is ... else {"chat_template": value})
        tpl = templates.template_for_run(tok, model, flat)
        assert tpl == want, value
        up_tok = fresh()
        if value is not ...:
            init_chat_template(up_tok, model, "None" if value is None else value)  # upstream's parser: null -> "None"
        assert (up_tok.chat_template is not None) == (want is not None), value
        for rec in recs:
            ours = templates.build_example(tok, tpl, rec, args.src_length, args.max_length)
            theirs = upstream_finetune.tokenize(up_tok, rec, args, up_tok.chat_template is not None)
            assert ours == theirs, (value, rec)


def test_template_kept_with_the_saved_tokenizer(tokenizers, tmp_path):
    """Trained without a template: the tokenizer saved beside the model has none either (PaddleNLP
    writes tokenizer_config.json's chat_template from its init kwargs, not from .chat_template)."""
    model, fresh = tokenizers
    tok = fresh()
    templates.keep_with_tokenizer(tok, None)
    tok.save_pretrained(str(tmp_path / "none"))
    assert "chat_template" not in json.loads((tmp_path / "none" / "tokenizer_config.json").read_text())
    assert templates.load_template(fresh().__class__.from_pretrained(str(tmp_path / "none")), tmp_path / "none") is None
    tok = fresh()
    templates.keep_with_tokenizer(tok, "{{ messages[0]['content'] }}")
    tok.save_pretrained(str(tmp_path / "other"))
    assert json.loads((tmp_path / "other" / "tokenizer_config.json").read_text())["chat_template"] == \
        "{{ messages[0]['content'] }}"


def _problems(demo_home, **keys):
    flat = {"model_name_or_path": str(demo_home / "models" / "demo-base"),
            "dataset_name_or_path": str(demo_home / "datasets" / "demo"), "lora": True, "max_steps": 2, **keys}
    cfg = config.RunConfig.from_paddlenlp(flat)
    return cfg, {p["field"]: config.check_message(p) for p in config.check(cfg, has_gpu=False)}


def test_the_check_says_what_upstream_would_do(demo_home, tmp_path):
    model = str(demo_home / "models" / "demo-base")
    for ok in ("none", "NONE", model, str(tmp_path)):
        assert "data.chat_template" not in _problems(demo_home, chat_template=ok)[1], ok
    cfg, probs = _problems(demo_home, chat_template=None)
    assert "data.chat_template" not in probs
    assert cfg.data.chat_template == "none" and cfg.to_paddlenlp()["chat_template"] == "none"  # null: no template
    _, probs = _problems(demo_home, chat_template=str(tmp_path / "typo"))
    why = probs["data.chat_template"]
    assert "no such path here" in why and "tokenizer's own template" in why
    legacy = tmp_path / "legacy.json"  # PaddleNLP's older format: read as no template at all before
    legacy.write_text(json.dumps({"system": "You are helpful.", "conversation": [["Q: {{user}}", "A: {{bot}}"]],
                                  "query": "Q: {{query}}"}))
    _, probs = _problems(demo_home, chat_template=str(legacy))
    assert "older chat template format" in probs["data.chat_template"], probs
    jinja = tmp_path / "t.jinja"
    jinja.write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    assert "data.chat_template" not in _problems(demo_home, chat_template=str(jinja))[1]

    _, probs = _problems(demo_home, lora_path=None)
    assert "Can't find lora_config.json at 'None'" in probs["extra.lora_path"]
    _, probs = _problems(demo_home, lora_path=str(tmp_path))
    assert "lora_config.json" in probs["extra.lora_path"]
    (tmp_path / "lora_config.json").write_text("{}")
    assert "extra.lora_path" not in _problems(demo_home, lora_path=str(tmp_path))[1]
    assert "extra.lora_path" not in _problems(demo_home, lora_path=None, lora=False)[1]  # not read without LoRA
    for key in ("prefix_path", "lokr_path"):  # upstream loads these; the studio would have trained a new adapter
        assert "cannot start from a saved" in _problems(demo_home, **{key: str(tmp_path)})[1][f"extra.{key}"]


def test_neftune_noise_bound_is_upstreams(demo_home):
    """alpha / sqrt(batch * seq) (upstream's run_finetune.py), not alpha / sqrt(seq * hidden)."""
    import paddle

    emb = paddle.nn.Embedding(10, 64)
    emb.weight.set_value(paddle.zeros([10, 64]))
    entry.add_neftune(SimpleNamespace(get_input_embeddings=lambda: emb), 5.0)
    emb.train()
    noise = emb(paddle.zeros([2, 8], dtype="int64")).abs().max().item()
    assert 1.1 < noise <= 1.25  # the old bound was 5 / sqrt(8 * 64) = 0.22
    emb.eval()
    assert emb(paddle.zeros([2, 8], dtype="int64")).abs().max().item() == 0.0
    assert entry.neftune_scale(5.0, [2, 8, 64]) == pytest.approx(5.0 / 4)


def test_family_targets_are_upstreams():
    """Every family preset's LoRA/VeRA/LoKr targets are upstream's get_lora_target_modules for the
    family, in its order (the order names the adapter's parameters and its optimizer state)."""
    import paddlenlp.transformers as pt
    from paddlenlp.trl.llm_utils import get_lora_target_modules

    for name, fam in config.family_presets().items():
        prefix = getattr(pt, fam["architecture"]).base_model_prefix
        try:
            upstreams = get_lora_target_modules(SimpleNamespace(base_model_prefix=prefix))
        except ValueError:  # GLM: run_finetune.py knows no targets for it; the preset names where its come from
            assert fam.get("target_modules_from"), name
            continue
        assert fam["target_modules"] == upstreams, name
