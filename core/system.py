"""What this machine has: package versions and the compute device, without importing paddle."""

from __future__ import annotations

import functools
import shutil
import subprocess
from importlib import metadata


def version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def gpus() -> list[str]:
    """GPU names from nvidia-smi, when a GPU build of paddle is installed; [] otherwise."""
    if not version("paddlepaddle-gpu") or not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def info() -> dict:
    """Versions and device, cheap enough for the studio header."""
    paddle_v = version("paddlepaddle-gpu") or version("paddlepaddle")
    g = gpus()
    return {
        "paddle": paddle_v,
        "paddlenlp": version("paddlenlp"),
        "paddleslim": version("paddleslim"),
        "gradio": version("gradio"),
        "device": "gpu" if g else "cpu",
        "gpus": g,
    }


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (the only binds allowed without credentials)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# Two warnings `import paddle` prints on every start, about its own build, that say nothing to a
# studio user and filled every job log, training log and CLI answer.
IMPORT_NOISE = (r"No ccache found", r"Setuptools is replacing distutils")


def quiet_import_warnings() -> None:
    """Filter IMPORT_NOISE (call before paddle is imported: the CLI's main, the training entry)."""
    import warnings

    for text in IMPORT_NOISE:
        warnings.filterwarnings("ignore", message=text)
