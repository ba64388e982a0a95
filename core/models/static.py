"""Run a static inference folder (written by :mod:`core.models.export`) with Paddle Inference.

    engine = StaticEngine("workspace/models/demo-static")
    engine.answers([[{"role": "user", "content": "What is 2 plus 3?"}]], max_new_tokens=32)

The folder holds the traced generation loop (``model.json`` or ``model.pdmodel`` + ``model.pdiparams``),
the tokenizer with its chat template, config.json and studio_model.json. Prompts are built by
:func:`core.data.templates.prompt_ids` exactly as training, evaluation and dygraph chat build them,
and batches are left padded as :func:`core.models.evaluate.generate` pads them, with the same
position ids, so greedy answers are dygraph's token for token.

CPU facts this relies on: oneDNN (on by default in a CPU predictor) breaks the loop after its
first token (``<unk>`` and NaN scores), so it is turned off. The loop stops once every row of a
batch has produced the end-of-text token; rows that ended earlier are padded. What follows a
row's first end-of-text token is cut here. One run produces the whole answer: there is no
streaming and no cancelling between tokens. Sampling draws from paddle's global generator:
``seed`` seeds it (``paddle.seed``) before the run.

One predictor runs one batch at a time (a lock); share an engine between threads freely.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from core import workspace
from core.data import templates

GRAPH_NAMES = ("model.json", "model.pdmodel")
KIND = "static"  # studio_model.json's kind for an exported folder


def is_static(folder: str | Path | None) -> bool:
    """Whether ``folder`` is a static export (studio_model.json says kind "static")."""
    if not folder:
        return False
    try:
        info = json.loads((Path(folder) / workspace.MODEL_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(info, dict) and info.get("kind") == KIND


def _graph_files(folder: Path) -> tuple[Path, Path]:
    params = folder / "model.pdiparams"
    for name in GRAPH_NAMES:
        if (folder / name).is_file() and params.is_file():
            return folder / name, params
    raise FileNotFoundError(f"{folder}: no exported graph (model.json or model.pdmodel with model.pdiparams); "
                            f"export a model with paddle-studio export")


THREADS_ENV = "PADDLE_STUDIO_INFER_THREADS"


def default_threads() -> int:
    """CPU math threads: $PADDLE_STUDIO_INFER_THREADS, else 1. On the 2 shared cores it was measured
    on (bench/static_vs_dygraph.py), 1 thread beat 2 both for one prompt (280 vs 166 tokens/s) and
    for a batch of 8 (1304 vs 1129); dygraph runs with paddle's default of 1 as well."""
    try:
        n = int(os.environ.get(THREADS_ENV, "1"))
    except ValueError:
        n = 1
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(n, cores))


