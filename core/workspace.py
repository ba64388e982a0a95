"""Where things live: the workspace root and its folders, plus atomic file writes.

Root is ``$PADDLE_STUDIO_HOME`` or ``./workspace``. Everything the studio shows is derived
from files under it, so a refresh, a second browser or a restart shows the same thing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

# marker files: a folder that holds one is complete (each is written last, inside a temp folder
# that is then renamed into place)
MODEL_MARKER = "studio_model.json"  # a finished model or adapter folder (run output, merge, quantize, demo)
QUANT_MARKER = "studio_quant.json"  # a quantized model folder (how it was quantized)
DATASET_META = "meta.json"  # a dataset folder imported by the studio

_NAME_RE = re.compile(r"^[A-Za-z0-9\u4e00-\u9fff][A-Za-z0-9_.\-\u4e00-\u9fff]{0,63}$")


def home() -> Path:
    """The workspace root (not created)."""
    return Path(os.environ.get("PADDLE_STUDIO_HOME", "workspace")).resolve()


def datasets_dir() -> Path:
    return home() / "datasets"


def models_dir() -> Path:
    return home() / "models"


def runs_dir() -> Path:
    return home() / "runs"


def uploads_dir() -> Path:
    return home() / "uploads"


def check_name(name: str) -> str | None:
    """Return an error code if ``name`` is not a safe single-folder name, else None."""
    if not name or not name.strip():
        return "name_empty"
    if "/" in name or "\\" in name or name in (".", "..") or ".." in name:
        return "name_unsafe"
    if not _NAME_RE.match(name):
        return "name_unsafe"
    return None


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file in the same folder, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_writable(path: Path | str | None = None) -> None:
    """Raise OSError naming the folder when nothing can be created at ``path`` (default: the
    workspace), tried in its nearest existing folder; nothing is left behind. Verbs that write
    call it before anything slow (a model load), so a read-only workspace is one line at once."""
    p = Path(path) if path is not None else home()
    p = p.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=".write-check.", dir=p)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(p)) from None
    os.close(fd)
    os.unlink(tmp)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """``write_text_atomic`` for bytes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, obj) -> None:
    write_text_atomic(path, json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


def new_dir(root: Path, base: str) -> Path:
    """Create ``root/base`` (or ``base-2``, ``base-3``… when taken, even by a racing process) and return it."""
    root.mkdir(parents=True, exist_ok=True)
    name, k = base, 1
    while True:
        try:
            (root / name).mkdir()
            return root / name
        except FileExistsError:
            k += 1
            name = f"{base}-{k}"


def temp_dir_beside(final: Path) -> Path:
    """A fresh hidden temp folder next to ``final`` (same filesystem, so rename is atomic)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))


def publish_dir(tmp: Path, final: Path) -> None:
    """Rename a finished temp folder into place; refuses to overwrite an existing folder."""
    if final.exists():
        shutil.rmtree(tmp, ignore_errors=True)
        raise FileExistsError(str(final))
    os.rename(tmp, final)


def read_jsonl(path: Path, offset: int = 0) -> tuple[list, int]:
    """The complete JSON lines of ``path`` from byte ``offset`` (a line still being written is read
    next time; a line that is not JSON is skipped); returns (records, new offset)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return [], offset
    end = data.rfind(b"\n") + 1
    out = []
    for line in data[:end].splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out, offset + end
