"""Models users bring: check a local model folder, then import it into ``models/NAME``.

A folder is either PaddleNLP's (``save_pretrained``: Paddle parameter names and layouts, in
safetensors or ``model_state.pdparams``) or Hugging Face's (PyTorch names and layouts, in
safetensors or ``pytorch_model.bin``), which PaddleNLP converts (``convert_from_torch``).
:func:`inspect` reads only headers: config, tokenizer, every weight file (shards of an index
included, truncation detected), parameter count, dtype, disk size, chat template. :func:`import_model`
copies (or links) a Paddle folder, or converts a Hugging Face one, in a temp folder renamed into
place once complete: a failed import leaves nothing behind.
"""

from __future__ import annotations

import errno
import json
import math
import os
import pickle
import shutil
import struct
import time
from pathlib import Path

from core import workspace
from core.jobs import report_progress

SAFE_SINGLE, SAFE_INDEX = "model.safetensors", "model.safetensors.index.json"
PADDLE_SINGLE, PADDLE_INDEX = "model_state.pdparams", "model_state.pdparams.index.json"
TORCH_SINGLE, TORCH_INDEX = "pytorch_model.bin", "pytorch_model.bin.index.json"
TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json", "vocab.json", "merges.txt", "tokenizer.model",
                   "sentencepiece.bpe.model", "vocab.txt", "spiece.model", "ice_text.model")
# weights are loaded to check them only below this size; above it, names and sizes are checked from the headers
LOAD_CHECK_BYTES = 4 << 30
_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
                "F8_E4M3": 1, "F8_E5M2": 1}


class ModelFolderError(ValueError):
    """A model folder that cannot be imported; the message names the file and what was expected.
    ``code`` and ``params`` (MESSAGES) let the page say it in the user's language."""

    def __init__(self, message: str, code: str | None = None, **params):
        super().__init__(message)
        self.code, self.params = code, params


MESSAGES = {
    "a_file": "{path} is a file, not a folder: give the folder that holds config.json, the tokenizer and the weights",
    "no_folder": "{path}: no such folder",
    "bad_json": "{path}: line {line} column {col}: not valid JSON ({msg})",
    "not_utf8": "{path}: not UTF-8 text",
    "unreadable_json": "{path}: not readable as JSON: {error}",
    "not_object": "{path}: expected a JSON object, found {found}",
    "safetensors_short": "{path}: {size} bytes, too short to be a safetensors file",
    "not_safetensors": "{path}: not a safetensors file (header length {n} for a {size}-byte file)",
    "safetensors_header": "{path}: the safetensors header is not valid JSON",
    "cut_short": "{path}: cut short: the header describes {need:,} bytes, the file has {size:,} (an interrupted "
                 "download or copy?)",
    "no_weight_map": "{path}: no \"weight_map\" object naming the shard of each weight",
    "missing_shards": "{path} names {shards} shard(s); missing: {missing}",
    "no_weights": "{path}: no weights: expected {expected} (or a sharded *.index.json with its shards)",
    "no_config": "{path}: no config.json (a model folder has config.json, tokenizer files and weights)",
    "no_model_type": "{path}: no \"model_type\" (expected e.g. \"llama\", \"qwen2\")",
    "unknown_model_type": "{path}: model_type {model_type!r} has no family preset (presets/models/); supported: {known}",
    "no_tokenizer": "{path}: no tokenizer: expected tokenizer_config.json with its vocabulary (one of {expected})",
    "tokenizer_fails": "{path}: the tokenizer does not load: {error}",
    "weights_fail": "{path}: the weights do not load as {architecture}: {error}",
    "vocab_too_big": "{path}: the tokenizer has {tokens} tokens, the embedding only {rows} rows",
}


def _bad(code: str, **params) -> ModelFolderError:
    return ModelFolderError(MESSAGES[code].format(**params), code, **params)


