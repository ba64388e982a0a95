"""The training entry that `paddle.distributed.launch` runs: ``train.py CONFIG.json [--resume]``.

Reads the PaddleNLP argument JSON (the same keys llm/run_finetune.py reads), builds the data
with our own preprocessing (core.data.templates), wraps the model for the chosen method with
PaddleNLP's PEFT classes, trains with PaddleNLP's SFTTrainer and appends one JSON line per
logged step or evaluation to ``<run>/metrics.jsonl`` (rank 0 only). It knows nothing of the UI.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

if __package__ in (None, ""):  # run as a script by paddle.distributed.launch
    # sys.path[0] is core/train/ itself (its config.py would shadow other packages):
    # replace it with the repository root so `core` imports as a package.
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from core.system import quiet_import_warnings  # noqa: E402

quiet_import_warnings()  # before paddle is imported: its build warnings filled every training log
from core.data import templates  # noqa: E402
from core.train import checkpoints, control  # noqa: E402
from core.train.config import config_value, model_family  # noqa: E402

from core.workspace import MODEL_MARKER as FINISHED_MARK  # noqa: E402


def split_args(flat: dict):
    """Parse the flat JSON into PaddleNLP's (ModelConfig, DataConfig, SFTConfig) as strictly as
    upstream's llm/run_finetune.py does: a key none of them has stops the run ("Some specified
    arguments are not used by the PdArgumentParser"). Only the keys of llm/utils' own argument
    classes (generation, ReFT), which this entry does not use, are set aside."""
    from paddlenlp.trainer import PdArgumentParser
    from paddlenlp.trl import DataConfig, ModelConfig, SFTConfig

    from core.train.upstream import LLM_UTILS_KEYS

    aside = {k for keys in LLM_UTILS_KEYS.values() for k in keys}
    return PdArgumentParser((ModelConfig, DataConfig, SFTConfig)).parse_dict(
        {k: v for k, v in flat.items() if k not in aside})


def load_split(dataset_dir: str, split: str) -> list[dict]:
    from core.data import datasets

    d = Path(dataset_dir)
    files = datasets.resolve_files(d).get(split, [])
    fmt = "text" if datasets.detect_format(d) == "text" else "paddlenlp"
    out = []
    for f in files:
        if f.stat().st_size:
            out.extend(datasets.iter_records(f, fmt))
    return out


def build_dataset(tokenizer, template, records, data_args, mask_prompt=True):
    from paddlenlp.datasets import MapDataset

    from core.data import datasets

    if datasets.is_text_dataset(records):  # raw text: packed blocks of max_length, loss on every token
        return MapDataset(templates.text_blocks(tokenizer, [r["text"] for r in records], data_args.max_length))
    examples = []
    for rec in records:
        ex = templates.build_example(tokenizer, template, rec, data_args.src_length, data_args.max_length, mask_prompt)
        if ex is not None:
            examples.append(ex)
    if data_args.zero_padding:
        examples = pack_examples(examples, data_args.max_length, greedy=data_args.greedy_zero_padding)
    return MapDataset(examples)


def pack_examples(examples: list[dict], max_length: int, greedy: bool = False) -> list[dict]:
    """Zero padding: concatenate examples into sequences of at most ``max_length`` tokens.

    Each packed sequence carries position_ids restarting per example and a block-diagonal
    causal attention mask, so examples never attend to each other (PaddleNLP's semantics).
    """
    import numpy as np

    sizes = [len(e["input_ids"]) for e in examples]
    packs: list[list[int]] = []
    if greedy:  # first fit, longest first: fewer, fuller packs
        room: list[int] = []
        for i in sorted(range(len(examples)), key=lambda i: -sizes[i]):
            k = next((k for k, r in enumerate(room) if r >= sizes[i]), None)
            if k is None:
                packs.append([i])
                room.append(max_length - sizes[i])
            else:
                packs[k].append(i)
                room[k] -= sizes[i]
    else:  # in order: a new pack when the next example does not fit
        cur, used = [], 0
        for i in range(len(examples)):
            if cur and used + sizes[i] > max_length:
                packs.append(cur)
                cur, used = [], 0
            cur.append(i)
            used += sizes[i]
        if cur:
            packs.append(cur)
    out = []
    for pack in packs:
        ids, labels, pos = [], [], []
        total = sum(len(examples[j]["input_ids"]) for j in pack)
        mask = np.zeros((1, total, total), dtype="bool")
        off = 0
        for j in pack:
            e = examples[j]
            n = len(e["input_ids"])
            ids += e["input_ids"]
            labels += e["labels"]
            pos += list(range(n))
            mask[0, off:off + n, off:off + n] = np.tril(np.ones((n, n), dtype="bool"))
            off += n
        out.append({"input_ids": ids, "labels": labels, "position_ids": pos, "attention_mask": mask})
    return out


class PackedCollator:
    """Batches packed sequences (zero padding): pads ``input_ids`` with the pad id, ``labels`` with
    IGNORE and ``position_ids`` with 0 to the longest pack of the batch, and grows each pack's
    [1, L, L] block-diagonal mask to [1, Lmax, Lmax] (padding rows attend only to themselves, so
    the softmax stays finite; their labels are ignored). PaddleNLP's DataCollatorForSeq2Seq pads
    only 1-D fields and cannot batch these masks."""

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, features: list[dict]) -> dict:
        import numpy as np

        n = max(len(f["input_ids"]) for f in features)
        b = len(features)
        ids = np.full((b, n), self.pad_id, dtype="int64")
        labels = np.full((b, n), templates.IGNORE, dtype="int64")
        pos = np.zeros((b, n), dtype="int64")
        mask = np.zeros((b, 1, n, n), dtype="bool")
        for i, f in enumerate(features):
            k = len(f["input_ids"])
            ids[i, :k] = f["input_ids"]
            labels[i, :k] = f["labels"]
            pos[i, :k] = f["position_ids"]
            mask[i, 0, :k, :k] = f["attention_mask"][0]
            mask[i, 0, range(k, n), range(k, n)] = True
        return {"input_ids": ids, "labels": labels, "position_ids": pos, "attention_mask": mask}


def padding_collator(tokenizer, layout: dict | None = None):
    """Plain batches: right padding (pads after the answer, so every example keeps positions 0..n-1
    as in a packed sequence) with the attention mask that hides the pads; for a family with its own
    input layout (core.models.layouts: ChatGLM-6B v1's 4-D mask and 2-D positions), that layout."""
    from paddlenlp.data import DataCollatorForSeq2Seq

    if layout:
        return LayoutCollator(tokenizer.pad_token_id, layout)
    tokenizer.padding_side = "right"
    return DataCollatorForSeq2Seq(tokenizer=tokenizer, padding=True, label_pad_token_id=templates.IGNORE,
                                  return_tensors="np", return_attention_mask=True)


class LayoutCollator:
    """Right-padded ``input_ids``/``labels`` with the family's own mask and positions
    (core.models.layouts.model_inputs, built per row from its tokens alone)."""

    def __init__(self, pad_id: int, layout: dict):
        self.pad_id, self.layout = pad_id, layout

    def __call__(self, features: list[dict]) -> dict:
        import numpy as np

        from core.models import layouts

        n = max(len(f["input_ids"]) for f in features)
        ids = np.full((len(features), n), self.pad_id, dtype="int64")
        labels = np.full((len(features), n), templates.IGNORE, dtype="int64")
        att = np.zeros((len(features), n), dtype="int64")
        for i, f in enumerate(features):
            k = len(f["input_ids"])
            ids[i, :k], labels[i, :k], att[i, :k] = f["input_ids"], f["labels"], 1
        return {"input_ids": ids, "labels": labels, **layouts.model_inputs(self.layout, ids, att)}


def fail_fast(collate):
    """Wrap a collator so an exception in it ends the process with its traceback. The collator runs
    in a DataLoader thread; an error there used to leave the main thread waiting forever."""

    def call(features):
        try:
            return collate(features)
        except BaseException:  # noqa: BLE001 - printed, then the process ends: never a silent hang
            _die("the data collator failed")

    return call


NOTE_BYTES = 4096
_note: tuple[int, Path] | None = None  # (fd, path) of this rank's reserved failure note


def reserve_failure_note(run_dir: Path) -> None:
    """Set aside ``failure.rank<N>.txt`` (4 KB, allocated now) for the one line that says why this
    rank failed: written in place, it needs no new disk space, so even a full disk keeps it."""
    global _note
    path = run_dir / f"failure.rank{os.environ.get('PADDLE_TRAINER_ID', '0')}.txt"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        os.posix_fallocate(fd, 0, NOTE_BYTES)
        os.pwrite(fd, b" " * NOTE_BYTES, 0)
        _note = (fd, path)
    except (OSError, AttributeError):
        _note = None


def drop_failure_note() -> None:
    if _note is not None:
        os.close(_note[0])
        _note[1].unlink(missing_ok=True)


def _end_rank(exc_type, exc, tb, what: str = "") -> None:
    """Leave the rank at once: the error's last line into the failure note, the traceback to the log."""
    if exc_type is not None:
        line = "".join(traceback.format_exception_only(exc_type, exc)).strip().splitlines()[-1]
        _write_note(f"{what}: {line}" if what else line)
    if what:
        print(f"Error: {what}:", file=sys.stderr)
    traceback.print_exception(exc_type, exc, tb)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


def _write_note(text: str) -> None:
    if _note is not None:
        try:
            os.pwrite(_note[0], text.encode("utf-8", "replace")[:NOTE_BYTES].ljust(NOTE_BYTES), 0)
        except OSError:
            pass


def note_termination() -> None:
    """Say in the failure note that SIGTERM ended this rank, then end at once. A thread waits for
    the signal (blocked everywhere else), so it is answered even while the main thread is inside
    a C++ call; without the note a rank ended by the launcher looked like one killed -9."""
    import signal
    import threading

    from core.train.runs import TERM_NOTE

    if not hasattr(signal, "pthread_sigmask"):
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    os.register_at_fork(after_in_child=lambda: signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM}))

    def wait():
        signal.sigwait({signal.SIGTERM})
        _write_note(TERM_NOTE)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + signal.SIGTERM)

    threading.Thread(target=wait, name="sigterm", daemon=True).start()


