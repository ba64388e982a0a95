import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


@pytest.fixture
def workspace_home(tmp_path, monkeypatch):
    """A fresh, empty PADDLE_STUDIO_HOME for one test."""
    home = tmp_path / "ws"
    monkeypatch.setenv("PADDLE_STUDIO_HOME", str(home))
    return home
