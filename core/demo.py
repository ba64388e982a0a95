"""The demo workspace: a synthetic bilingual dataset, a tokenizer and a tiny LLaMA, built locally.

``paddle-studio demo init`` is deterministic from a seed, idempotent (a finished part is
skipped), downloads nothing and takes well under three minutes on two CPU cores.

Dataset tasks have exactly checkable answers:
- ``translate``: a colour and a noun, ``翻译成英文：红色的苹果`` -> ``red apple`` and back;
- ``attr``: ``类型#裙*颜色#蓝色*风格#清新`` -> a sentence built from the attributes (zh and en);
- ``arith``: small additions and subtractions, asked in zh or en;
- ``words``: put a list of words in reverse order (zh and en);
- ``multi``: two-turn arithmetic where the second question refers to the first answer.

The base model is pretrained on plain text only: the questions and answers as separate
sentences, and other records of the same kinds as ``question => answer`` lines (never a
dev record). It knows the domain, as a base LLM knows facts, but it has never seen the chat
template: asked in the chat format it does not answer until it is fine-tuned.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path

from core import workspace

DEMO_VERSION = 1
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
EN_TYPES = ["dress", "shirt", "coat", "skirt", "hat", "sweater"]
EN_COLORS = ["red", "blue", "white", "black", "green", "yellow", "gray", "pink"]
EN_STYLES = ["fresh", "simple", "vintage", "casual", "elegant", "sporty"]
EN_MATERIALS = ["cotton", "silk", "denim", "wool", "linen"]
ZH_WORDS = ["苹果", "香蕉", "橘子", "西瓜", "葡萄", "老虎", "熊猫", "小猫", "河流", "高山", "月亮", "太阳"]
EN_WORDS = ["apple", "banana", "orange", "melon", "grape", "tiger", "panda", "kitten", "river", "mountain", "moon", "sun"]


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
    a, b = rng.randint(0, 20), rng.randint(0, 20)
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
    k = rng.randint(2, 4)
    if rng.random() < 0.5:
        ws = rng.sample(ZH_WORDS, k)
        return {"src": "把这些词倒序排列：" + " ".join(ws), "tgt": " ".join(reversed(ws))}
    ws = rng.sample(EN_WORDS, k)
    return {"src": "Reverse the order of these words: " + " ".join(ws), "tgt": " ".join(reversed(ws))}


ZH_EN_NOUNS = dict(zip(ZH_WORDS + ["书", "杯子", "椅子", "汽车", "鸟", "花", "桌子", "门"],
                       EN_WORDS + ["book", "cup", "chair", "car", "bird", "flower", "table", "door"]))
ZH_EN_COLORS = dict(zip(ZH_COLORS, EN_COLORS))


def _translate(rng: random.Random) -> dict:
    """A colour and a noun, zh -> en or en -> zh: a lookup at fixed places in the prompt."""
    zc, zn = rng.choice(list(ZH_EN_COLORS)), rng.choice(list(ZH_EN_NOUNS))
    zh, en = f"{zc}的{zn}", f"{ZH_EN_COLORS[zc]} {ZH_EN_NOUNS[zn]}"
    k = rng.randrange(4)
    if k == 0:
        return {"src": f"翻译成英文：{zh}", "tgt": en}
    if k == 1:
        return {"src": f"“{zh}”用英文怎么说？", "tgt": en}
    if k == 2:
        return {"src": f"Translate to Chinese: {en}", "tgt": zh}
    return {"src": f"How do you say \"{en}\" in Chinese?", "tgt": zh}


def _multi(rng: random.Random) -> dict:
    a, b, c = rng.randint(0, 10), rng.randint(0, 10), rng.randint(0, 10)
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
    makers = [(_translate, 0.35), (_attr, 0.3), (_arith, 0.15), (_words, 0.1), (_multi, 0.1)]
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


def write_dataset(root: Path, seed: int, n_train: int = 3000, n_dev: int = 200) -> dict:
    """Write train.json/dev.json/meta.json of the demo dataset atomically; returns meta."""
    final = root / DEMO_DATASET
    recs = generate_records(n_train + n_dev, seed)
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
            "multi_turn": sum(isinstance(r["src"], list) for r in recs),
            "seed": seed,
            "demo_version": DEMO_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        }
        workspace.write_json_atomic(tmp / "meta.json", meta)
        workspace.publish_dir(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return meta


def _corpus_lines(records: list[dict], seed: int, exclude: list[dict], n_plain: int = 3000) -> list[str]:
    """The pretraining corpus, with no chat template anywhere in it.

    - the dataset's questions and answers as separate, unpaired sentences;
    - ``n_plain`` further records drawn with another seed (none of them a dev record), as
      plain text ``question => answer``: the model learns the domain the way a base LLM
      learns facts from the web, but has never seen the chat format it is asked in.
    """
    lines = []
    for r in records:
        for x in (r["src"], r["tgt"]):
            lines.extend(x if isinstance(x, list) else [x])
    banned = {json.dumps(r, ensure_ascii=False, sort_keys=True) for r in exclude}
    for r in generate_records(n_plain + len(banned), seed + 1):
        if json.dumps(r, ensure_ascii=False, sort_keys=True) in banned:
            continue
        src, tgt = (r["src"], r["tgt"]) if isinstance(r["src"], list) else ([r["src"]], [r["tgt"]])
        lines.append(" ".join(f"{q} => {a}" for q, a in zip(src, tgt)))
        if len(lines) >= n_plain + 2 * len(records):
            break
    return lines


def train_tokenizer(corpus: list[str], out_dir: Path, seed: int, vocab_size: int = 1200):
    """A sentencepiece BPE with byte fallback, wrapped as PaddleNLP's LlamaTokenizer."""
    import sentencepiece as spm

    from core.datasets import load_tokenizer

    out_dir.mkdir(parents=True, exist_ok=True)
    text = out_dir / "corpus.txt"
    text.write_text("\n".join(corpus) + "\n", encoding="utf-8")
    _spm_train(spm, text, out_dir, vocab_size, seed)
    text.unlink()
    from paddlenlp.transformers import LlamaTokenizer

    tok = LlamaTokenizer(vocab_file=str(out_dir / "sp.model"), pad_token="<pad>", add_bos_token=True)
    tok_dir = out_dir / "tokenizer"
    tok.save_pretrained(str(tok_dir))
    cfg_path = tok_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    cfg["chat_template"] = CHAT_TEMPLATE
    workspace.write_json_atomic(cfg_path, cfg)
    for f in ("sp.model", "sp.vocab"):
        (out_dir / f).unlink(missing_ok=True)
    return load_tokenizer(tok_dir), tok_dir


