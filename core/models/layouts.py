"""What a model family needs beside its token ids, built from the ids and the usual 2-D padding mask.

Most families take the [batch, length] padding mask as it is. The GLM line (ChatGLM-6B v1, GLM)
fills a blank instead: the prompt ends with a mask token ([gMASK]) and a start token (<sop>); every
token up to the start token sees every other one (the context is read both ways), the answer after
it is read left to right, and positions come in two rows: the position in the text (the blank's
position for every answer token) and the position inside the answer (0 in the context, 1, 2 ...
after the start token). A family preset declares it with

    "inputs": {"layout": "blank_infilling", "mask_tokens": ["[gMASK]", "[MASK]"], "start_token": "<sop>"}

and every place that runs the model (training's collator, evaluation, generation, chat, the merge
check, quantization's calibration) asks :func:`model_inputs` for its keyword arguments, so no code
branches on a family's name. The rule is the one PaddleNLP's ChatGLMTokenizer._pad applies to one
unpadded row; tests/test_families.py compares the two.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

BLANK = "blank_infilling"


def layout(preset: dict | None) -> dict | None:
    """The preset's ``inputs`` entry when it asks for something other than a 2-D padding mask."""
    spec = (preset or {}).get("inputs")
    return spec if spec and spec.get("layout") == BLANK else None


def resolve(spec: dict | None, tokenizer) -> dict | None:
    """The layout with its token names turned into ids of ``tokenizer`` (None for plain models)."""
    if not spec:
        return None
    vocab_of = tokenizer.convert_tokens_to_ids
    masks = [int(vocab_of(t)) for t in spec["mask_tokens"]]
    start = int(vocab_of(spec["start_token"]))
    unk = getattr(tokenizer, "unk_token_id", None)
    missing = [t for t, i in zip([*spec["mask_tokens"], spec["start_token"]], [*masks, start]) if unk is not None and i == unk]
    if missing:
        raise ValueError(f"the tokenizer has no {', '.join(missing)} token, which this model family's prompts need")
    out = {"layout": BLANK, "mask_ids": masks, "start_id": start}
    # GLM: the blank is the first mask token in the text; ChatGLM v1: [MASK] if there is one, else [gMASK]
    if spec.get("mask_choice") == "first_position":
        out["first_position"] = True
    # GLM's generate grows positions with the generic rule (both rows + 1): give them for the whole answer
    if spec.get("generation_positions") == "precomputed":
        out["precomputed"] = True
    return out


def for_model(model_dir: str | Path | None, tokenizer) -> dict | None:
    """The resolved layout of the family of the model in ``model_dir`` (None when it needs none)."""
    if model_dir is None:
        return None
    from core.train.config import model_family

    return resolve(layout(model_family(model_dir)), tokenizer)


def row_layout(ids: list[int] | np.ndarray, spec: dict) -> tuple[np.ndarray, np.ndarray]:
    """One unpadded row: its [L, L] bool mask (True = may attend) and [2, L] positions."""
    ids = [int(x) for x in ids]
    n = len(ids)
    ctx = ids.index(spec["start_id"]) if spec["start_id"] in ids else n
    mask = np.tril(np.ones((n, n), dtype=bool))
    mask[:, :ctx] = True
    pos = np.arange(n, dtype="int64")
    if spec.get("first_position"):
        blank = next((i for i, t in enumerate(ids) if t in spec["mask_ids"]), None)
    else:
        blank = next((ids.index(m) for m in spec["mask_ids"] if m in ids), None)
    if blank is not None:
        pos[ctx:] = blank
    block = np.concatenate([np.zeros(ctx, dtype="int64"), np.arange(1, n - ctx + 1, dtype="int64")])
    return mask, np.stack([pos, block])


