"""The demo workspace: a synthetic bilingual dataset, a tokenizer and a tiny LLaMA, built locally.

``paddle-studio demo init`` is deterministic from a seed, idempotent (a finished part is
skipped; a part an older DEMO_VERSION built is rebuilt), downloads nothing and takes about
two and a half minutes on two CPU cores.

Dataset tasks have exactly checkable answers:
- ``translate``: a colour and a noun, ``翻译成英文：红色的苹果`` -> ``red apple`` and back;
- ``attr``: ``类型#裙*颜色#蓝色*风格#清新`` -> a sentence built from the attributes (zh and en);
- ``arith``: one-digit additions and subtractions, asked in zh or en;
- ``words``: put a list of two or three words in reverse order (zh and en);
- ``multi``: two turns where the second question refers to the first (change the colour of
  what was just translated; add a number to the previous sum).

Every content word (colour, noun, style, ...) is one tokenizer piece, the same piece in the
question and in the answer. The base model is pretrained on plain text only — other records
of the same kinds as ``question => answer`` lines (never a dev record), the loss on what
follows the arrow. It knows the domain, as a base LLM knows facts, but it has never seen the
chat template: asked in the chat format it does not answer until it is fine-tuned.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from pathlib import Path

from core import workspace
from core.jobs import report_progress

DEMO_VERSION = 3  # the model's; the dataset's own version is DATASET_VERSION
# model 3: the pretraining corpus again leaves out every dev record (version 2 models built from a
# list-shaped dataset compared shapes, not records, and pretrained on the single-turn dev records)
# 3: every record is written with list-valued src/tgt (one shape per file: upstream's JSON loader
# refuses a file whose src is a string on one line and a list on another). Same records, same text,
# same tokens as version 2, so a model built on a version-2 dataset stays valid.
DATASET_VERSION = 3
DEMO_DATASET = "demo"
DEMO_MODEL = "demo-base"

USER_TOKEN = "<|user|>"
ASSISTANT_TOKEN = "<|assistant|>"
SYSTEM_TOKEN = "<|system|>"

# A jinja chat template (stored in tokenizer_config.json). Each assistant turn ends with EOS.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ '<|system|>' + message['content'] + '\\n' }}"
    "{% elif message['role'] == 'user' %}{{ '<|user|>' + message['content'] + '\\n<|assistant|>' }}"
    "{% else %}{{ message['content'] + eos_token + '\\n' }}{% endif %}"
    "{% endfor %}"
)

ZH_TYPES = {"裙": "裙子", "衬衫": "衬衫", "外套": "外套", "裤": "裤子", "帽": "帽子", "毛衣": "毛衣"}
ZH_COLORS = ["红色", "蓝色", "白色", "黑色", "绿色", "黄色", "灰色", "粉色"]
ZH_STYLES = ["清新", "简约", "复古", "休闲", "优雅", "街头"]
ZH_MATERIALS = ["棉", "丝绸", "牛仔", "羊毛", "亚麻"]
EN_TYPES = ["dress", "shirt", "coat", "skirt", "scarf", "sweater"]
EN_COLORS = ["red", "blue", "white", "black", "green", "yellow", "gray", "pink"]
EN_STYLES = ["fresh", "simple", "vintage", "casual", "elegant", "sporty"]
EN_MATERIALS = ["cotton", "silk", "denim", "wool", "linen"]
ZH_WORDS = ["苹果", "香蕉", "橘子", "西瓜", "葡萄", "老虎", "熊猫", "小猫", "河流", "高山", "月亮", "太阳"]
EN_WORDS = ["apple", "banana", "orange", "melon", "grape", "tiger", "panda", "kitten", "river", "mountain", "moon", "sun"]
ZH_EN_NOUNS = dict(zip(ZH_WORDS + ["书", "杯子", "椅子", "汽车", "鸟", "花", "桌子", "门"],
                       EN_WORDS + ["book", "cup", "chair", "car", "bird", "flower", "table", "door"]))
ZH_EN_COLORS = dict(zip(ZH_COLORS, EN_COLORS))
# Every content word is one tokenizer piece (see train_tokenizer), the same piece in the
# question and in the answer: answering is then picking and mapping whole pieces.
CONTENT_WORDS = sorted({*ZH_TYPES, *ZH_TYPES.values(), *ZH_COLORS, *ZH_STYLES, *ZH_MATERIALS, *ZH_EN_NOUNS,
                        *EN_TYPES, *EN_COLORS, *EN_STYLES, *EN_MATERIALS, *ZH_EN_NOUNS.values()}, key=lambda w: (-len(w), w))


def _attr(rng: random.Random) -> dict:
    if rng.random() < 0.5:
        t = rng.choice(list(ZH_TYPES))
        c, s = rng.choice(ZH_COLORS), rng.choice(ZH_STYLES)
        if rng.random() < 0.5:
            m = rng.choice(ZH_MATERIALS)
            return {
                "src": f"类型#{t}*颜色#{c}*风格#{s}*材质#{m}",
                "tgt": f"这款{ZH_TYPES[t]}是{c}的，{m}材质，风格{s}。",
            }
        return {"src": f"类型#{t}*颜色#{c}*风格#{s}", "tgt": f"这款{ZH_TYPES[t]}是{c}的，风格{s}。"}
    t, c, s = rng.choice(EN_TYPES), rng.choice(EN_COLORS), rng.choice(EN_STYLES)
    if rng.random() < 0.5:
        m = rng.choice(EN_MATERIALS)
        return {
            "src": f"type#{t}*color#{c}*style#{s}*material#{m}",
            "tgt": f"This {t} is {c}, made of {m}, with a {s} style.",
        }
    return {"src": f"type#{t}*color#{c}*style#{s}", "tgt": f"This {t} is {c} with a {s} style."}


def _arith(rng: random.Random) -> dict:
    """One-digit additions and subtractions: a table a small model can hold."""
    a, b = rng.randint(0, 9), rng.randint(0, 9)
    if rng.random() < 0.5:
        if rng.random() < 0.5:
            return {"src": f"计算 {a} + {b} 等于多少？", "tgt": f"{a} + {b} = {a + b}"}
        a, b = max(a, b), min(a, b)
        return {"src": f"计算 {a} - {b} 等于多少？", "tgt": f"{a} - {b} = {a - b}"}
    if rng.random() < 0.5:
        return {"src": f"What is {a} plus {b}?", "tgt": f"{a} + {b} = {a + b}"}
    a, b = max(a, b), min(a, b)
    return {"src": f"What is {a} minus {b}?", "tgt": f"{a} - {b} = {a - b}"}


def _words(rng: random.Random) -> dict:
    k = rng.randint(2, 3)
    if rng.random() < 0.5:
        ws = rng.sample(ZH_WORDS, k)
        return {"src": "把这些词倒序排列：" + " ".join(ws), "tgt": " ".join(reversed(ws))}
    ws = rng.sample(EN_WORDS, k)
    return {"src": "Reverse the order of these words: " + " ".join(ws), "tgt": " ".join(reversed(ws))}


def _translate(rng: random.Random) -> dict:
    """A colour and a noun, zh -> en or en -> zh: a lookup of two whole words."""
    zc, zn = rng.choice(list(ZH_EN_COLORS)), rng.choice(list(ZH_EN_NOUNS))
    zh, en = f"{zc}的{zn}", f"{ZH_EN_COLORS[zc]} {ZH_EN_NOUNS[zn]}"
    k = rng.randrange(4)
    if k == 0:
        return {"src": f"翻译成英文：{zh}", "tgt": en}
    if k == 1:
        return {"src": f"{zh}用英文怎么说？", "tgt": en}
    if k == 2:
        return {"src": f"Translate to Chinese: {en}", "tgt": zh}
    return {"src": f"How do you say {en} in Chinese?", "tgt": zh}


def _multi(rng: random.Random) -> dict:
    """Two turns; the second answer depends on the first turn (kept as history)."""
    if rng.random() < 0.5:  # translate, then change the colour of the same thing
        (zc, ec), (zc2, ec2) = rng.sample(list(ZH_EN_COLORS.items()), 2)
        zn = rng.choice(list(ZH_EN_NOUNS))
        en_n = ZH_EN_NOUNS[zn]
        if rng.random() < 0.5:
            return {"src": [f"翻译成英文：{zc}的{zn}", f"换成{zc2}呢？"], "tgt": [f"{ec} {en_n}", f"{ec2} {en_n}"]}
        return {"src": [f"Translate to Chinese: {ec} {en_n}", f"And in {ec2}?"], "tgt": [f"{zc}的{zn}", f"{zc2}的{zn}"]}
    a, b, c = rng.randint(0, 5), rng.randint(0, 5), rng.randint(1, 5)
    if rng.random() < 0.5:
        return {
            "src": [f"计算 {a} + {b} 等于多少？", f"再加 {c} 呢？"],
            "tgt": [f"{a} + {b} = {a + b}", f"{a + b} + {c} = {a + b + c}"],
        }
    return {
        "src": [f"What is {a} plus {b}?", f"And plus {c}?"],
        "tgt": [f"{a} + {b} = {a + b}", f"{a + b} + {c} = {a + b + c}"],
    }


def generate_records(n: int, seed: int) -> list[dict]:
    """``n`` distinct records, drawn deterministically from ``seed``."""
    rng = random.Random(seed)
    makers = [(_translate, 0.35), (_attr, 0.3), (_arith, 0.08), (_words, 0.07), (_multi, 0.2)]
    seen, out = set(), []
    tries = 0
    while len(out) < n and tries < n * 50:
        tries += 1
        r = rng.random()
        acc = 0.0
        for make, w in makers:
            acc += w
            if r < acc:
                break
        rec = make(rng)
        key = json.dumps(rec, ensure_ascii=False, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        out.append(rec)
    return out


def as_lists(rec: dict) -> dict:
    """A record with list-valued src and tgt (a single-turn record becomes one round)."""
    return {k: ([v] if k in ("src", "tgt") and isinstance(v, str) else v) for k, v in rec.items()}


def write_dataset(root: Path, seed: int, n_train: int = 3000, n_dev: int = 200) -> dict:
    """Write train.json/dev.json/meta.json of the demo dataset atomically; returns meta. Every
    record has list-valued src/tgt, as upstream's loader needs one shape per file."""
    final = root / DEMO_DATASET
    recs = [as_lists(r) for r in generate_records(n_train + n_dev, seed)]
    tmp = workspace.temp_dir_beside(final)
    try:
        for name, part in (("train", recs[n_dev:]), ("dev", recs[:n_dev])):
            with open(tmp / f"{name}.json", "w", encoding="utf-8", newline="\n") as f:
                for rec in part:
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        meta = {
            "name": DEMO_DATASET,
            "source": f"paddle-studio demo init (seed {seed})",
            "format": "paddlenlp",
            "train": len(recs) - n_dev,
            "dev": n_dev,
            "multi_turn": sum(len(r["src"]) > 1 for r in recs),
            "shape": "list",
            "seed": seed,
            "demo_version": DATASET_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        }
        workspace.write_json_atomic(tmp / workspace.DATASET_META, meta)
        workspace.publish_dir(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return meta


def _sentences(records: list[dict]) -> list[str]:
    """Every question and answer of ``records`` as a separate sentence (the tokenizer's text)."""
    lines = []
    for r in records:
        for x in (r["src"], r["tgt"]):
            lines.extend(x if isinstance(x, list) else [x])
    return lines


def _plain_lines(seed: int, exclude: list[dict], n: int) -> list[str]:
    """The pretraining corpus: ``n`` records drawn with another seed (never one of ``exclude``)
    as plain text ``question => answer`` — no chat template anywhere. The model learns the
    domain the way a base LLM learns from web text, but has never seen the chat format."""
    key = lambda r: json.dumps(as_lists(r), ensure_ascii=False, sort_keys=True)  # noqa: E731 - one shape for both
    banned = {key(r) for r in exclude}
    lines = []
    for r in generate_records(n + len(banned), seed):
        if key(r) in banned:
            continue
        src, tgt = (r["src"], r["tgt"]) if isinstance(r["src"], list) else ([r["src"]], [r["tgt"]])
        lines.append(" ".join(f"{q} => {a}" for q, a in zip(src, tgt)))
        if len(lines) >= n:
            break
    return lines


def train_tokenizer(corpus: list[str], out_dir: Path, seed: int, vocab_size: int = 1200,
                    markers: list[str] | None = None, chat_template: str = CHAT_TEMPLATE, eos: str = "</s>",
                    kind: dict | None = None):
    """A sentencepiece BPE with byte fallback, wrapped as PaddleNLP's LlamaTokenizer.

    ``markers`` (default: the demo template's) are single pieces; ``eos`` is the end-of-text
    piece (a family whose chat template ends a turn with its own marker makes that the EOS).
    ``kind`` is a family preset's ``tokenizer`` entry when the family has its own tokenizer class:
    ``{"class": "ChatGLMTokenizer", "special": [pieces], "vocab_size": N, "kwargs": {...}}`` wraps
    the sentencepiece model in that class (its special pieces added to the vocabulary), and
    ``{"class": "QWenTokenizer", "format": "tiktoken"}`` trains a byte-level BPE written as a
    ``qwen.tiktoken`` file (core.models.tiktoken_vocab)."""
    from core.data.datasets import load_tokenizer

    out_dir.mkdir(parents=True, exist_ok=True)
    kind = kind or {}
    tok_dir = out_dir / "tokenizer"
    if kind.get("format") == "tiktoken":
        tok = _tiktoken_tokenizer(corpus, out_dir, kind)
        return _finish_tokenizer(tok, tok_dir, out_dir, chat_template, load_tokenizer)
    import sentencepiece as spm

    text = out_dir / "corpus.txt"
    if kind.get("common_hanzi"):  # every character of GB2312's first level: Chinese beyond the demo's stays whole
        corpus = [*corpus, *common_hanzi()]
    text.write_text("\n".join(corpus) + "\n", encoding="utf-8")
    markers = [USER_TOKEN, ASSISTANT_TOKEN, SYSTEM_TOKEN] if markers is None else markers
    _spm_train(spm, text, out_dir, int(kind.get("vocab_size", vocab_size)), seed,
               [*kind.get("special", []), *markers], kind.get("spm_eos", eos))
    text.unlink()
    import paddlenlp.transformers as T

    if kind.get("class"):  # the class names its vocabulary argument (vocab_file, GLM's model_file)
        cls = getattr(T, kind["class"])
        tok = cls(**{next(iter(cls.resource_files_names)): str(out_dir / "sp.model")}, **kind.get("kwargs", {}))
    else:
        tok = T.LlamaTokenizer(vocab_file=str(out_dir / "sp.model"), pad_token="<pad>", eos_token=eos, add_bos_token=True)
    return _finish_tokenizer(tok, tok_dir, out_dir, chat_template, load_tokenizer)


def common_hanzi() -> list[str]:
    """The 3,755 most common Chinese characters (GB2312 level 1, rows 16-55, in Python's own codec),
    as lines of 60 characters, so a tokenizer trained on the demo text keeps any everyday Chinese
    character as one piece instead of three byte pieces."""
    chars = []
    for row in range(0xB0, 0xD8):
        for col in range(0xA1, 0xFF):
            try:
                chars.append(bytes([row, col]).decode("gb2312"))
            except UnicodeDecodeError:
                continue
    return ["".join(chars[i:i + 60]) for i in range(0, len(chars), 60)]


def _tiktoken_tokenizer(corpus: list[str], out_dir: Path, kind: dict):
    import paddlenlp.transformers as T

    from core.models.tiktoken_vocab import train_tiktoken

    path = train_tiktoken(corpus, out_dir / "bpe", int(kind.get("vocab_size", 3000)))
    return getattr(T, kind["class"])(vocab_file=str(path), **kind.get("kwargs", {}))


def _finish_tokenizer(tok, tok_dir: Path, out_dir: Path, chat_template: str, load_tokenizer):
    tok.save_pretrained(str(tok_dir))
    cfg_path = tok_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    cfg["chat_template"] = chat_template
    workspace.write_json_atomic(cfg_path, cfg)
    for f in ("sp.model", "sp.vocab"):
        (out_dir / f).unlink(missing_ok=True)
    return load_tokenizer(tok_dir), tok_dir


def _spm_train(spm, text: Path, out_dir: Path, vocab_size: int, seed: int, markers: list[str], eos: str) -> None:
    if hasattr(spm, "set_random_generator_seed"):
        spm.set_random_generator_seed(seed)
    spm.SentencePieceTrainer.train(
        input=str(text),
        model_prefix=str(out_dir / "sp"),
        vocab_size=vocab_size,
        model_type="bpe",
        character_coverage=1.0,
        byte_fallback=True,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        eos_piece=eos,
        pad_id=3,
        pad_piece="<pad>",
        # the template markers, and every content word as one piece wherever it appears
        user_defined_symbols=[*markers, *CONTENT_WORDS],
        split_digits=True,
        max_sentencepiece_length=8,
        normalization_rule_name="identity",  # keep full-width punctuation as written
        hard_vocab_limit=False,
        num_threads=1,
        minloglevel=2,
    )


# 1.1 M parameters (tied input/output embeddings): ~6.5 steps/s on 2 shared CPU cores at 16
# lines a step, so 900 steps fit the build time and the model starts to pick and map words
# from the question (a 3.2 M model at ~2 steps/s for 200 steps did not).
MODEL_SHAPE = dict(hidden_size=128, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4)
PRETRAIN_STEPS = 900
PRETRAIN_LINES = 6000


def build_and_pretrain(tok, tok_dir: Path, corpus: list[str], out: Path, seed: int, steps: int, log=print,
                       shape: dict | None = None, lr: float = 1e-2, batch: int = 16, warmup: int = 50) -> dict:
    """A tiny LLaMA pretrained as a causal LM on the plain ``question => answer`` lines of ``corpus``."""
    import numpy as np
    import paddle
    from paddlenlp.transformers import LlamaConfig, LlamaForCausalLM

    paddle.seed(seed)
    np.random.seed(seed)
    paddle.set_device("cpu")
    cfg = LlamaConfig(
        vocab_size=len(tok),
        max_position_embeddings=512,
        rms_norm_eps=1e-6,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
        use_flash_attention=False,
        **(shape or MODEL_SHAPE),
    )
    model = LlamaForCausalLM(cfg)
    n_params = sum(int(np.prod(p.shape)) for p in model.parameters())
    # One line per row (BOS line EOS), right padded. The loss is on what follows the first
    # "=>" of a line (its answers and EOS): the questions are context, not targets.
    rng = np.random.RandomState(seed)
    arrow = tok.encode("=>", add_special_tokens=False)["input_ids"]
    rows = []
    for t in corpus:
        ids = [tok.bos_token_id] + tok.encode(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        start = next((i + len(arrow) for i in range(len(ids)) if ids[i:i + len(arrow)] == arrow), 0)
        rows.append((ids, [-100] * start + ids[start:]))
    opt = paddle.optimizer.AdamW(
        learning_rate=paddle.optimizer.lr.LinearWarmup(
            paddle.optimizer.lr.CosineAnnealingDecay(lr, T_max=max(steps - warmup, 1)), warmup, 0.0, lr),
        parameters=model.parameters(),
        weight_decay=0.01,
        grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0),
    )
    model.train()
    t0 = time.perf_counter()
    losses = []
    order = rng.permutation(len(rows))
    pos = 0
    for step in range(steps):
        if pos + batch > len(order):
            order, pos = rng.permutation(len(rows)), 0
        chunk = [rows[i] for i in order[pos:pos + batch]]
        pos += batch
        n = max(len(r) for r, _ in chunk) - 1
        x = np.full((len(chunk), n), tok.pad_token_id, dtype="int64")
        y = np.full((len(chunk), n), -100, dtype="int64")
        for k, (r, lab) in enumerate(chunk):
            x[k, :len(r) - 1], y[k, :len(r) - 1] = r[:-1], lab[1:]  # labels shifted left
        out_ = model(input_ids=paddle.to_tensor(x), labels=paddle.to_tensor(y))
        loss = out_[0] if isinstance(out_, tuple) else out_.loss
        loss.backward()
        opt.step()
        opt.clear_grad()
        opt._learning_rate.step()
        losses.append(float(loss))
        if step % 100 == 0 or step == steps - 1:
            log(f"pretrain step {step + 1}/{steps} loss {losses[-1]:.3f}")
            report_progress(0.15 + 0.8 * (step + 1) / steps, f"pretraining the demo model: step {step + 1}/{steps}",
                            code="demo_pretraining", step=step + 1, steps=steps)
    model.eval()
    tmp = workspace.temp_dir_beside(out)
    try:
        model.save_pretrained(str(tmp), safe_serialization=True)
        for f in tok_dir.iterdir():
            shutil.copy2(f, tmp / f.name)
        info = {
            "name": DEMO_MODEL,
            "architecture": "LlamaForCausalLM",
            "parameters": n_params,
            "shape": shape or MODEL_SHAPE,
            "vocab_size": len(tok),
            "pretrain": {
                "steps": steps,
                "batch": batch,
                "first_loss": round(losses[0], 4),
                "last_loss": round(sum(losses[-10:]) / min(10, len(losses)), 4),
                "seconds": round(time.perf_counter() - t0, 1),
                "corpus": f"{len(corpus)} plain question => answer lines, loss after the arrow (no chat template, no dev record)",
            },
            "seed": seed,
            "demo_version": DEMO_VERSION,
        }
        workspace.write_json_atomic(tmp / workspace.MODEL_MARKER, info)
        workspace.publish_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return info


def _built_version(info_file: Path) -> int | None:
    """The demo_version recorded in a demo part's meta file (None when there is none)."""
    try:
        v = json.loads(info_file.read_text(encoding="utf-8")).get("demo_version")
    except (OSError, ValueError, AttributeError):
        return None
    return v if isinstance(v, int) else None


def _parts(root: Path | None = None) -> dict:
    """Folder and finished-marker file of each demo part, in the workspace or under ``root``."""
    ds = (root / "datasets" if root else workspace.datasets_dir()) / DEMO_DATASET
    md = (root / "models" if root else workspace.models_dir()) / DEMO_MODEL
    return {"dataset": (ds, ds / workspace.DATASET_META), "model": (md, md / workspace.MODEL_MARKER)}


# A second workspace holding built demo parts (`make` points it at the checkout's .cache/demo-ws,
# the folder the tests build theirs in): a part it has at the current version is copied from it
# instead of being built again, and a part built here is copied into it for the next workspace.
CACHE_ENV = "PADDLE_STUDIO_DEMO_CACHE"


def cache_root() -> Path | None:
    v = os.environ.get(CACHE_ENV, "").strip()
    if not v:
        return None
    root = Path(v).expanduser().resolve()
    return None if root == workspace.home() else root


def _current(name: str, root: Path | None, seed: int | None = None) -> bool:
    """The part under ``root`` is finished at its current version (and of ``seed`` when given)."""
    f = _parts(root)[name][1]
    if _built_version(f) != VERSIONS[name]:
        return False
    if seed is None:
        return True
    try:
        return json.loads(f.read_text(encoding="utf-8")).get("seed") == seed
    except (OSError, ValueError, AttributeError):
        return False


def _copy_part(name: str, src_root: Path, dst_root: Path | None, log) -> bool:
    """Copy a finished demo part between workspaces through a temp folder renamed into place
    (nothing half-copied ever looks finished). False (said in the log) when it cannot be copied."""
    src = _parts(src_root)[name][0]
    dst = _parts(dst_root)[name][0]
    if dst.exists():
        return False
    try:
        tmp = workspace.temp_dir_beside(dst)
        try:
            shutil.copytree(src, tmp / dst.name)
            os.rename(tmp / dst.name, dst)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError as e:
        log(f"could not copy the demo {name} from {src}: {e}")
        return False
    return True


VERSIONS = {"dataset": DATASET_VERSION, "model": DEMO_VERSION}


def status() -> dict:
    """Which demo parts exist in the workspace, built by their current version."""
    return {name: str(d) if _built_version(f) == VERSIONS[name] else None for name, (d, f) in _parts().items()}


def _model_seed() -> int | None:
    try:
        return json.loads((_parts()["model"][1]).read_text(encoding="utf-8")).get("seed")
    except (OSError, ValueError, AttributeError):
        return None


def _clear(name: str, log) -> None:
    """Make room for a demo part: remove one an older demo version built; refuse anything else."""
    _clear_in(name, None, log)


def _clear_in(name: str, root: Path | None, log) -> None:
    d, f = _parts(root)[name]
    if not d.exists():
        return
    old = _built_version(f)
    if old is None:  # a folder without our meta file is not ours: never overwrite it
        raise FileExistsError(f"{d} exists but is not a finished demo {name}; move it away")
    log(f"replacing demo {name} built by demo version {old}")
    trash = workspace.temp_dir_beside(d)
    os.rename(d, trash / d.name)  # out of the way in one step, then deleted
    shutil.rmtree(trash, ignore_errors=True)


def init(seed: int = 1234, steps: int = PRETRAIN_STEPS, log=print) -> dict:
    """Create the demo dataset and model where missing or built by an older demo version.

    Idempotent; returns what is there."""
    t0 = time.perf_counter()
    cache = cache_root()
    copied = []
    for name in ("dataset", "model"):
        if cache and not status()[name] and _current(name, cache, seed):
            _clear(name, log)
            report_progress(None, f"copying the demo {name} from {cache}", code=f"demo_copying_{name}", path=str(cache))
            if _copy_part(name, cache, None, log):
                log(f"demo {name} copied from {cache}")
                copied.append(name)
    done = status()
    created = []
    ds_root = workspace.datasets_dir()
    if not done["dataset"]:
        _clear("dataset", log)
        log("writing demo dataset")
        report_progress(0.01, "writing the demo dataset", code="demo_dataset")
        write_dataset(ds_root, seed)
        created.append("dataset")
    # a rewritten dataset of the same seed holds the same text: the model stays valid
    if not done["model"] or ("dataset" in created and _model_seed() != seed):
        _clear("model", log)
        md = workspace.models_dir() / DEMO_MODEL
        read = lambda f: [json.loads(l) for l in (ds_root / DEMO_DATASET / f).open(encoding="utf-8")]  # noqa: E731
        train, dev = read("train.json"), read("dev.json")
        plain = _plain_lines(seed + 1, exclude=dev, n=PRETRAIN_LINES)
        scratch = workspace.temp_dir_beside(workspace.models_dir() / ".demo-tokenizer")
        try:
            log("training tokenizer")
            report_progress(0.05, "training the demo tokenizer", code="demo_tokenizer")
            tok, tok_dir = train_tokenizer(_sentences(train + dev) + plain, scratch, seed)
            log("pretraining tiny LLaMA")
            build_and_pretrain(tok, tok_dir, plain, md, seed, steps, log)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        created.append("model")
    for name in created:  # for the next workspace (the tests' or another `make run`)
        if cache and not _current(name, cache):
            try:
                _clear_in(name, cache, log)
            except FileExistsError as e:
                log(f"not caching the demo {name}: {e}")
                continue
            _copy_part(name, None, cache, log)
    out = status()
    out["created"] = created
    out["copied"] = copied
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def submit() -> str:
    """Build (or finish building) the demo workspace as a job; returns the job id."""
    from core import jobs

    outs = [d for d, _ in _parts().values()]
    return jobs.submit("demo", ["demo", "init", "--json"], title="demo workspace", outputs=outs)


def progress() -> dict:
    """Where the demo workspace stands, for a page to show: which parts are there, and the newest
    demo job (state, fraction, what it is doing, why it failed)."""
    from core import jobs

    parts = status()
    out = {"ready": all(parts.values()), "parts": parts, "job": None}
    newest = next(iter(jobs.list_jobs("demo")), None)
    if newest:
        st, pr = newest["status"] or {}, newest.get("progress") or {}
        ago = None
        try:
            from datetime import datetime, timezone

            ago = (datetime.now(timezone.utc) - datetime.fromisoformat(st["finished"])).total_seconds()
        except (KeyError, TypeError, ValueError):
            pass
        out["job"] = {"job_id": newest["job_id"], "state": st.get("state"), "fraction": pr.get("fraction"),
                      "text": pr.get("text", ""), "code": pr.get("code"), "params": pr.get("params") or {},
                      "reason": st.get("reason") or st.get("error") or "", "finished_ago_s": ago}
    return out


def ensure() -> str | None:
    """Start building the demo workspace as a job unless it is complete or a demo job is already
    active; returns the active job's id (None when the demo is complete)."""
    from core import jobs

    p = progress()
    if p["ready"]:
        return None
    if p["job"] and p["job"]["state"] in jobs.ACTIVE:
        return p["job"]["job_id"]
    return submit()


# Tiny models of every family a preset describes (presets/models/<family>.json "tiny"): random
# weights, a sentencepiece vocabulary trained on the demo text with the family's chat-template
# markers as single pieces, the family's chat template. They exercise each family's code paths
# (PEFT, merge, generation, quantization) in seconds; they are not meant to answer anything.
FAMILY_PREFIX = "tiny-"


def _ensure_dataset(seed: int, log) -> Path:
    """The demo dataset (copied from the cache or written; the demo model is not needed here)."""
    cache = cache_root()
    if not status()["dataset"]:
        _clear("dataset", log)
        if not (cache and _current("dataset", cache, seed) and _copy_part("dataset", cache, None, log)):
            write_dataset(workspace.datasets_dir(), seed)
    return workspace.datasets_dir() / DEMO_DATASET


def family_model(family: str, seed: int = 1234, name: str | None = None, out: str | Path | None = None,
                 hf: bool = False, log=print) -> dict:
    """Build ``models/tiny-<family>`` (Paddle layout, random weights), or write it to the folder
    ``out`` (outside the workspace's models, to try ``models import``); ``hf`` writes the same
    weights as Hugging Face does (PyTorch names and layouts, written with numpy and safetensors).
    Returns the model's info."""
    import numpy as np
    import paddle
    import paddlenlp.transformers as T

    from core.train.config import family_preset

    preset = family_preset(family)
    if "tiny" not in preset:
        raise ValueError(f"the {family} preset has no tiny shape")
    if hf and not out:
        raise ValueError("the Hugging Face layout is for import: say where to write it (--out DIR)")
    hf_out = out if hf else None
    if hf and "hf_format" not in preset:
        raise ValueError(f"the {family} preset says nothing about its Hugging Face layout (hf_format)")
    ds = _ensure_dataset(seed, log)
    read = lambda f: [json.loads(l) for l in (ds / f).open(encoding="utf-8")]  # noqa: E731
    train, dev = read("train.json"), read("dev.json")
    out = Path(out) if out else workspace.models_dir() / (name or FAMILY_PREFIX + family)
    if out.exists():
        raise FileExistsError(f"{out} already exists")
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = workspace.temp_dir_beside(out)
    try:
        report_progress(0.1, f"training the {family} tokenizer", code="family_tokenizer", family=family)
        tok, tok_dir = train_tokenizer(_sentences(train + dev) + _plain_lines(seed + 1, exclude=dev, n=2000),
                                       scratch / "tok", seed, markers=preset.get("template_markers", []),
                                       chat_template=preset["chat_template"], eos=preset.get("eos_token", "</s>"),
                                       kind=preset.get("tokenizer"))
        report_progress(0.6, f"initialising a tiny {preset['architecture']}", code="family_init",
                        architecture=preset["architecture"])
        paddle.set_device("cpu")
        paddle.seed(seed)
        cls = getattr(T, preset["architecture"])
        # ids of the family's own special tokens its config names (ChatGLM's [MASK] and [gMASK])
        own_ids = {k: int(tok.convert_tokens_to_ids(v)) for k, v in preset.get("config_token_ids", {}).items()}
        cfg = cls.config_class(vocab_size=len(tok), bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                               pad_token_id=tok.pad_token_id, **own_ids, **preset["tiny"])
        model = cls(cfg)
        _revive_zero_linears(model, getattr(cfg, "initializer_range", 0.02))
        model.eval()
        n_params = sum(int(np.prod(p.shape)) for p in model.parameters())
        tmp = scratch / "model"
        if hf_out:
            _write_hf(model, preset, tmp)
        else:
            model.save_pretrained(str(tmp), safe_serialization=True)
        for f in tok_dir.iterdir():
            shutil.copy2(f, tmp / f.name)
        info = {"name": out.name, "family": family, "architecture": preset["architecture"], "parameters": n_params,
                "vocab_size": len(tok), "random_init": True, "seed": seed, "demo_version": DEMO_VERSION}
        if out.parent == workspace.models_dir():
            workspace.write_json_atomic(tmp / workspace.MODEL_MARKER, info)
        os.rename(tmp, out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    log(f"{out}: tiny {preset['architecture']}, {n_params:,} parameters" + (" (Hugging Face layout)" if hf_out else ""))
    return {**info, "path": str(out)}


def _revive_zero_linears(model, std: float) -> int:
    """Give random weights to every linear layer initialised to all zeros. PaddleNLP 3.0.0b4's
    BloomPreTrainedModel._init_weights zeroes the *weight* of every nn.Linear that has a bias
    (instead of the bias), which leaves a random-init Bloom dead: no gradient reaches LoRA."""
    import paddle
    import paddle.nn as nn

    n = 0
    for layer in model.sublayers():
        if isinstance(layer, nn.Linear) and not bool(layer.weight.abs().max() > 0):
            layer.weight.set_value(paddle.normal(0.0, std, layer.weight.shape).astype(layer.weight.dtype))
            if layer.bias is not None:
                layer.bias.set_value(paddle.zeros_like(layer.bias))
            n += 1
    return n


def _write_hf(model, preset: dict, out: Path) -> None:
    """The model as Hugging Face writes it: ``model.`` in place of Paddle's base prefix, every
    linear weight transposed to PyTorch's [out, in], float32 safetensors marked format=pt, and a
    config.json without PaddleNLP's own keys."""
    from safetensors.numpy import save_file

    import numpy as np

    base = model.base_model_prefix + "."
    hf_prefix = preset["hf_format"]["prefix"]
    tensors = {}
    for k, v in model.state_dict().items():
        a = v.numpy()
        if a.ndim == 2 and "embed" not in k:  # nn.Linear: Paddle [in, out], PyTorch [out, in]
            a = a.T
        tensors[hf_prefix + k[len(base):] if k.startswith(base) else k] = np.ascontiguousarray(a)
    out.mkdir(parents=True)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    cfg = model.config.to_dict()
    for k in ("paddlenlp_version", "dtype", "dpo_config"):
        cfg.pop(k, None)
    cfg.update(architectures=[preset["architecture"]], torch_dtype="float32", transformers_version="4.44.0")
    workspace.write_json_atomic(out / "config.json", cfg)


def text_corpus(seed: int, n: int) -> list[str]:
    """Raw text for continued pretraining, in a register the demo model never saw: short zh and en
    descriptions of where coloured things are ("The red apple is next to the blue cup.")."""
    rng = random.Random(seed)
    places_en = ["next to", "under", "behind", "in front of", "on"]
    places_zh = ["旁边", "下面", "后面", "前面", "上面"]
    nouns = list(ZH_EN_NOUNS.items())
    colors = list(ZH_EN_COLORS.items())
    out = []
    for _ in range(n):
        (zn1, en1), (zn2, en2) = rng.sample(nouns, 2)
        (zc1, ec1), (zc2, ec2) = rng.choice(colors), rng.choice(colors)
        k = rng.randrange(len(places_en))
        if rng.random() < 0.5:
            out.append(f"The {ec1} {en1} is {places_en[k]} the {ec2} {en2}.")
        else:
            out.append(f"{zc1}的{zn1}在{zc2}的{zn2}{places_zh[k]}。")
    return out
