"""The package's import graph has no cycle, and every module imports on its own in a fresh interpreter.

The graph is built with ``ast`` from the source files: every ``import`` of a gdsstore module, at module
level *and* inside functions (a function-level import that closes a cycle is the same knot, only
later), except those under ``if TYPE_CHECKING:``. Importing ``a.b.c`` also imports the packages
``a`` and ``a.b``, so those edges count too (a module's own parent packages excepted: they are
importing it). Backends and file openers are found through :mod:`gdsstore.engine.registry`'s
strings, never by importing each other.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gdsstore"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path) -> set[str]:
    """The gdsstore modules ``module`` imports (anywhere but under ``if TYPE_CHECKING:``)."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                for a in child.names:
                    full = f"{base}.{a.name}"
                    found.add(full if full in MODULES else base)
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    targets = {t for t in (_resolve(n) for n in found if n.split(".")[0] == "gdsstore") if t}
    for t in list(targets):  # importing a.b.c runs a/__init__ and a/b/__init__ first
        parts = t.split(".")
        targets.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return {t for t in targets if t != module and not module.startswith(t + ".")}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(v: str) -> list[str] | None:
        state[v] = 1
        stack.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return [*stack[stack.index(w) :], w]
            if w not in state and (found := walk(w)):
                return found
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (found := walk(v)):
            return found
    return None


def test_the_import_graph_is_acyclic() -> None:
    graph = {m: _imports(m, p) for m, p in MODULES.items()}
    assert graph["gdsstore.engine.backend"], "the graph builder found no imports: it is broken"
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_transports_are_reached_only_through_the_registry() -> None:
    """No engine module outside the registry's targets names a transport module to import it."""
    graph = {m: _imports(m, p) for m, p in MODULES.items()}
    for m in ("gdsstore.engine", "gdsstore.engine.backend", "gdsstore.engine.registry", "gdsstore.policy"):
        assert not {t for t in graph[m] if t.startswith("gdsstore.engine.remote")}, m


# Each module is imported in a child forked from one fresh interpreter that has loaded numpy and zarr (most
# modules import them: a new interpreter per module spent its time there) and nothing of gdsstore.
_IMPORT_EACH_IN_A_CHILD = """
import importlib, os, sys, traceback
import numpy, zarr
assert not [m for m in sys.modules if m.split(".")[0] == "gdsstore"], "the parent loaded gdsstore"
failed = []
for name in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    if os.waitpid(pid, 0)[1]:
        failed.append(name)
print(failed)
"""


def _modules_failing_to_import_first(modules: list[str]) -> tuple[list[str], str]:
    """The modules of ``modules`` that fail to import as the first of gdsstore's, and the children's stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _IMPORT_EACH_IN_A_CHILD, *modules], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return ast.literal_eval(out.stdout.splitlines()[-1]), out.stderr[-4000:]


def test_every_module_imports_alone_in_a_fresh_interpreter() -> None:
    """Each module first of gdsstore's in its own interpreter: an import-order cycle would fail here."""
    pytest.importorskip("zarr")
    pytest.importorskip("fsspec")
    failed, stderr = _modules_failing_to_import_first(sorted(MODULES))
    assert not failed, (failed, stderr)


def test_a_module_that_fails_to_import_first_is_named() -> None:
    pytest.importorskip("zarr")
    failed, stderr = _modules_failing_to_import_first(["gdsstore.trace", "gdsstore.no_such_module"])
    assert failed == ["gdsstore.no_such_module"] and "No module named 'gdsstore.no_such_module'" in stderr


def test_import_gdsstore_loads_no_transport_and_no_local_engine() -> None:
    code = "import sys, gdsstore; print(sorted(m for m in sys.modules if m.startswith('gdsstore.engine')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = eval(out.stdout)
    assert not [m for m in loaded if m.startswith("gdsstore.engine.remote")], loaded
    assert "gdsstore.engine.local" not in loaded and "gdsstore.engine.cufile" not in loaded, loaded
