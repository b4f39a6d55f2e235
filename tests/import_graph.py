"""The import graph of the project's packages, and a cycle finder: the one
implementation the structure tests share (tests/test_structure.py,
tests/catalog/test_layers.py).

Every ``import``/``from ... import`` of a project module counts, at any depth
(inside functions and ``TYPE_CHECKING`` blocks too: a lazy import is still a
dependency). A package import counts as its ``__init__``; ``from pkg import
submodule`` as the submodule.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def module_name(path: Path) -> str:
    """``catalog/durable/lake.py`` -> ``catalog.durable.lake``; a package's ``__init__`` is the package."""
    parts = path.resolve().relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``path`` imports."""
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


def import_graph(*packages: str) -> dict[str, set[str]]:
    """Each module of ``packages`` (top-level package names) -> the modules of ``packages`` it imports."""
    files = {module_name(p): p for package in packages for p in (REPO / package).rglob("*.py")}
    modules = set(files)
    return {name: imports(path, modules) - {name} for name, path in files.items()}


def package_of(module: str) -> str:
    return module.split(".", 1)[0]


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
                stack.append((nxt, sorted(graph.get(nxt, ()))))
    return None
