"""Structure rules from shared/STYLE.md that a test can hold.

* No import cycles among kvstore modules: every ``import``/``from ... import``
  of a kvstore module counts, at any depth (inside functions and
  ``TYPE_CHECKING`` blocks too: a lazy import is still a dependency). The
  graph builder and cycle finder live in tests/import_graph.py, shared with
  tests/test_import_structure.py (catalog, service, layering).
* Every exception class the engine defines lives in ``kvstore/errors.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kvstore
from import_graph import find_cycle, import_graph, module_name


def test_the_cycle_finder_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles_among_kvstore_modules() -> None:
    graph = import_graph("kvstore")
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
    package = Path(kvstore.__file__).resolve().parent
    for path in package.rglob("*.py"):
        if path.name == "errors.py" and path.parent == package:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                # Every engine exception's name ends in Error (issue 24), so
                # the name of a base is enough here; tests/test_exception_names.py
                # follows whole inheritance chains across kvstore, catalog and service.
                if any(b.endswith(("Error", "Exception")) for b in bases):
                    misplaced.append(f"{module_name(path)}.{node.name}")
    assert misplaced == []
