"""The layout's rules: core/ never imports the UI, and no two core modules import each other
(directly or round a longer circle), counting imports inside functions too."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core"


def core_modules() -> dict[str, Path]:
    out = {}
    for f in CORE.rglob("*.py"):
        parts = f.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def imports_of(path: Path, modules: dict) -> set[str]:
    """Every core module ``path`` imports, anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in found if m in modules and modules[m].name != "__init__.py"} | {
        m for m in found if m.split(".")[0] in ("gradio", "studio")
    }


def test_core_never_imports_the_ui():
    mods = core_modules()
    bad = {name: sorted(m for m in imports_of(f, mods) if m.split(".")[0] in ("gradio", "studio"))
           for name, f in mods.items()}
    assert not {k: v for k, v in bad.items() if v}, bad


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and (c := visit(m)):
                return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (c := visit(n)):
            return c
    return None


def test_no_import_circle_in_core():
    mods = core_modules()
    graph = {name: {m for m in imports_of(f, mods) if m != name and m in mods} for name, f in mods.items()}
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_cycle_finder_can_fail():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_core_imports_with_gradio_blocked():
    code = ("import sys; sys.modules['gradio'] = None; sys.modules['studio'] = None\n"
            "import pkgutil, importlib, core\n"
            "for m in pkgutil.walk_packages(core.__path__, 'core.'):\n"
            "    if m.name != 'core.train.entry': importlib.import_module(m.name)\n"
            "print('ok')")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_marker_files_named_once():
    """The marker file names are constants in core.workspace, not literals scattered around."""
    for f in list(CORE.rglob("*.py")) + list((ROOT / "studio").rglob("*.py")):
        if f.name == "workspace.py":
            continue
        for lit in ('"studio_model.json"', '"studio_quant.json"', '"meta.json"'):
            assert lit not in f.read_text(encoding="utf-8"), f"{f.relative_to(ROOT)} writes {lit} as a literal"


def test_no_import_circle_in_studio_and_tabs_never_import_the_app():
    """studio/app.py builds the page from the tabs; the tabs take the live machinery from studio.live
    (app <-> tabs/runs, tabs/jobs was a circle)."""
    studio = {}
    for f in (ROOT / "studio").rglob("*.py"):
        parts = f.relative_to(ROOT).with_suffix("").parts
        studio[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    graph = {}
    for name, f in studio.items():
        found = set()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        graph[name] = {m for m in found if m in studio and m != name and not studio[m].name == "__init__.py"}
    assert not [n for n, deps in graph.items() if n.startswith("studio.tabs.") and "studio.app" in deps]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))