def _die(what: str) -> None:
    _end_rank(*sys.exc_info(), what=what)


def _thread_failed(args) -> None:
    """threading.excepthook: any uncaught exception in a helper thread (data loading, a callback's
    thread) ends the training process instead of leaving it stalled."""
    if not issubclass(args.exc_type, SystemExit):
        _end_rank(args.exc_type, args.exc_value, args.exc_traceback,
                  what=f"thread {getattr(args.thread, 'name', '?')} failed")


def configure_model(model_config, model_args, data_args, training_args) -> None:
    """Hand the run's switches to the model config the way upstream's llm/run_finetune.py does:
    ``LlmMetaConfig.set_llm_config`` copies every LLM meta key of the training arguments
    (use_flash_attention, the fused-kernel flags, recompute_granularity, tensor_parallel_output,
    sequence_parallel, ...) onto the config, then the model arguments' layer-norm, dropout and
    fusion switches and the sequence length. Skipping it left those at the model's defaults."""
    from paddlenlp.transformers.configuration_utils import LlmMetaConfig

    LlmMetaConfig.set_llm_config(model_config, training_args)
    model_config.use_fast_layer_norm = model_args.use_fast_layer_norm
    if hasattr(model_config, "hidden_dropout_prob"):
        model_config.hidden_dropout_prob = model_args.hidden_dropout_prob
    if hasattr(model_config, "attention_probs_dropout_prob"):
        model_config.attention_probs_dropout_prob = model_args.attention_probs_dropout_prob
    # every label the studio (and upstream's data code) writes marks "no loss" with -100; GPT's
    # config defaults to 0, and its loss then refuses -100 labels (a real token id 0 would be lost)
    if hasattr(model_config, "ignore_index"):
        model_config.ignore_index = -100
    if model_args.fuse_attention_qkv is not None:
        model_config.fuse_attention_qkv = model_args.fuse_attention_qkv
    if model_args.fuse_attention_ffn is not None:
        model_config.fuse_attention_ffn = model_args.fuse_attention_ffn
    model_config.seq_length = data_args.max_length