def model_inputs(spec: dict | None, ids: np.ndarray, att: np.ndarray) -> dict:
    """Keyword arguments beside ``input_ids`` for a padded batch: ``att`` is the usual [B, L]
    padding mask (1 = token, 0 = padding, on either side). Plain models get it back unchanged;
    blank-infilling ones get a [B, 1, L, L] bool mask and [B, 2, L] positions, each row built from
    its tokens alone (padding rows and columns closed, padding positions 0), so the padding side
    changes nothing for the real tokens."""
    if not spec:
        return {"attention_mask": att}
    ids = np.asarray(ids)
    att = np.asarray(att)
    b, n = ids.shape
    mask = np.zeros((b, 1, n, n), dtype=bool)
    pos = np.zeros((b, 2, n), dtype="int64")
    for i in range(b):
        where = np.flatnonzero(att[i])
        if not len(where):
            continue
        m, p = row_layout(ids[i, where], spec)
        mask[i, 0, where[:, None], where[None, :]] = m
        pos[i, :, where] = p.T
    # a padding row that sees nothing would softmax over nothing: let it see itself (its output is ignored)
    empty = ~mask[:, 0].any(-1)
    for i, j in zip(*np.nonzero(empty)):
        mask[i, 0, j, j] = True
    return {"attention_mask": mask, "position_ids": pos}


def as_tensors(inputs: dict) -> dict:
    import paddle

    return {k: paddle.to_tensor(v) for k, v in inputs.items()}


ATTR = "studio_layout"


def attach(model, model_dir: str | Path | None, tokenizer) -> dict | None:
    """Remember on ``model`` the layout its family needs (see :func:`inputs`); returns it."""
    spec = for_model(model_dir, tokenizer)
    setattr(model, ATTR, spec)
    return spec


def spec_of(model) -> dict | None:
    """The layout attached to ``model`` or to the model an adapter wraps (PEFT keeps it in .model)."""
    seen = 0
    while model is not None and seen < 4:
        spec = getattr(model, ATTR, None)
        if spec:
            return spec
        model, seen = getattr(model, "model", None), seen + 1
    return None


def inputs(model, ids, att) -> dict:
    """Keyword arguments beside ``input_ids`` for running ``model`` (forward or generate) on a
    batch: ``att`` is the 2-D padding mask (numpy or paddle). A tensor per key."""
    import paddle

    spec = spec_of(model)
    if not spec:
        return {"attention_mask": att if isinstance(att, paddle.Tensor) else paddle.to_tensor(att)}
    as_np = lambda x: x.numpy() if isinstance(x, paddle.Tensor) else np.asarray(x)  # noqa: E731
    return as_tensors(model_inputs(spec, as_np(ids), as_np(att)))


def generation_inputs(model, ids: np.ndarray, att: np.ndarray, own_positions: bool, max_new: int) -> dict:
    """Every keyword argument of ``generate`` that describes the left-padded prompts ``ids`` (numpy,
    with their 2-D padding mask ``att``): ``input_ids`` and :func:`inputs`. ``own_positions`` (the
    family preset's ``generate_position_ids``) adds each row's positions counted from its first real
    token: Qwen v1 needs them even for one prompt (without them its cached decoding puts every new
    token at position 0; greedy answers differed from a step-by-step reference on 2 of 4 prompts).

    GLM (``precomputed``): its generate grows both position rows by one per token, where the answer's
    first row must stay at the blank, so the positions of all ``max_new`` answer tokens are given
    up front; and its first cached step slices the batch axis by the prompt length, so prompts are
    left padded to at least the batch size (a batch of 8 two-token prompts failed with a shape error)."""
    import paddle

    ids, att = np.asarray(ids), np.asarray(att)
    spec = spec_of(model)
    if spec and spec.get("precomputed") and ids.shape[1] < ids.shape[0]:
        w = ids.shape[0] - ids.shape[1]  # columns of padding (closed by the mask: their ids are never read)
        ids = np.concatenate([np.zeros((ids.shape[0], w), dtype=ids.dtype), ids], 1)
        att = np.concatenate([np.zeros((att.shape[0], w), dtype=att.dtype), att], 1)
    kw = inputs(model, ids, att)
    if spec and spec.get("precomputed"):
        pos = kw["position_ids"].numpy()
        grow = np.arange(1, max_new + 1, dtype="int64")
        more = np.stack([np.repeat(pos[:, 0, -1:], max_new, 1), pos[:, 1, -1:] + grow], 1)
        kw["position_ids"] = paddle.to_tensor(np.concatenate([pos, more], -1))
    elif own_positions and "position_ids" not in kw:
        kw["position_ids"] = paddle.to_tensor(np.maximum(np.cumsum(att, axis=1) - 1, 0).astype("int64"))
    return {"input_ids": paddle.to_tensor(ids), **kw}