class StaticEngine:
    """A static folder loaded into one Paddle Inference predictor (CPU, oneDNN off)."""

    def __init__(self, folder: str | Path, threads: int | None = None, use_gpu: bool | None = None):
        from paddle import inference

        self.folder = Path(folder)
        try:
            self.info = json.loads((self.folder / workspace.MODEL_MARKER).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise FileNotFoundError(f"{self.folder}: not a static export (no readable {workspace.MODEL_MARKER})") from e
        if self.info.get("kind") != "static":
            raise ValueError(f"{self.folder}: not a static export (studio_model.json kind is "
                             f"{self.info.get('kind')!r}); load it with core.models.loading")
        graph, params = _graph_files(self.folder)
        cfg = inference.Config(str(graph), str(params))
        if use_gpu is None:
            use_gpu = _gpu_visible()
        if use_gpu:
            cfg.enable_use_gpu(256, 0)
        else:
            cfg.disable_gpu()
            cfg.disable_mkldnn()  # oneDNN: the first token, then <unk> with NaN scores
            self.threads = int(threads or default_threads())
            cfg.set_cpu_math_library_num_threads(self.threads)
        cfg.disable_glog_info()
        self.use_gpu = bool(use_gpu)
        self.predictor = inference.create_predictor(cfg)
        self.input_names = list(self.predictor.get_input_names())
        self.output_names = list(self.predictor.get_output_names())

        self.tokenizer = _load_tokenizer(self.folder)
        self.template = templates.load_template(self.tokenizer, self.folder)
        self.eos_id = self.info.get("eos_token_id", self.tokenizer.eos_token_id)
        self.pad_id = self.info.get("pad_token_id")
        if self.pad_id is None:
            self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_id
        self.max_length = int(self.info.get("max_length") or 2048)
        self.vocab_size = int(self.info.get("vocab_size") or len(self.tokenizer))
        self.own_positions = self.info.get("position_ids") == "own"
        self._lock = threading.Lock()

    # -- tokens
    def generate(self, prompt_id_lists: list[list[int]], max_new_tokens: int = 64, greedy: bool = True,
                 temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, seed: int | None = None,
                 repetition_penalty: float = 1.0, min_new_tokens: int = 0, batch_size: int = 32) -> list[list[int]]:
        """New token ids for each prompt (batched, left padded), cut before the first end-of-text token.

        greedy: argmax (temperature, top_k, top_p and seed are ignored); else sampling at
        ``temperature`` among the ``top_k`` most likely tokens (0: all) within the ``top_p`` nucleus."""
        import numpy as np

        if not prompt_id_lists:
            return []
        if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"max_new_tokens: expected an integer >= 1, got {max_new_tokens!r}")
        longest = max(len(p) for p in prompt_id_lists)
        if longest < 1:
            raise ValueError("a prompt is empty")
        if longest + max_new_tokens > self.max_length:
            raise ValueError(f"the longest prompt is {longest} tokens and max_new_tokens {max_new_tokens}: over the "
                             f"model's context of {self.max_length} tokens")
        if not greedy and not temperature > 0:
            raise ValueError(f"temperature: expected a number > 0 when sampling, got {temperature!r}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p: expected a number in (0, 1], got {top_p!r}")
        k = 1 if greedy else (self.vocab_size if not top_k or top_k >= self.vocab_size else int(top_k))
        knobs = {
            "max_new_tokens": np.array([max_new_tokens], "int64"),
            "min_new_tokens": np.array([min(int(min_new_tokens or 0), max_new_tokens)], "int64"),
            "top_k": np.array([k], "int64"),
            "temperature": np.array([1.0 if greedy else float(temperature)], "float32"),
            "top_p": np.array([1.0 if greedy else float(top_p)], "float32"),
            "repetition_penalty": np.array([float(repetition_penalty)], "float32"),
        }
        out: list[list[int]] = []
        with self._lock:
            if seed is not None and not greedy:
                import paddle

                paddle.seed(int(seed))
            for i in range(0, len(prompt_id_lists), batch_size):
                rows = self._run(prompt_id_lists[i:i + batch_size], knobs)
                for r in rows:
                    r = r[:max_new_tokens]
                    out.append(r[: r.index(self.eos_id)] if self.eos_id in r else r)
        return out

    def _run(self, chunk: list[list[int]], knobs: dict) -> list[list[int]]:
        import numpy as np

        n = max(len(p) for p in chunk)
        ids = np.full((len(chunk), n), self.pad_id, dtype="int64")
        att = np.zeros((len(chunk), n), dtype="int64")
        for k, p in enumerate(chunk):
            ids[k, n - len(p):], att[k, n - len(p):] = p, 1
        if self.own_positions:  # each row counted from its first real token
            pos = np.maximum(np.cumsum(att, axis=1) - 1, 0).astype("int64")
        else:  # the column, padding included: what dygraph generate uses without position ids
            pos = np.tile(np.arange(n, dtype="int64"), (len(chunk), 1))
        feed = {"input_ids": ids, "attention_mask": att, "position_ids": pos, **knobs}
        for name in self.input_names:
            self.predictor.get_input_handle(name).copy_from_cpu(feed[name])
        self.predictor.run()
        return self.predictor.get_output_handle(self.output_names[0]).copy_to_cpu().tolist()

    # -- texts
    def prompt(self, messages: list[dict], src_length: int | None = None) -> list[int]:
        return templates.prompt_ids(self.tokenizer, self.template, messages, src_length)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True).strip() if ids else ""

    def answers(self, conversations: list[list[dict]], max_new_tokens: int = 64, batch_size: int = 32,
                src_length: int | None = None, **sampling) -> list[str]:
        """Answers for conversations that end with a user message, as :func:`core.models.evaluate.generate`
        returns them (greedy unless ``greedy=False`` is passed with the sampling keywords of :meth:`generate`)."""
        prompts = [self.prompt(c, src_length) for c in conversations]
        rows = self.generate(prompts, max_new_tokens, batch_size=batch_size, **sampling)
        return [self.decode(r) for r in rows]

    def describe(self) -> dict:
        return {"folder": str(self.folder), "inputs": self.input_names, "outputs": self.output_names,
                "device": "gpu" if self.use_gpu else f"cpu ({self.threads} threads, oneDNN off)",
                "max_length": self.max_length, "exported_from": self.info.get("exported_from"),
                "dtype": self.info.get("dtype"), "chat_template": bool(self.template)}


def _load_tokenizer(folder: Path):
    from core.models import loading

    tok = loading.load_tokenizer(folder)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def _gpu_visible() -> bool:
    try:
        import paddle

        return paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0
    except Exception:  # noqa: BLE001 - no CUDA build, no driver
        return False