def masked_mean_loss(logits, labels):
    """Mean cross entropy over the positions whose label is not IGNORE (-100)."""
    import paddle
    import paddle.nn.functional as F

    logits = logits.astype("float32")
    mask = labels != templates.IGNORE
    safe = paddle.where(mask, labels, paddle.zeros_like(labels))
    tok = F.cross_entropy(logits, safe.unsqueeze(-1), reduction="none").squeeze(-1)
    maskf = mask.astype("float32")
    return (tok * maskf).sum() / paddle.clip(maskf.sum(), min=1.0)


def use_masked_loss(model) -> None:
    """Families whose PaddleNLP forward averages the loss over every position, the ignored ones
    included (OPT in paddlenlp 3.0.0b4: ``cross_entropy`` of logits [b, s, V] with labels [b, s]
    takes the mean over all b*s positions, masked prompt and padding too, so a random model
    started at 1.76 instead of ~ln V): the forward is asked for logits only and the loss is the
    mean over the answer tokens, as every other family computes it."""
    import inspect
    import types

    inner = model.forward

    def forward(self, *args, labels=None, **kw):
        out = inner(*args, **kw)
        if labels is None:
            return out
        from core.models.loading import logits_of

        return masked_mean_loss(logits_of(out), labels), logits_of(out)

    # a bound method: PaddleNLP's PretrainedModel.__setattr__ calls a plain function given as
    # `forward` with the model as its first argument (its patch convention)
    # the class's own signature: PaddleNLP's prefix model reads it to pass `cache` or `past_key_values`
    forward.__signature__ = inspect.signature(type(model).forward)
    model.forward = types.MethodType(forward, model)


def settle_pissa(model) -> int:
    """Run PaddleNLP's PiSSA initialisation now, on the freshly loaded base weights, and mark it
    done. Its LoRALinear otherwise runs it lazily at the first forward, and that first forward
    can come after a checkpoint's trained A and B were loaded (resume): they were overwritten
    with the SVD start again. Returns the number of layers."""
    n = 0
    for layer in model.sublayers():
        if getattr(layer, "pissa", False) and not getattr(layer, "apply_pissa", True):
            layer.pissa_init(layer.r)
            layer.apply_pissa = True
            n += 1
    return n


ADAPTER_CONFIGS = ("lora_config.json", "vera_config.json", "lokr_config.json")


def recorded_targets(ckpt: str | Path | None) -> list[str] | None:
    """The target_modules a checkpoint's adapter was built with, in its order (its lora_config.json,
    vera_config.json or lokr_config.json), or None. PaddleNLP makes the adapter layers pattern by
    pattern in that order, and the layers' creation order names their parameters and so the
    optimizer state (``lo_ra_linear_24.w_1_moment1_0``): a run resumed must be rebuilt in the order
    it was made in. Studio runs before 2026-12 listed the targets in another order than upstream's
    get_lora_target_modules (the family presets now use upstream's); they resume in their own."""
    for name in ADAPTER_CONFIGS if ckpt else ():
        try:
            targets = json.loads((Path(ckpt) / name).read_text(encoding="utf-8")).get("target_modules")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(targets, str):
            return [targets]
        if isinstance(targets, list) and targets and all(isinstance(t, str) for t in targets):
            return targets
    return None


