"""Structure rules from shared/STYLE.md that a test can hold.

* No import cycles among kvstore modules: every ``import``/``from ... import``
  of a kvstore module counts, at any depth (inside functions and
  ``TYPE_CHECKING`` blocks too: a lazy import is still a dependency).
* Every exception class the engine defines lives in ``kvstore/errors.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kvstore

PACKAGE = Path(kvstore.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """kvstore modules that ``path`` imports (a package import counts as its ``__init__``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # "from pkg import submodule" depends on the submodule; "from
            # module import name" on the module.
            submodules = [f"{node.module}.{alias.name}" for alias in node.names]
            names = [name for name in submodules if name in modules]
            if len(names) < len(submodules):
                names.append(node.module)
        for name in names:
            if name in modules:
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(files)
    return {name: _imports(path, modules) - {name} for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules, or None (iterative DFS)."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    for start in sorted(graph):
        if state.get(start):
            continue
        stack: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        path = [start]
        state[start] = 1
        while stack:
            node, pending = stack[-1]
            if not pending:
                state[node] = 2
                stack.pop()
                path.pop()
                continue
            nxt = pending.pop()
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, sorted(graph[nxt])))
    return None


def test_the_cycle_finder_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles_among_kvstore_modules() -> None:
    graph = import_graph()
    # The package __init__ re-exports everything; modules must not import it.
    importers = sorted(name for name, deps in graph.items() if "kvstore" in deps and name != "kvstore")
    graph = {name: deps - {"kvstore"} for name, deps in graph.items()}
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])
    assert importers == [name for name in importers if name in ALLOWED_PACKAGE_IMPORTERS], importers


# Modules that may "import kvstore" (the public API): the CLI, demo and doctor
# sit on top of it, like any user.
ALLOWED_PACKAGE_IMPORTERS = {"kvstore.cli", "kvstore.demo", "kvstore.doctor"}


def test_every_engine_exception_lives_in_errors() -> None:
    misplaced = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                # Every engine exception's name ends in Error (issue 24), so
                # the name of a base is enough here; tests/test_exception_names.py
                # follows whole inheritance chains across kvstore, catalog and service.
                if any(b.endswith(("Error", "Exception")) for b in bases):
                    misplaced.append(f"{_module_name(path)}.{node.name}")
    assert misplaced == []