def _spm_train(spm, text: Path, out_dir: Path, vocab_size: int, seed: int) -> None:
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
        pad_id=3,
        pad_piece="<pad>",
        user_defined_symbols=[USER_TOKEN, ASSISTANT_TOKEN, SYSTEM_TOKEN],
        split_digits=True,
        max_sentencepiece_length=4,  # short pieces: answers reuse the prompt's tokens
        normalization_rule_name="identity",  # keep full-width punctuation as written
        hard_vocab_limit=False,
        num_threads=1,
        minloglevel=2,
    )


MODEL_SHAPE = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4)


def build_and_pretrain(tok, tok_dir: Path, corpus: list[str], out: Path, seed: int, steps: int, log=print,
                       shape: dict | None = None, lr: float = 2e-3, batch: int = 16) -> dict:
    """A tiny LLaMA, briefly pretrained as a causal LM on the unpaired corpus sentences."""
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
        tie_word_embeddings=False,
        use_flash_attention=False,
        **(shape or MODEL_SHAPE),
    )
    model = LlamaForCausalLM(cfg)
    n_params = sum(int(np.prod(p.shape)) for p in model.parameters())
    # Pack sentences (BOS s EOS ...) into fixed blocks.
    rng = np.random.RandomState(seed)
    ids: list[int] = []
    for i in rng.permutation(len(corpus)):
        ids.extend(tok.encode(corpus[i], add_special_tokens=False)["input_ids"])
        ids.append(tok.eos_token_id)
    block = 64
    n_blocks = len(ids) // (block + 1)
    data = np.array(ids[: n_blocks * (block + 1)], dtype="int64").reshape(n_blocks, block + 1)
    opt = paddle.optimizer.AdamW(
        learning_rate=paddle.optimizer.lr.CosineAnnealingDecay(lr, T_max=steps),
        parameters=model.parameters(),
        weight_decay=0.01,
    )
    model.train()
    t0 = time.perf_counter()
    losses = []
    for step in range(steps):
        rows = data[rng.randint(0, n_blocks, size=batch)]
        x, y = paddle.to_tensor(rows[:, :-1]), paddle.to_tensor(rows[:, 1:])  # labels shifted left
        out_ = model(input_ids=x, labels=y)
        loss = out_[0] if isinstance(out_, tuple) else out_.loss
        loss.backward()
        opt.step()
        opt.clear_grad()
        opt._learning_rate.step()
        losses.append(float(loss))
        if step % 25 == 0 or step == steps - 1:
            log(f"pretrain step {step + 1}/{steps} loss {losses[-1]:.3f}")
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
                "block": block,
                "first_loss": round(losses[0], 4),
                "last_loss": round(sum(losses[-10:]) / min(10, len(losses)), 4),
                "seconds": round(time.perf_counter() - t0, 1),
                "corpus": "unpaired questions and answers + plain question => answer lines (no chat template, no dev record)",
            },
            "seed": seed,
            "demo_version": DEMO_VERSION,
        }
        workspace.write_json_atomic(tmp / "studio_model.json", info)
        workspace.publish_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return info