def apply_method(model, model_args, flat: dict, family: dict, targets: list[str] | None = None):
    """Wrap ``model`` for LoRA / prefix / VeRA / LoKr (PaddleNLP PEFT classes); full SFT returns it as is.

    ``targets``: the adapter's target_modules; by default the family preset's, which are upstream's
    get_lora_target_modules for the family in its order (a resumed run passes what it recorded).
    ``lora_path`` starts LoRA from a saved adapter (its own lora_config.json), as upstream does."""
    targets = targets or family["target_modules"]
    dtype = "float32"
    if model_args.lora and model_args.lora_path:
        from paddlenlp.peft import LoRAModel

        model = LoRAModel.from_pretrained(model=model, lora_path=model_args.lora_path)
        model.mark_only_lora_as_trainable()
        if model.lora_config.pissa:  # its trained A and B, not PaddleNLP's lazy SVD start over them
            from core.models.loading import restore_pissa

            restore_pissa(model)
    elif model_args.lora:
        from paddlenlp.peft import LoRAConfig, LoRAModel

        cfg = LoRAConfig(
            target_modules=targets,
            r=model_args.lora_rank,
            lora_alpha=2 * model_args.lora_rank if not model_args.rslora else 4,
            rslora=model_args.rslora,
            lora_plus_scale=model_args.lora_plus_scale,
            pissa=model_args.pissa,
            use_mora=model_args.use_mora,
            lora_use_mixer=model_args.lora_use_mixer,
            merge_weights=False,
            dtype=dtype,
            base_model_name_or_path=model_args.model_name_or_path,
        )
        model = LoRAModel(model, cfg)
        model.mark_only_lora_as_trainable()
        if model_args.pissa:
            settle_pissa(model)
    elif model_args.prefix_tuning:
        from paddlenlp.peft import PrefixConfig, PrefixModelForCausalLM
        from paddlenlp.peft.prefix import utils as prefix_utils

        c = model.config
        heads = config_value(c, "num_attention_heads", family)
        cfg = PrefixConfig(
            num_prefix_tokens=model_args.num_prefix_tokens,
            num_attention_heads=heads,
            num_hidden_layers=config_value(c, "num_hidden_layers", family),
            hidden_size=c.hidden_size,
            multi_query_group_num=config_value(c, "num_key_value_heads", family, heads),
            dtype=dtype,
        )
        post = getattr(prefix_utils, family.get("prefix_postprocess", "llama_postprocess_past_key_value"))
        model = PrefixModelForCausalLM(model, cfg, postprocess_past_key_value=post)
        model.mark_only_prefix_as_trainable()
    elif model_args.vera:
        from paddlenlp.peft import VeRAConfig, VeRAModel

        # pissa_init, as upstream's run_finetune.py builds VeRA: the frozen A and B come from the base
        # weights' SVD, so a reload rebuilds the same ones. PaddleNLP saves only B, b and d; with a
        # random A (the default) each load drew a new one and the adapter came back different.
        cfg = VeRAConfig(target_modules=targets, r=model_args.vera_rank, vera_alpha=model_args.vera_rank, dtype=dtype,
                         pissa_init=True, base_model_name_or_path=model_args.model_name_or_path)
        model = VeRAModel(model, cfg)
        model.mark_only_vera_as_trainable(notfreezeB=True)
    elif model_args.lokr:
        from paddlenlp.peft import LoKrConfig, LoKrModel

        cfg = LoKrConfig(target_modules=targets, lokr_dim=model_args.lokr_dim, dtype=dtype,
                         base_model_name_or_path=model_args.model_name_or_path)
        model = LoKrModel(model, cfg)
        model.mark_only_lokr_as_trainable()
    return model


def neftune_scale(alpha: float, shape) -> float:
    """NEFTune's noise bound for an embedding output of ``shape`` [batch, seq, hidden], as upstream's
    llm/run_finetune.py computes it: alpha / sqrt(batch * seq). (The NEFTune paper divides by
    sqrt(seq * hidden); the studio used that until 2026-12, ~2.8x less noise than upstream on the
    demo run: the key must mean what it means upstream.)"""
    return alpha / math.sqrt(shape[0] * shape[1])


def add_neftune(model, alpha: float):
    """NEFTune: uniform noise in [-s, s], s = neftune_scale, on the input embeddings, in training only."""
    import paddle

    emb = model.get_input_embeddings()

    def hook(layer, inputs, output):
        if layer.training:
            mag = neftune_scale(alpha, output.shape)
            output = output + paddle.uniform(output.shape, dtype=output.dtype, min=-mag, max=mag)
        return output

    emb.register_forward_post_hook(hook)


