"""Which checkpoints of a run count: a ``checkpoint-N`` folder is complete once the training entry
has written its marker (``studio_checkpoint.json``: every file and its size) after PaddleNLP
finished saving it. A save cut short (a full disk, a killed rank) leaves no marker, or files of
another size, and is never resumed from. Standard library only: the supervisor and the CLI read it
without importing paddle."""

from __future__ import annotations

import json
import os
from pathlib import Path

MARKER = "studio_checkpoint.json"


def step_of(d: Path) -> int | None:
    tail = d.name.rpartition("-")[2]
    return int(tail) if d.name.startswith("checkpoint-") and tail.isdigit() else None


def mark_complete(ckpt: Path, step: int) -> None:
    """Record every file of a just-saved checkpoint with its size (rank 0, after the save)."""
    files = {str(p.relative_to(ckpt)): p.stat().st_size for p in sorted(ckpt.rglob("*"))
             if p.is_file() and p.name != MARKER}
    tmp = ckpt / f".{MARKER}.tmp"
    tmp.write_text(json.dumps({"step": step, "files": files}, indent=1), encoding="utf-8")
    os.replace(tmp, ckpt / MARKER)


def is_complete(ckpt: Path) -> bool:
    try:
        info = json.loads((ckpt / MARKER).read_text(encoding="utf-8"))
        files = info["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not files:
        return False
    for name, size in files.items():
        try:
            if (ckpt / name).stat().st_size != size:
                return False
        except OSError:
            return False
    return True


def checkpoints(output_dir: Path) -> list[Path]:
    """Every checkpoint-N folder, oldest first."""
    found = [p for p in Path(output_dir).glob("checkpoint-*") if p.is_dir() and step_of(p) is not None]
    return sorted(found, key=step_of)


def last_complete(output_dir: Path) -> Path | None:
    """The newest complete checkpoint, or None."""
    for ck in reversed(checkpoints(output_dir)):
        if is_complete(ck):
            return ck
    return None
