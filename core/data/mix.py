"""Mixing datasets: several workspace datasets, each with a ratio or a count, into one new dataset.

The rule (what each part contributes):
- ``ratio`` r: round(r × the part's good train records), drawn at random without repeats when
  r ≤ 1 (0.5: half of it, 1: all of it); above 1, every record ``int(r)`` times and the rest drawn
  (2: each record twice, 1.5: all once plus a random half again) — upsampling a small set.
- ``count`` n: exactly n train records, drawn the same way (n above the part's size repeats records).
- dev: each part gives the same fraction of its own dev records (capped at all of them, never
  repeated), so the mixed dev split mirrors the mixed train split and never holds train records.
This is LLaMA-Factory's ``interleave_probs`` turned around: there each record comes from part i
with probability p_i; here the numbers say how much of each part goes in, so the result's size is
known before it is made (part i's share of it is its taken count over the total).

The records are shuffled together (seeded: the same parts, amounts and seed give the same files),
written in a hidden temp folder and renamed into place. Records of one kind only: chat records
(src/tgt, whatever format they came in) with chat records, preference pairs with preference pairs,
KTO answers with KTO answers, text with text; anything else is refused with ``mix_incompatible``.
The new dataset's meta.json names its parts (name, path, format, checksum, amount, records
available and taken per split), the seed and the rule; :func:`core.data.datasets.provenance` is
what a run records of it.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
from array import array
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from core import workspace
from core.data import datasets
from core.data.datasets import DatasetError

MAX_RATIO = 100.0
OUT_FORMAT = {"chat": "paddlenlp", "preference": "preference", "kto": "kto", "text": "text"}
RULE = ("ratio r: round(r x train records) drawn without repeats (r > 1: each record int(r) times plus "
        "the rest drawn); count n: n records; dev: the same fraction of each part's dev records, at most all")


@dataclass
class Part:
    """One dataset of a mix and how much of it goes in (``ratio`` or ``count``, not both)."""

    dataset: str  # a workspace dataset's name, or a path to a dataset folder or file
    ratio: float | None = None  # fraction of its train records: 0.5 half, 1 all, 2 each twice
    count: int | None = None  # or exactly this many train records


def parse_part(spec: str, count: bool = False) -> Part:
    """``NAME=AMOUNT`` (the CLI's ``--part`` and ``--part-count``) -> Part; ValueError if malformed."""
    name, sep, amount = spec.rpartition("=")
    if not sep or not name.strip() or not amount.strip():
        raise ValueError(f"expected DATASET=AMOUNT, got {spec!r}")
    if count:
        return Part(name.strip(), count=int(amount))
    return Part(name.strip(), ratio=float(amount))


def _check_amount(part: Part) -> None:
    if part.count is not None:
        c = part.count
        if isinstance(c, bool) or not isinstance(c, int) or c < 1:
            raise DatasetError("mix_bad_count", dataset=part.dataset, value=c)
        return
    r = part.ratio
    if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) or not 0 < r <= MAX_RATIO:
        raise DatasetError("mix_bad_ratio", dataset=part.dataset, value=r, limit=int(MAX_RATIO))


def _pick(rng: random.Random, n: int, take: int, repeat: bool) -> list[int]:
    """``take`` indices of ``range(n)``: all of them take // n times and a random draw of the rest
    (``repeat`` False: at most n, no index twice)."""
    if n <= 0 or take <= 0:
        return []
    if not repeat:
        take = min(take, n)
    copies, rest = divmod(take, n)
    return [i for _ in range(copies) for i in range(n)] + sorted(rng.sample(range(n), rest))


