"""Locales cover every key in both languages; core stays UI-free; bind/auth rules."""

import subprocess
import sys
from pathlib import Path

import pytest

from core.data import datasets
from studio import locales

ROOT = Path(__file__).resolve().parents[1]


def test_every_key_has_both_languages():
    for key, entry in locales.TEXT.items():
        for lang in locales.LANGS:
            assert entry.get(lang, "").strip(), f"{key} lacks {lang}"


def test_every_engine_code_is_translated_with_same_placeholders():
    import string

    fields = lambda s: {f for _, f, _, _ in string.Formatter().parse(s) if f}  # noqa: E731
    for code, en in datasets.MESSAGES.items():
        key = f"problem.{code}"
        assert key in locales.TEXT, key
        for lang in locales.LANGS:
            assert fields(locales.TEXT[key][lang]) == fields(en), (key, lang)


def test_every_locale_key_used_in_studio_exists():
    import re

    used = set()
    for f in (ROOT / "studio").rglob("*.py"):
        used |= set(re.findall(r"[\"']((?:app|dataset|device|error)\.[a-z_]+)[\"']", f.read_text(encoding="utf-8")))
    missing = sorted(k for k in used if k not in locales.TEXT)
    assert not missing, missing


def test_core_imports_without_gradio():
    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'gradio' or name.startswith('gradio.'):\n"
        "            raise ImportError('gradio is blocked')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import pkgutil, core\n"
        "mods = [m.name for m in pkgutil.iter_modules(core.__path__)]\n"
        "for m in mods: __import__('core.' + m)\n"
        "assert 'gradio' not in sys.modules\n"
        "assert 'paddle' not in sys.modules, 'core modules must import paddle lazily'\n"
        "print(len(mods))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.strip()) >= 5


@pytest.mark.parametrize(
    "host, auth, ok",
    [
        ("127.0.0.1", None, True),
        ("localhost", None, True),
        ("::1", None, True),
        ("0.0.0.0", None, False),
        ("192.168.1.5", None, False),
        ("0.0.0.0", "admin:secret", True),
        ("0.0.0.0", "admin:", False),
        ("127.0.0.1", "nocolon", False),
    ],
)
def test_bind_rules(host, auth, ok):
    from studio.app import check_bind

    if ok:
        pair = check_bind(host, auth)
        assert pair == (tuple(auth.split(":")) if auth else None)
    else:
        with pytest.raises(ValueError):
            check_bind(host, auth)


def test_cli_refuses_public_bind_without_auth():
    r = subprocess.run(
        [sys.executable, "-m", "core.cli", "ui", "--host", "0.0.0.0", "--port", "7999"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 2 and "needs --auth" in r.stderr