def status() -> dict:
    """Which demo parts exist in the workspace."""
    ds = workspace.datasets_dir() / DEMO_DATASET
    md = workspace.models_dir() / DEMO_MODEL
    return {
        "dataset": str(ds) if (ds / "meta.json").is_file() else None,
        "model": str(md) if (md / "studio_model.json").is_file() else None,
    }


def init(seed: int = 1234, steps: int = 200, log=print) -> dict:
    """Create the demo dataset and model where missing. Idempotent; returns what is there."""
    t0 = time.perf_counter()
    done = status()
    created = []
    ds_root = workspace.datasets_dir()
    if not done["dataset"]:
        ds_dir = ds_root / DEMO_DATASET
        if ds_dir.exists():  # a folder without meta.json is not ours: never overwrite it
            raise FileExistsError(f"{ds_dir} exists but is not a finished demo dataset; move it away")
        log("writing demo dataset")
        write_dataset(ds_root, seed)
        created.append("dataset")
    if not done["model"]:
        md = workspace.models_dir() / DEMO_MODEL
        if md.exists():
            raise FileExistsError(f"{md} exists but is not a finished demo model; move it away")
        read = lambda f: [json.loads(l) for l in (ds_root / DEMO_DATASET / f).open(encoding="utf-8")]  # noqa: E731
        train, dev = read("train.json"), read("dev.json")
        corpus = _corpus_lines(train + dev, seed, exclude=dev)
        scratch = workspace.temp_dir_beside(workspace.models_dir() / ".demo-tokenizer")
        try:
            log("training tokenizer")
            tok, tok_dir = train_tokenizer(corpus, scratch, seed)
            log("pretraining tiny LLaMA")
            build_and_pretrain(tok, tok_dir, corpus, md, seed, steps, log)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        created.append("model")
    out = status()
    out["created"] = created
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out