def _spool(path: Path, fmt: str, out: Path) -> tuple[array, bool]:
    """Every good record of ``path`` converted and written to ``out`` (a JSON line each); returns
    the byte offset of each line and whether any chat record holds src/tgt lists."""
    offsets, lists, pos = array("q"), False, 0
    with open(out, "wb") as w:
        for rec in datasets.iter_records(path, fmt):
            lists = lists or isinstance(rec.get("src"), list)
            line = (json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8")
            offsets.append(pos)
            w.write(line)
            pos += len(line)
    return offsets, lists


def mix(name: str, parts: list, seed: int = 42) -> dict:
    """Make workspace dataset ``name`` from ``parts`` (Part, or (dataset, amount) pairs where a float
    amount is a ratio and an int one a count); returns its meta.json. See the module's docstring."""
    code = workspace.check_name(name)
    if code:
        raise DatasetError(code, name=name)
    seed = int(seed)
    parts = [p if isinstance(p, Part) else Part(p[0], count=p[1]) if isinstance(p[1], int) and not isinstance(p[1], bool)
             else Part(p[0], ratio=p[1]) for p in parts]
    if len(parts) < 2:
        raise DatasetError("mix_too_few", n=len(parts))
    seen: dict[str, str] = {}
    found = []  # (part, path, groups, format, kind)
    for part in parts:
        _check_amount(part)
        path = datasets.resolve_dataset(part.dataset)
        if Path(os.path.abspath(path)).parent == workspace.datasets_dir():  # a workspace dataset: by its name
            part = replace(part, dataset=path.name)
        key = str(path.resolve())
        if key in seen:
            raise DatasetError("mix_same_part", dataset=part.dataset)
        seen[key] = part.dataset
        fmt, kind = datasets.kind_of(path)
        found.append((part, path, datasets.resolve_files(path), fmt, kind))
    first = found[0]
    for other in found[1:]:
        if other[4] != first[4]:
            raise DatasetError("mix_incompatible", a=first[0].dataset, a_kind=first[4], b=other[0].dataset,
                               b_kind=other[4])
    kind = first[4]
    final = workspace.datasets_dir() / name
    if final.exists():
        raise DatasetError("dataset_exists", name=name)
    tmp = workspace.temp_dir_beside(final)
    try:
        rng = random.Random(seed)
        spools = []  # per part: {split: (file, offsets)}
        lists = kind != "chat"  # preference and KTO records are always lists
        for i, (part, path, groups, fmt, _) in enumerate(found):
            got = {}
            for split in ("train", "dev"):
                files = groups.get("data" if split == "train" and "data" in groups else split, [])
                out = tmp / f".part{i}.{split}.jsonl"
                offsets = array("q")
                with open(out, "wb"):
                    pass
                for f in files:  # a folder's train/*.json: one spool per split
                    more, has_lists = _spool(f, fmt, out.with_suffix(".one"))
                    base = out.stat().st_size
                    with open(out, "ab") as w, open(out.with_suffix(".one"), "rb") as r:
                        shutil.copyfileobj(r, w)
                    offsets.extend(o + base for o in more)
                    lists = lists or has_lists
                out.with_suffix(".one").unlink(missing_ok=True)
                got[split] = (out, offsets)
            if not got["train"][1]:
                raise DatasetError("mix_empty_part", dataset=part.dataset)
            spools.append(got)
        chosen: dict[str, list] = {"train": [], "dev": []}
        recorded = []
        for i, ((part, path, groups, fmt, _), got) in enumerate(zip(found, spools)):
            n_train, n_dev = len(got["train"][1]), len(got["dev"][1])
            take = part.count if part.count is not None else round(part.ratio * n_train)
            train_idx = _pick(rng, n_train, take, repeat=True)
            dev_take = round(min(1.0, take / n_train) * n_dev)
            dev_idx = _pick(rng, n_dev, dev_take, repeat=False)
            chosen["train"] += [(i, got["train"][1][j]) for j in train_idx]
            chosen["dev"] += [(i, got["dev"][1][j]) for j in dev_idx]
            recorded.append({
                "dataset": part.dataset,
                "path": str(path.resolve()), "format": fmt,
                "ratio": part.ratio, "count": part.count,
                "sha256": datasets._sha256_of(groups),
                "train_available": n_train, "train_taken": len(train_idx),
                "dev_available": n_dev, "dev_taken": len(dev_idx),
            })
        counts = {}
        for split in ("train", "dev"):
            rows = chosen[split]
            rng.shuffle(rows)
            handles = [open(got[split][0], "rb") for got in spools]
            try:
                with open(tmp / f"{split}.json", "w", encoding="utf-8", newline="\n") as w:
                    for i, offset in rows:
                        h = handles[i]
                        h.seek(offset)
                        line = h.readline().decode("utf-8")
                        if lists and kind == "chat":
                            rec = json.loads(line)
                            if isinstance(rec.get("src"), str):
                                line = json.dumps(datasets.one_shape(rec, True), ensure_ascii=False) + "\n"
                        w.write(line)
            finally:
                for h in handles:
                    h.close()
            counts[split] = len(rows)
        if not counts["train"]:
            raise DatasetError("no_records")
        for f in tmp.glob(".part*"):
            f.unlink()
        source = " + ".join(
            f"{r['dataset']}×{r['ratio']:g}" if r["ratio"] is not None else f"{r['dataset']}:{r['count']}"
            for r in recorded)
        meta = {
            "name": name,
            "source": f"mix: {source}",
            "format": OUT_FORMAT[kind],
            "kind": kind,
            "train": counts["train"],
            "dev": counts["dev"],
            "shape": "list" if lists else "string",
            "seed": seed,
            "mix": {"seed": seed, "rule": RULE, "parts": recorded},
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        workspace.write_json_atomic(tmp / workspace.DATASET_META, meta)
        try:
            workspace.publish_dir(tmp, final)
        except FileExistsError:
            raise DatasetError("dataset_exists", name=name) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return meta