def reference_writer(run_dir: Path, model, tokenizer, template, flat: dict, mask_prompt: bool = True):
    """A function (folder, step) that writes the round-trip reference of the in-memory model into a
    folder just saved (core.train.verify): rank 0 only; a failure is printed, never fatal."""
    def write(folder: Path, step: int) -> None:
        if os.environ.get("PADDLE_TRAINER_ID", "0") != "0":
            return
        from core.train import verify

        why = verify.skip_reason(flat)
        if why:  # say so in the folder: its check then reports "not checked" with the reason
            try:
                (Path(folder) / verify.REFERENCE).write_text(json.dumps({"skipped": why, "step": step}), encoding="utf-8")
            except OSError:
                pass
            return
        try:
            verify.write_reference(folder, model, tokenizer, template, flat, step, mask_prompt,
                                   training_eval=verify.last_training_eval(run_dir / "metrics.jsonl"))
        except Exception:  # noqa: BLE001 - the run's result stands; its verification will say "no reference"
            traceback.print_exc()

    return write


class LossProblem(RuntimeError):
    """The loss says training is broken: not a number, or frozen at one value."""


STUCK_LOGS = 8  # logged losses in a row at one value (to 1e-6) that mean the model stopped learning
SETTLED_LOSS = 1e-4  # a loss at or under this has converged (DPO's hinge, a saturated sigmoid: exactly 0.0)


def check_loss(losses: list[tuple[int, float, float]], final: bool = False, resumed: bool = False) -> None:
    """Raise LossProblem when the latest logged loss is NaN/inf; when the last STUCK_LOGS losses sit
    at one value above the lowest one reached before (weights blown up to a constant guess: a
    learning rate far too high); or, at the end of a run that started at step 0, when the loss
    never moved at all. A loss that settles at (about) zero has converged, not frozen.
    ``losses``: (step, loss, learning rate) in order; different batches give a learning model
    different losses."""
    step, loss, lr = losses[-1]
    if not math.isfinite(loss):
        raise LossProblem(f"the loss became {loss} at step {step} (learning rate {lr:.3g}): training diverged; "
                          "lower the learning rate (or use a smaller max_grad_norm), then start again")
    if abs(loss) <= SETTLED_LOSS:
        return

    def flat(part):
        lo, hi = min(v for _, v, _ in part), max(v for _, v, _ in part)
        return hi - lo <= 1e-6 * max(1.0, abs(hi))

    tail, before = losses[-STUCK_LOGS:], losses[:-STUCK_LOGS]
    if len(tail) == STUCK_LOGS and flat(tail) and before and min(v for _, v, _ in before) < loss - 1e-6 * max(1.0, loss):
        top = max(r for _, _, r in losses)
        raise LossProblem(f"the loss has stayed at {loss:.4g} for {STUCK_LOGS} logged steps ({tail[0][0]}-{step}) after "
                          f"being lower: the model stopped learning; a learning rate far too high does this (up to "
                          f"{top:.3g} here)")
    if final and not resumed and len(losses) >= STUCK_LOGS and flat(losses):
        raise LossProblem(f"the loss never moved in {step} steps (always {loss:.4g}): nothing was learned; check "
                          f"the learning rate ({max(r for _, _, r in losses):.3g} at most) and that the method's "
                          "weights are trainable")


