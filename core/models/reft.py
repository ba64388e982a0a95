"""ReFT (representation fine-tuning, PaddleNLP's ``paddlenlp.peft.reft``): small trained
interventions that edit the hidden state a decoder layer outputs at a few prompt positions (the
first and last tokens of the prompt: ``position`` "f7+l7"). Nothing in the model's weights
changes, so a ReFT adapter cannot be merged; it is loaded with its base for chat and evaluation.

What upstream leaves to the caller and the studio does here (paddlenlp 3.0.0b4):

- positions: a prompt shorter than first + last gets filler positions. Upstream fills with -1;
  a filler that repeats a real position makes the scatter's backward count it twice or more
  (gradients measured 3-150x off), and with right padding -1 can be an answer token. In training
  the filler points at one pad token appended to the row (its label ignored); in a forward-only
  pass (chat, evaluation) repeating the last prompt token is harmless.
- generation: ``ReFTModel.generate`` always runs an un-intervened generate first (it would stream
  the base model's tokens); :class:`Steered` runs only the intervened one, with the hooks firing
  on the prompt's forward alone (the KV cache carries the edit to the answer).
- loading: ``ReFTConfig.from_pretrained`` drops ``position``; it is read back from config.json.
- resume: the Trainer's checkpoint loader builds a new ReFTModel and discards it; the studio
  loads the checkpoint's interventions into the model being trained (:func:`load_interventions`).
- the hooks are registered on ``model.llama.layers[i]``: LLaMA-architecture models only (the
  family presets say which).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

INTERVENTIONS = ("LoreftIntervention", "TinyIntervention")
CONFIG = "config.json"  # what ReFTModel.save_pretrained writes beside intkey_layer.N.bin
POSITION = re.compile(r"^(f\d+)?(\+?l\d+)?$")


def parse_position(position: str) -> tuple[int, int]:
    """'f7+l7' -> (7, 7); 'f3' -> (3, 0); 'l5' -> (0, 5). ValueError for anything else."""
    s = str(position).strip()
    if not s or not POSITION.match(s) or s.startswith("+"):
        raise ValueError(f"position {position!r}: expected fN, lN or fN+lN (first/last N prompt tokens), e.g. f7+l7")
    first = last = 0
    for part in s.split("+"):
        if part.startswith("f"):
            first = int(part[1:])
        elif part.startswith("l"):
            last = int(part[1:])
    if first + last == 0:
        raise ValueError(f"position {position!r}: intervenes on no token (use at least f1 or l1)")
    return first, last


def parse_layers(layers: str, n_layers: int) -> list[int]:
    """'all' or layer numbers separated by ';' (upstream's form; ',' accepted) -> sorted list."""
    s = str(layers).strip().lower()
    if s == "all":
        return list(range(n_layers))
    out = []
    for part in re.split(r"[;,]", s):
        part = part.strip()
        if not part.isdigit():
            raise ValueError(f"layers {layers!r}: expected 'all' or layer numbers like 0;2;3, got {part!r}")
        k = int(part)
        if k >= n_layers:
            raise ValueError(f"layers {layers!r}: the model has layers 0..{n_layers - 1}, not {k}")
        out.append(k)
    if not out:
        raise ValueError(f"layers {layers!r}: no layer given")
    return sorted(set(out))


def locations(prompt_len: int, first: int, last: int, filler: int | None = None) -> list[int]:
    """Token indices of one prompt the interventions edit: its first ``first`` and last ``last``
    tokens, at most half the prompt each; what is missing is filled with ``filler`` (default:
    the last prompt token), so every row has first + last positions."""
    f = min(prompt_len // 2, first)
    la = min(prompt_len // 2, last)
    if prompt_len == 1 and f + la == 0:  # a one-token prompt: that token
        la = 1 if last else 0
        f = 0 if last else 1
    pos = list(range(f)) + list(range(prompt_len - la, prompt_len))
    fill = prompt_len - 1 if filler is None else filler
    return pos + [fill] * (first + last - len(pos))


def prompt_length(labels: list[int], ignore: int = -100) -> int:
    """Tokens before the last answer of a studio example (labels shifted left by one, as
    core.data.templates builds them): one more than where the final run of answer labels starts."""
    end = len(labels)
    while end > 0 and labels[end - 1] == ignore:
        end -= 1
    start = end
    while start > 0 and labels[start - 1] != ignore:
        start -= 1
    return max(start + 1, 1)


def training_features(examples: list[dict], first: int, last: int, n_interventions: int, pad_id: int) -> list[dict]:
    """Studio examples (input_ids, labels) with ``intervention_locations`` added; a prompt too short
    for every position gets one pad token appended (label ignored) that the fillers point at."""
    out = []
    for e in examples:
        ids, labels = list(e["input_ids"]), list(e["labels"])
        n = prompt_length(labels)
        filler = None
        if n < 2 * max(first, last):
            ids, labels = ids + [pad_id], labels + [-100]
            filler = len(ids) - 1
        locs = locations(n, first, last, filler)
        out.append({"input_ids": ids, "labels": labels, "intervention_locations": [locs] * n_interventions})
    return out


def collator(inner):
    """Batches of :func:`training_features`: ``inner`` pads the rest; the locations become one int64
    array [batch, interventions, positions] (ReFTModel.forward transposes it)."""
    import numpy as np
    import paddle

    def collate(features):
        locs = [f["intervention_locations"] for f in features]
        batch = inner([{k: v for k, v in f.items() if k != "intervention_locations"} for f in features])
        batch["intervention_locations"] = paddle.to_tensor(np.asarray(locs, dtype="int64"))
        return batch

    return collate


def build(model, layers: list[int], rank: int, position: str, intervention_type: str = "LoreftIntervention",
          dropout: float = 0.0, act_fn: str = "linear", add_bias: bool = False):
    """A PaddleNLP ReFTModel with one intervention of ``intervention_type`` per layer in ``layers``."""
    from paddlenlp.peft.reft import ReFTConfig, ReFTModel, intervention_mapping

    if intervention_type not in INTERVENTIONS:
        raise ValueError(f"intervention_type {intervention_type!r}: expected one of {', '.join(INTERVENTIONS)}")
    params = {"embed_dim": model.config.hidden_size, "low_rank_dimension": int(rank), "dropout": float(dropout),
              "dtype": "float32", "act_fn": act_fn, "device": "cpu", "add_bias": bool(add_bias)}
    reps = [{"layer": k, "component": "block_output", "low_rank_dimension": int(rank),
             "intervention": intervention_mapping[intervention_type](**params)} for k in layers]
    reft = ReFTModel(ReFTConfig(representations=reps, intervention_params=params, position=position), model)
    reft.disable_model_gradients()
    return reft


def is_reft(path: str | Path) -> bool:
    """True for a folder ReFTModel.save_pretrained wrote (its config.json lists representations)."""
    try:
        info = json.loads((Path(path) / CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(info, dict) and isinstance(info.get("representations"), list)


def saved_config(path: str | Path) -> dict:
    return json.loads((Path(path) / CONFIG).read_text(encoding="utf-8"))


def load_interventions(reft, path: str | Path) -> None:
    """Load the interventions saved in ``path`` into ``reft`` in place (the same layers)."""
    import paddle

    for key, (intervention, _hook) in reft.interventions.items():
        f = Path(path) / f"intkey_{key}.bin"
        if not f.is_file():
            raise FileNotFoundError(f"{path}: {f.name} is missing (a ReFT adapter saves one file per layer)")
        intervention.load_state_dict(paddle.load(str(f)))


def load(model, path: str | Path) -> "Steered":
    """The base ``model`` with the ReFT adapter in ``path``, ready for chat and evaluation."""
    from paddlenlp.peft.reft import ReFTModel

    info = saved_config(path)
    reft = ReFTModel.from_pretrained(str(path), model)
    first, last = parse_position(info.get("position") or "f7+l7")
    return Steered(reft, first, last)


class Steered:
    """A ReFTModel for inference: ``generate`` (left-padded prompts) and a call (right-padded
    examples, with their prompt lengths) apply the interventions at the prompt's positions."""

    def __init__(self, reft, first: int, last: int):
        self.reft_model = reft
        self.model = reft.model
        self.config = reft.model.config
        self.first, self.last = first, last

    def _hooks(self, rows: list[list[int]]):
        per_key = [rows] * len(self.reft_model.sorted_keys)  # [interventions][batch][positions]
        self.reft_model._reset_hook_count()
        return self.reft_model._wait_for_forward_with_intervention(per_key)

    def generate(self, input_ids=None, attention_mask=None, **kw):
        import numpy as np

        mask = np.asarray(attention_mask.numpy() if attention_mask is not None else np.ones(input_ids.shape), dtype="int64")
        rows = []
        for m in mask:
            n = int(m.sum())
            off = len(m) - n  # left padding
            rows.append([off + p for p in locations(n, self.first, self.last)])
        handles = self._hooks(rows)
        try:
            return self.model.generate(input_ids=input_ids, attention_mask=attention_mask, **kw)
        finally:
            handles.remove()
            self.reft_model._reset_hook_count()

    def _interventions(self):
        return [v[0] for v in getattr(self.reft_model, "interventions", {}).values() if hasattr(v[0], "eval")]

    @property
    def training(self) -> bool:
        return bool(getattr(self.model, "training", False))

    def eval(self):
        """The base model and every intervention (ReFTModel.eval() leaves the interventions, which
        are not sublayers, in training mode: their dropout stayed on in evaluation)."""
        self.model.eval()
        for iv in self._interventions():
            iv.eval()
        return self

    def train(self):
        self.model.train()
        for iv in self._interventions():
            iv.train()
        return self

    def __call__(self, input_ids=None, attention_mask=None, prompt_lengths=None, **kw):
        if prompt_lengths is None:
            raise ValueError("a ReFT model needs the prompt length of every row (prompt_lengths)")
        rows = [locations(int(n), self.first, self.last) for n in prompt_lengths]
        handles = self._hooks(rows)
        try:
            return self.model(input_ids=input_ids, attention_mask=attention_mask, **kw)
        finally:
            handles.remove()
            self.reft_model._reset_hook_count()