def _read_json(path: Path) -> dict:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise _bad("bad_json", path=str(path), line=e.lineno, col=e.colno, msg=e.msg) from None
    except UnicodeDecodeError:
        raise _bad("not_utf8", path=str(path)) from None
    except ValueError as e:  # e.g. an integer longer than Python reads ("Exceeds the limit (4300 digits)")
        raise _bad("unreadable_json", path=str(path), error=str(e)) from None
    if not isinstance(obj, dict):
        raise _bad("not_object", path=str(path), found=type(obj).__name__)
    return obj


def safetensors_header(path: Path) -> dict:
    """Tensor name -> {dtype, shape} of one safetensors file, read from its header only; refuses a
    file that is cut short (its header points past the end of the file)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise _bad("safetensors_short", path=str(path), size=size)
        n = struct.unpack("<Q", head)[0]
        if n > min(size - 8, 100 << 20):
            raise _bad("not_safetensors", path=str(path), n=n, size=size)
        try:
            header = json.loads(f.read(n))
        except (ValueError, UnicodeDecodeError):
            raise _bad("safetensors_header", path=str(path)) from None
    header.pop("__metadata__", None)
    end = max((t["data_offsets"][1] for t in header.values()), default=0)
    if 8 + n + end > size:
        raise _bad("cut_short", path=str(path), need=8 + n + end, size=size)
    return {k: {"dtype": t["dtype"], "shape": t["shape"]} for k, t in header.items()}


def _safetensors_meta(path: Path) -> dict:
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)).get("__metadata__") or {}


def _weight_files(d: Path) -> tuple[str, list[Path]]:
    """(kind, files): kind is safetensors, paddle or torch; every shard an index names must exist."""
    for kind, single, index in (("safetensors", SAFE_SINGLE, SAFE_INDEX), ("paddle", PADDLE_SINGLE, PADDLE_INDEX),
                                ("torch", TORCH_SINGLE, TORCH_INDEX)):
        if (d / index).is_file():
            idx = _read_json(d / index)
            wm = idx.get("weight_map")
            if not isinstance(wm, dict) or not wm:
                raise _bad("no_weight_map", path=str(d / index))
            shards = sorted(set(wm.values()))
            missing = [s for s in shards if not (d / s).is_file()]
            if missing:
                raise _bad("missing_shards", path=str(d / index), shards=len(shards), missing=", ".join(missing[:5])
                           + (f" (+{len(missing) - 5})" if len(missing) > 5 else ""))
            return kind, [d / s for s in shards]
        if (d / single).is_file():
            return kind, [d / single]
    raise _bad("no_weights", path=str(d), expected=f"{SAFE_SINGLE}, {PADDLE_SINGLE} / {TORCH_SINGLE}")


def inspect(folder: str | Path) -> dict:
    """Everything about a model folder that can be told without loading it; raises
    ModelFolderError (file, what was expected) when it cannot be imported."""
    from core.train.config import family_of_type

    d = Path(folder).expanduser()
    if not d.is_dir():
        raise _not_a_folder(d)
    d = d.resolve()
    if not (d / "config.json").is_file():
        if os.path.lexists(d / "config.json"):  # a FIFO, a device, a link to nothing: said, never opened
            from core.data import datasets

            code, params = datasets.path_problem(d / "config.json")
            raise ModelFolderError(datasets.message(code, params), f"problem.{code}", **params)
        raise _bad("no_config", path=str(d))
    cfg = _read_json(d / "config.json")
    mtype = cfg.get("model_type")
    if not isinstance(mtype, str) or not mtype:
        raise _bad("no_model_type", path=str(d / "config.json"))
    family = family_of_type(mtype)
    if family is None:
        from core.train.config import family_presets

        known = sorted(t for f in family_presets().values() for t in f["model_types"])
        raise _bad("unknown_model_type", path=str(d / "config.json"), model_type=mtype, known=", ".join(known))
    tok_files = [f for f in TOKENIZER_FILES if (d / f).is_file()]
    if not tok_files:
        raise _bad("no_tokenizer", path=str(d), expected=", ".join(TOKENIZER_FILES[1:]))
    kind, files = _weight_files(d)
    params, dtypes, names = None, set(), []
    fmt = "torch" if kind == "torch" else "paddle"
    if kind == "safetensors":
        params = 0
        metas = set()
        for f in files:
            for name, t in safetensors_header(f).items():
                n = 1
                for s in t["shape"]:
                    n *= s
                params += n
                dtypes.add(t["dtype"].lower())
                names.append(name)
            metas.add(_safetensors_meta(f).get("format"))
        base = _base_prefix(family)
        paddle_names = sum(1 for n in names if n.startswith(base + "."))
        # PaddleNLP names every weight under the model's base prefix (llama., qwen2., ...); Hugging
        # Face under its own (model., transformer.) and marks its files format=pt
        fmt = "paddle" if paddle_names >= len(names) / 2 and "pt" not in metas else "torch"
    elif kind == "paddle":
        dtypes.add(str(cfg.get("dtype") or cfg.get("torch_dtype") or "unknown"))
    else:
        dtypes.add(str(cfg.get("torch_dtype") or "unknown"))
    tok_cfg = _read_json(d / "tokenizer_config.json") if (d / "tokenizer_config.json").is_file() else {}
    template = bool(tok_cfg.get("chat_template")) or (d / "chat_template.json").is_file()
    size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
    return {"path": str(d), "family": family["family"], "model_type": mtype,
            "architecture": (cfg.get("architectures") or [family.get("architecture")])[0],
            "format": fmt, "weights": [f.name for f in files], "weight_bytes": sum(f.stat().st_size for f in files),
            "parameters": params, "dtype": ", ".join(sorted(dtypes)) or "unknown", "size_bytes": size,
            "tokenizer": tok_cfg.get("tokenizer_class") or ", ".join(tok_files), "chat_template": template,
            "vocab_size": cfg.get("vocab_size") or cfg.get("padded_vocab_size")}


def _not_a_folder(d: Path) -> ModelFolderError:
    """What ``d`` is, said plainly, when it is not a folder: a file, a symlink loop, a FIFO, a device
    (never opened: a FIFO would block, /dev/zero never ends), or nothing."""
    from core.data import datasets

    if d.is_file():
        return _bad("a_file", path=str(d))
    code, params = datasets.path_problem(d)
    if code == "not_found":
        return _bad("no_folder", path=str(d))
    text = datasets.message(code, params).replace("give a file or a folder", "give a model folder") \
        .replace("not a file or folder", "not a model folder")
    return ModelFolderError(text, f"problem.{code}", **params)


def _base_prefix(family: dict) -> str:
    import paddlenlp.transformers as T

    arch = getattr(T, family.get("architecture") or "", None)
    return getattr(arch, "base_model_prefix", family["family"])


def _check_name(name: str) -> Path:
    bad = workspace.check_name(name)
    if bad == "name_empty":
        raise ValueError("the model name is empty: give the name it takes in the workspace (--name)")
    if bad:
        raise ValueError(f"model name {name!r} is not allowed: use letters, digits, '-', '_' or '.', no path "
                         "separators or '..'")
    out = workspace.models_dir() / name
    if out.exists() or out.is_symlink():
        raise FileExistsError(f"{out} already exists: pick another --name")
    return out


def _taken_meanwhile(name: str, out: Path) -> FileExistsError:
    return FileExistsError(f"a model named {name!r} was created meanwhile by another import (or job) at {out}, "
                           "while this one was being prepared: this import's files were discarded and the other "
                           "model left as it is; import again under another --name")


def _copy(src: Path, dst: Path, total: int, done: list, at: float, span: float) -> None:
    """Copy a folder's files with progress from ``at`` to ``at + span`` by bytes."""
    for f in sorted(src.rglob("*")):
        rel = f.relative_to(src)
        if f.is_dir():
            (dst / rel).mkdir(parents=True, exist_ok=True)
            continue
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        with open(f, "rb") as r, open(dst / rel, "wb") as w:
            while chunk := r.read(8 << 20):
                w.write(chunk)
                done[0] += len(chunk)
                report_progress(at + span * done[0] / max(total, 1), f"copying {rel} ({done[0] / 2**20:,.1f} MiB)")