def make_callback(metrics_path: Path, tokens_per_step: float, on_saved=None):
    from paddlenlp.trainer import TrainerCallback

    progress_path = metrics_path.parent / f"progress.rank{os.environ.get('PADDLE_TRAINER_ID', '0')}.json"

    class MetricsCallback(TrainerCallback):
        """Append one JSON line per log/eval to metrics.jsonl (rank 0), and checkpoint the last step."""

        def __init__(self):
            self.t0 = time.time()
            self.last = None  # (step, time) of the previous loss line
            self.losses = []  # (step, loss, lr) of every logged loss: check_loss
            self.resumed = False  # started from a checkpoint (its earlier losses are not in self.losses)

        def _write(self, rec):
            with open(metrics_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")
                f.flush()

        def on_train_begin(self, args, state, control, **kw):
            self.resumed = state.global_step > 0
            if state.is_world_process_zero:
                self.t0 = time.time()
                self.last = (state.global_step, self.t0)
                self._write({"event": "train_begin", "step": state.global_step, "max_steps": state.max_steps,
                             "time": self.t0})

        def on_save(self, args, state, control, **kw):
            # called once PaddleNLP has written the checkpoint: only now does it count for resume
            ck = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if state.is_world_process_zero and ck.is_dir():
                if on_saved is not None:  # inside the checkpoint, before the marker lists its files
                    on_saved(ck, state.global_step)
                checkpoints.mark_complete(ck, state.global_step)

        def on_step_end(self, args, state, control, **kw):
            try:  # every rank: the step it reached (a node's strip and the hang doctor read it)
                with open(progress_path, "w", encoding="utf-8") as f:
                    f.write(json.dumps({"step": state.global_step, "max_steps": state.max_steps, "time": time.time()}))
            except OSError:
                pass
            strategy = getattr(args.save_strategy, "value", args.save_strategy)  # an IntervalStrategy, not a str
            if state.global_step >= state.max_steps and strategy != "no":
                control.should_save = True  # a checkpoint at the very end, for Continue

        def on_log(self, args, state, control, logs=None, **kw):
            if not state.is_world_process_zero or not logs:
                return
            now = time.time()
            rec = {"step": state.global_step, "max_steps": state.max_steps, "epoch": round(state.epoch or 0.0, 4),
                   "time": now, "elapsed": round(now - self.t0, 3)}
            if "loss" in logs:
                rec["loss"] = float(logs["loss"])
                rec["lr"] = float(logs.get("learning_rate", 0.0))
                step0, t0 = self.last
                if state.global_step > step0 and now > t0:
                    sps = (state.global_step - step0) / (now - t0)
                    rec["steps_per_sec"] = round(sps, 4)
                    rec["tokens_per_sec"] = round(sps * tokens_per_step, 1)
                    rec["eta"] = round((state.max_steps - state.global_step) / sps, 1)
                self.last = (state.global_step, now)
            if "eval_loss" in logs:
                rec["eval_loss"] = float(logs["eval_loss"])
                rec["eval_ppl"] = float(math.exp(min(rec["eval_loss"], 50)))
                if "eval_token_accuracy" in logs:
                    rec["token_accuracy"] = float(logs["eval_token_accuracy"])
            # DPO: rewards/chosen, rewards/rejected, rewards/accuracies, rewards/margins; KTO: rewards/*, kl,
            # count/chosen and count/rejected (answers of each kind in the step)
            for k, v in logs.items():
                if (k.startswith(("rewards/", "eval_rewards/", "logps/", "eval_logps/", "count/", "eval_count/"))
                        or k in ("kl", "eval_kl")) and isinstance(v, (int, float)):
                    rec[k] = float(v)
            if "loss" in rec or "eval_loss" in rec:
                self._write(rec)
            if "loss" in rec:
                self.losses.append((rec["step"], rec["loss"], rec["lr"]))
                check_loss(self.losses)

        def on_train_end(self, args, state, control, **kw):
            if state.is_world_process_zero:
                if self.losses:
                    check_loss(self.losses, final=True, resumed=self.resumed)
                self._write({"event": "train_end", "step": state.global_step, "max_steps": state.max_steps,
                             "time": time.time()})

    return MetricsCallback()


def token_accuracy(eval_pred):
    import numpy as np

    preds, labels = eval_pred.predictions, eval_pred.label_ids
    if isinstance(preds, (tuple, list)):
        preds = preds[0]
    if preds.ndim == labels.ndim + 1:
        preds = preds[..., 0]
    mask = labels != templates.IGNORE
    return {"token_accuracy": float((preds[mask] == labels[mask]).mean()) if mask.any() else 0.0}


def argmax_logits(logits, labels):
    import paddle

    if isinstance(logits, (tuple, list)):
        logits = logits[0]
    if logits.shape[-1] == 1:  # SFTTrainer's prediction_step already took the argmax (keepdim): an argmax
        return logits.squeeze(-1)  # of that would be 0 everywhere (token_accuracy was always 0.0)
    return paddle.argmax(logits, axis=-1)


def main(argv: list[str]) -> int:
    config_path = Path(argv[0]).resolve()
    resume = "--resume" in argv
    run_dir = config_path.parent
    flat = json.loads(config_path.read_text(encoding="utf-8"))

    import logging

    import paddle
    import paddle.distributed as dist

    logging.getLogger("paddlenlp").setLevel(logging.INFO)
    from core.data.datasets import load_tokenizer
    from paddlenlp.trl import SFTTrainer

    from core.train import upstream

    told = (upstream.entry_of(flat) or ("",))[0]
    if told == "dpo":  # llm/alignment/dpo/run_dpo.py's keys: a DPO run
        from core.train import dpo

        return dpo.main(run_dir, flat, resume, sys.modules[__name__])
    if told == "kto":  # llm/alignment/kto/run_kto.py's (desirable_weight, undesirable_weight): a KTO run
        from core.train import kto

        return kto.main(run_dir, flat, resume, sys.modules[__name__])
    phase("imports")
    model_args, data_args, training_args = split_args(flat)
    world = max(dist.get_world_size(), 1)
    if world > 1:
        dist.init_parallel_env()
    paddle.seed(training_args.seed)
    tok_dir = model_args.tokenizer_name_or_path or model_args.model_name_or_path
    tokenizer = load_tokenizer(tok_dir)  # AutoTokenizer, or the class the folder names (GLM's)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    # chat_template as upstream's init_chat_template reads it: left out, the tokenizer's own; "none" or
    # null (upstream's parser makes JSON null the text "None"), none at all; a folder, its chat_template.json
    template = templates.template_for_run(tokenizer, tok_dir, flat)
    templates.keep_with_tokenizer(tokenizer, template)  # what is saved beside the model is what trained
    phase("tokenizer")
    studio = json.loads((run_dir / "studio.json").read_text(encoding="utf-8")) if (run_dir / "studio.json").is_file() else {}
    # continued pretraining is not a PaddleNLP flag: the run's studio.json says so
    pretrain = (studio.get("method") or studio.get("config", {}).get("method", {}).get("method")) == "pretrain"
    train_recs = load_split(data_args.dataset_name_or_path, "train")
    dev_recs = load_split(data_args.dataset_name_or_path, "dev") if training_args.do_eval else []
    train_ds = build_dataset(tokenizer, template, train_recs, data_args, mask_prompt=not pretrain)
    eval_ds = build_dataset(tokenizer, template, dev_recs, data_args, mask_prompt=not pretrain) if dev_recs else None
    if eval_ds is None:
        training_args.do_eval = False
        training_args.evaluation_strategy = "no"

    phase("data")
    ckpt = None
    if resume:  # the newest checkpoint whose save finished (a truncated one would fail every time)
        found = checkpoints.last_complete(Path(training_args.output_dir))
        ckpt = str(found) if found else None
    family = model_family(model_args.model_name_or_path)
    from paddlenlp.transformers import AutoConfig

    model_config = AutoConfig.from_pretrained(model_args.model_name_or_path)
    configure_model(model_config, model_args, data_args, training_args)
    from core.models.loading import model_class

    model = model_class(model_args.model_name_or_path).from_pretrained(model_args.model_name_or_path, config=model_config,
                                                                       dtype="float32")
    from core.models import layouts

    spec = layouts.attach(model, model_args.model_name_or_path, tokenizer)  # what the family's forward needs
    if family.get("loss") == "masked_mean":
        use_masked_loss(model)
    if model_args.neftune:
        add_neftune(model, model_args.neftune_noise_alpha)
    reft_model = None
    if model_args.reft:
        from core.models import reft

        if family.get("reft") is not True:
            raise SystemExit(f"ReFT: {(family.get('reft') or {}).get('unsupported', 'not supported for this model family')}")
        first, last = reft.parse_position(flat.get("position", "f7+l7"))
        layers = reft.parse_layers(flat.get("layers", "all"), config_value(model_config, "num_hidden_layers", family))
        model = reft_model = reft.build(model, layers, flat.get("rank", 8), flat.get("position", "f7+l7"),
                                        flat.get("intervention_type", "LoreftIntervention"), flat.get("dropout", 0.0),
                                        flat.get("act_fn", "linear"), flat.get("add_bias", False))
        from paddlenlp.datasets import MapDataset

        train_ds = MapDataset(reft.training_features(list(train_ds), first, last, len(layers), tokenizer.pad_token_id))
        if eval_ds is not None:
            eval_ds = MapDataset(reft.training_features(list(eval_ds), first, last, len(layers), tokenizer.pad_token_id))
    else:
        model = apply_method(model, model_args, flat, family, targets=recorded_targets(ckpt))
    phase("model")

    if reft_model is not None:
        from core.models import reft

        scored = reft.Steered(reft_model, first, last)
    else:
        scored = model
    save_reference = reference_writer(run_dir, scored, tokenizer, template, flat, mask_prompt=not pretrain)
    mean_tokens = sum(len(e["input_ids"]) for e in train_ds) / max(len(train_ds), 1)
    tokens_per_step = mean_tokens * training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps * world
    if data_args.zero_padding:
        collator = PackedCollator(tokenizer.pad_token_id)
    else:
        collator = padding_collator(tokenizer, spec)
    if reft_model is not None:
        collator = reft.collator(collator)
    trainer = SFTTrainer(
        model=model,
        args=training_args,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        tokenizer=tokenizer,
        data_collator=fail_fast(collator),
        compute_metrics=token_accuracy if eval_ds is not None else None,
        preprocess_logits_for_metrics=argmax_logits if eval_ds is not None else None,
        callbacks=[make_callback(run_dir / "metrics.jsonl", tokens_per_step, save_reference),
                   control.make_callback(run_dir, world),  # save / eval / lr / stop requests (runs control)
                   *([control.early_stopping(run_dir, int(patience), float(launch.get("early_stopping_threshold") or 0.0))]
                     if (patience := (launch := studio.get("parallel") or {}).get("early_stopping_patience")) else [])],
        data_args=data_args,
    )
    if reft_model is not None:  # its interventions are not sublayers: name what the optimizer trains
        trainer.set_optimizer_grouped_parameters([p for p in reft_model.parameters() if not p.stop_gradient])
    phase("trainer")
    if ckpt and reft_model is not None:  # upstream's loader builds a new ReFTModel and drops it
        reft.load_interventions(reft_model, ckpt)
    trainer.train(resume_from_checkpoint=ckpt)
    trainer.save_model(training_args.output_dir)
    if training_args.should_save:
        tokenizer.save_pretrained(training_args.output_dir)
        method = ("lora" if model_args.lora else "prefix" if model_args.prefix_tuning else "vera" if model_args.vera
                  else "lokr" if model_args.lokr else "reft" if model_args.reft else "pretrain" if pretrain else "sft")
        info = {"base": str(Path(model_args.model_name_or_path).resolve()), "method": method,
                "adapter": method in ("lora", "prefix", "vera", "lokr", "reft"), "run": run_dir.name,
                "steps": trainer.state.global_step}
        save_reference(Path(training_args.output_dir), trainer.state.global_step)
        tmp = Path(training_args.output_dir) / f".{FINISHED_MARK}.tmp"
        tmp.write_text(json.dumps(info, indent=2), encoding="utf-8")
        os.replace(tmp, Path(training_args.output_dir) / FINISHED_MARK)
        record_lengths(flat)
    if world > 1:
        dist.barrier()
    return 0


def record_lengths(flat: dict) -> None:
    """Keep the token lengths of this run's training data in the workspace (core.train.estimate's
    cache): the studio's live estimate then pads to them instead of max_length, for this config and
    any other on the same data, without loading a tokenizer in the studio. Never fails the run."""
    try:
        from core.train import estimate
        from core.train.config import RunConfig

        estimate.seq_lengths(RunConfig.from_paddlenlp(flat), compute=True)
    except Exception:  # noqa: BLE001 - an estimate's input, not the run's result
        pass


STARTUP = "startup.jsonl"  # rank 0's start-up phases, until the first step (the Runs tab and bench read it)
_startup: Path | None = None


def phase(name: str) -> None:
    """Note that rank 0 reached a start-up phase (``imports``, ``tokenizer``, ``data``, ``model``,
    ``trainer``): the page says what a starting run is doing, and bench/first_point.py splits the
    time to the first loss point by phase."""
    if _startup is None or os.environ.get("PADDLE_TRAINER_ID", "0") != "0":
        return
    try:
        with open(_startup, "a", encoding="utf-8") as f:
            f.write(json.dumps({"phase": name, "time": time.time()}) + "\n")
    except OSError:
        pass  # a full disk must not end the run here; the failure note is for that


_stack_file = None


def install_stack_dump(run_dir: Path) -> None:
    """SIGUSR1 writes every thread's Python stack to ``stacks.rank<N>.txt`` (appended, from a C
    handler: it answers even while the rank waits inside a C++ collective). The hang doctor
    (core.train.cluster) sends it to every rank of a run that stopped making progress."""
    import faulthandler
    import signal

    global _stack_file
    try:
        _stack_file = open(run_dir / f"stacks.rank{os.environ.get('PADDLE_TRAINER_ID', '0')}.txt", "a")
        faulthandler.register(signal.SIGUSR1, file=_stack_file, all_threads=True)
    except (OSError, AttributeError, ValueError):
        pass  # no stacks for the doctor; training goes on


def die_with_parent() -> None:
    """Ask the kernel to kill this rank when its launcher dies (even by kill -9): a rank in a process
    group of its own would otherwise train on as an orphan that no Stop can reach."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the launcher died before the request was in place
        os._exit(1)


LEASH_S = 2.0  # how often a rank looks for its supervisor
LEASH_NOTE = ("stopped because the run's supervisor vanished (killed): nothing would have watched, queued "
              "after or recorded this run")


def leash_to_supervisor() -> None:
    """End this rank within LEASH_S seconds of its run's supervisor dying (kill -9, OOM killer):
    with no supervisor nothing watches for a stall, records the end or starts the next queued
    run, and a status read may be minutes away. The supervisor is the nearest ancestor running
    core.train.runs (supervise, or the warm spare that became one) or core.train.cluster (a
    node's agent); a rank started some other way has none and is not leashed."""
    import threading

    import psutil

    try:
        p = psutil.Process().parent()
        while p is not None and p.pid > 1:
            cmd = " ".join(p.cmdline())
            if "core.train.runs" in cmd or "core.train.cluster" in cmd:
                break
            p = p.parent()
        else:
            return
        pid = p.pid
    except psutil.Error:
        return
    from core import jobs

    born = jobs.proc_start(pid)  # time since boot: a stepped wall clock does not fool it (jobs.alive)
    if born is None:
        return

    def watch():
        while True:
            time.sleep(LEASH_S)
            if not jobs.alive(pid, born):  # gone, a zombie, or another process under its pid
                _write_note(LEASH_NOTE)
                print(f"Error: {LEASH_NOTE}", file=sys.stderr)
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(1)

    threading.Thread(target=watch, name="leash", daemon=True).start()


def warm_imports() -> None:
    """What main() imports, imported ahead by a warm spare (core.train.warm) while it waits."""
    import paddle  # noqa: F401
    import paddle.distributed  # noqa: F401
    from paddlenlp.data import DataCollatorForSeq2Seq  # noqa: F401
    from paddlenlp.datasets import MapDataset  # noqa: F401
    from paddlenlp.peft import LoKrModel, LoRAModel, PrefixModelForCausalLM, VeRAModel  # noqa: F401
    from paddlenlp.trainer import PdArgumentParser, TrainerCallback  # noqa: F401
    from paddlenlp.transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401
    from paddlenlp.trl import DataConfig, ModelConfig, SFTConfig, SFTTrainer  # noqa: F401

    from core.data import datasets  # noqa: F401
    from core.train import upstream  # noqa: F401


if __name__ == "__main__":
    die_with_parent()
    import threading

    args = sys.argv[1:]
    if args[:1] == ["--warm"]:  # a spare: import now, train the run it is given later
        from core.train import warm

        warm_imports()
        config, again = warm.wait_for_claim(Path(args[1]))
        args = [str(config)] + (["--resume"] if again else [])
    threading.excepthook = _thread_failed
    reserve_failure_note(Path(args[0]).resolve().parent)
    install_stack_dump(Path(args[0]).resolve().parent)
    _startup = Path(args[0]).resolve().parent / STARTUP
    phase("process")
    note_termination()
    leash_to_supervisor()
    try:
        code = main(args)
        if code == 0:
            drop_failure_note()
    except BaseException:  # noqa: BLE001 - noted and printed, then leave with a clear non-zero code
        _end_rank(*sys.exc_info())
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # gloo can abort (-6) in its shutdown path; leave cleanly instead