def _load_check(d: Path, info: dict, log):
    """Load tokenizer and weights as training will; the first problem, said plainly. Returns the
    model and its parameter count."""
    import numpy as np
    import paddle

    paddle.set_device("cpu")
    try:
        from core.data.datasets import load_tokenizer

        tok = load_tokenizer(d)
    except Exception as e:  # noqa: BLE001 - any tokenizer failure is a bad folder
        raise _bad("tokenizer_fails", path=str(info["path"]), error=f"{type(e).__name__}: {e}") from None
    try:
        from core.models.loading import model_class

        model = model_class(d).from_pretrained(str(d), dtype="float32", convert_from_torch=info["format"] == "torch")
    except Exception as e:  # noqa: BLE001
        raise _bad("weights_fail", path=str(info["path"]), architecture=info["architecture"],
                   error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    vocab = model.get_input_embeddings().weight.shape[0]
    if len(tok) > vocab:
        raise _bad("vocab_too_big", path=str(info["path"]), tokens=len(tok), rows=vocab)
    return model, sum(int(np.prod(p.shape)) for p in model.parameters())


def import_model(folder: str | Path, name: str, link: bool = False, log=print) -> dict:
    """Check ``folder`` and import it as ``models/NAME``; Hugging Face weights are converted to
    PaddleNLP's. ``link`` keeps a Paddle folder where it is (a symlink) instead of copying it.
    Returns the model's info (also written to its studio_model.json)."""
    t0 = time.perf_counter()
    out = _check_name(name)
    report_progress(0.02, "checking the folder")
    info = inspect(folder)
    src = Path(info["path"])
    log(f"{src}: {info['family']} ({info['architecture']}), {info['format']} weights, {info['dtype']}, "
        f"{info['size_bytes'] / 2**20:,.1f} MiB")
    if link and info["format"] == "torch":
        raise ValueError("--link keeps a folder as it is; Hugging Face weights must be converted (import without --link)")
    workspace.models_dir().mkdir(parents=True, exist_ok=True)
    tmp = workspace.temp_dir_beside(out)
    try:
        stage = tmp / "model"
        if info["format"] == "torch":
            # PaddleNLP converts next to the weights it reads (it writes model_state.pdparams there):
            # convert a copy, then save the model in PaddleNLP's own layout
            raw = tmp / "raw"
            _copy(src, raw, info["size_bytes"], [0], 0.05, 0.35)
            report_progress(0.45, "converting PyTorch weights to Paddle")
            log("converting PyTorch weights to Paddle (convert_from_torch)")
            model, params = _load_check(raw, info, log)
            report_progress(0.8, "saving in PaddleNLP's layout")
            model.save_pretrained(str(stage), safe_serialization=True)
            for f in raw.iterdir():
                if f.is_file() and (f.name in TOKENIZER_FILES or f.name in ("special_tokens_map.json", "added_tokens.json",
                                                                             "chat_template.json", "generation_config.json")):
                    if not (stage / f.name).exists() or f.name != "generation_config.json":
                        shutil.copy2(f, stage / f.name)
            shutil.rmtree(raw, ignore_errors=True)
            del model
        elif link:
            stage.mkdir()
            params = info["parameters"]
        else:
            _copy(src, stage, info["size_bytes"], [0], 0.05, 0.6)
            params = info["parameters"]
            if info["weight_bytes"] <= LOAD_CHECK_BYTES:
                report_progress(0.7, "loading the weights to check them")
                _, params = _load_check(stage, info, log)
            else:
                log(f"weights not loaded to check them ({info['weight_bytes'] / 2**30:.1f} GiB); names and sizes were read")
        meta = {"name": name, "family": info["family"], "architecture": info["architecture"], "parameters": params,
                "dtype": info["dtype"], "imported_from": str(src), "format": info["format"],
                "converted": info["format"] == "torch", "linked": bool(link), "chat_template": info["chat_template"],
                "imported": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        report_progress(0.95, "publishing")
        # another import may have taken the name since it was checked: it keeps it, this one says so
        if link:  # the user's folder is not ours to write: the marker lives beside the link
            try:
                os.symlink(src, out)
            except FileExistsError:
                raise _taken_meanwhile(name, out) from None
            workspace.write_json_atomic(workspace.models_dir() / f".{name}.link.json", meta)
        else:
            workspace.write_json_atomic(stage / workspace.MODEL_MARKER, meta)
            if out.exists() or out.is_symlink():  # rename would replace an empty folder without a word
                raise _taken_meanwhile(name, out)
            try:
                os.rename(stage, out)
            except OSError as e:
                if e.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                    raise _taken_meanwhile(name, out) from None
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) if not link else info["size_bytes"]
    log(f"imported {name}: {params:,} parameters in {time.perf_counter() - t0:.1f} s")
    return {**meta, "path": str(out), "size_bytes": size, "seconds": round(time.perf_counter() - t0, 1)}


def submit(folder: str | Path, name: str, link: bool = False) -> str:
    """Import as a job (progress on the page); returns the job id. The name is checked at once."""
    from core import jobs

    out = _check_name(name)
    args = ["models", "import", str(Path(folder).expanduser()), "--name", name, "--json", *(["--link"] if link else [])]
    return jobs.submit("import", args, title=f"import {name}", params={"folder": str(folder), "name": name},
                       outputs=[out])


def _marker(d: Path) -> dict:
    meta = {}
    for f in (d.parent / f".{d.name}.link.json", d / workspace.MODEL_MARKER):  # a link: the import, not the target
        if f.is_file():
            try:
                meta = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                pass
            break
    return meta


def _source(meta: dict) -> str | None:
    """The folder a model was made from (merged, quantized, exported, trained or an adapter's base)."""
    return ((meta.get("merged_from") or {}).get("base") or meta.get("quantized_from") or meta.get("exported_from")
            or meta.get("base"))


def _parameters(d: Path, meta: dict, depth: int = 0) -> int | None:
    """The model's parameter count: its own marker's, else that of the model it was made from
    (merging, quantizing, exporting or fully fine-tuning keep the count)."""
    if meta.get("parameters"):
        return int(meta["parameters"])
    src = _source(meta)
    if not src or depth > 4 or meta.get("adapter"):
        return None
    return _parameters(Path(src), _marker(Path(src)), depth + 1)


class _ArraysOnly(pickle.Unpickler):
    """Unpickles a dict of numpy arrays (what paddle.save writes for a state dict) and nothing else."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy", "ndarray"), ("numpy", "dtype"), ("collections", "OrderedDict"),
               ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar")}

    def find_class(self, module, name):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a state dict")
        return super().find_class(module, name)


def adapter_parameters(d: Path) -> int | None:
    """The values an adapter's weights file holds (its safetensors headers, or its .pdparams: a pickled
    dict of arrays, read without running any code); None when unreadable."""
    try:
        st = sorted(Path(d).glob("*.safetensors"))
        if st:
            total = 0
            for f in st:
                with open(f, "rb") as fh:
                    n = int.from_bytes(fh.read(8), "little")
                    header = json.loads(fh.read(n))
                total += sum(math.prod(v["shape"]) for k, v in header.items() if k != "__metadata__")
            return total
        pd = sorted(f for f in Path(d).glob("*.pdparams") if f.stat().st_size < 2 << 30)
        total = 0
        for f in pd:
            with open(f, "rb") as fh:
                state = _ArraysOnly(fh).load()
            total += sum(int(getattr(v, "size", 0)) for v in state.values())
        return total or None
    except (OSError, ValueError, KeyError, TypeError, pickle.UnpicklingError, EOFError, AttributeError):
        return None


def _model_bytes(d: Path) -> int | None:
    """The folder's size without its training checkpoints (a run output keeps checkpoint-N/ beside
    the model; counting them gave an adapter 11.9 MiB next to its 4.7 MiB base)."""
    try:
        return sum(f.stat().st_size for f in d.rglob("*")
                   if f.is_file() and not any(p.startswith("checkpoint-") for p in f.relative_to(d).parts[:-1]))
    except OSError:
        return None


def describe(d: str | Path) -> dict:
    """What the Models list shows of a workspace model: its marker plus family, parameters (an
    adapter: its own), size (without checkpoints), chat template and where it came from (``origin``:
    a code and its params, written out by the page in the user's language; ``origin_text`` in English)."""
    from core.train.config import family_of_type

    d = Path(d)
    meta = _marker(d)
    try:
        cfg = json.loads((d / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cfg = {}
    fam = family_of_type(cfg.get("model_type", "")) if cfg else None
    tok = {}
    try:
        tok = json.loads((d / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    family = meta.get("family") or (fam or {}).get("family")
    if not family and _source(meta):  # an adapter: its base's family
        try:
            bcfg = json.loads((Path(_source(meta)) / "config.json").read_text(encoding="utf-8"))
            family = (family_of_type(bcfg.get("model_type", "")) or {}).get("family")
        except (OSError, ValueError):
            pass
    params = adapter_parameters(d) if meta.get("adapter") else _parameters(d, meta)
    code, oparams = origin(meta)
    return {"family": family, "parameters": params, "size_bytes": _model_bytes(d),
            "chat_template": bool(tok.get("chat_template")) or (d / "chat_template.json").is_file(),
            "origin": {"code": code, **oparams} if code else None,
            "origin_text": ORIGINS[code].format(**oparams) if code else ""}


ORIGINS = {
    "imported": "imported ({how}) from {path}",
    "static": "static export (Paddle Inference) of {path}",
    "random": "tiny, random weights (demo init --family)",
    "demo": "demo model",
    "merged": "{kind} adapter {adapter} merged into {base}",
    "quantized": "quantized ({algorithm}, preset {preset}) from {path}",
    "adapter": "{kind} adapter of {base}, run {run}, {steps} steps",
    "trained": "{method} of {base}, run {run}, {steps} steps",
}


def origin(meta: dict) -> tuple[str | None, dict]:
    """Where a model came from, as (code, params) of ORIGINS; (None, {}) when its marker does not say."""
    if meta.get("imported_from"):
        how = "linked" if meta.get("linked") else "converted from PyTorch" if meta.get("converted") else "copied"
        return "imported", {"how": how, "path": meta["imported_from"]}
    if meta.get("kind") == "static" and meta.get("exported_from"):
        return "static", {"path": meta["exported_from"]}
    if meta.get("random_init"):
        return "random", {}
    if meta.get("pretrain"):
        return "demo", {}
    if meta.get("merged_from"):
        m = meta["merged_from"]
        return "merged", {"kind": m.get("kind") or "?", "adapter": _short(m.get("adapter")), "base": _short(m.get("base"))}
    if meta.get("quantized_from"):
        return "quantized", {"algorithm": meta.get("algorithm") or "?", "preset": meta.get("preset") or "?",
                             "path": _short(meta["quantized_from"])}
    if meta.get("run") and meta.get("base"):
        kind = "adapter" if meta.get("adapter") else "trained"
        return kind, {"kind": meta.get("method") or "?", "method": meta.get("method") or "?", "base": _short(meta["base"]),
                      "run": meta["run"], "steps": meta.get("steps", "?")}
    return None, {}


def _short(path) -> str:
    """A workspace path as the workspace names it (models/x, runs/y/output), others as they are."""
    if not path:
        return "?"
    p, home = Path(path), workspace.home()
    for a, b in ((p, home), (p.resolve(), home.resolve())):  # a linked model: its name in the workspace
        try:
            return str(a.relative_to(b))
        except (ValueError, OSError):
            continue
    return str(path)