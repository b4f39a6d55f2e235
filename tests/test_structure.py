"""The import structure of every package, and the layering between them (shared/STYLE.md, issue 24).

* No import cycles within a package: ``kvstore/``, ``kvclient/``,
  ``catalog/`` (with its ``durable/`` and ``spark/`` subpackages and the
  package ``__init__`` itself) and ``service/``, nor across them. Every import
  counts, lazy ones inside functions and ``TYPE_CHECKING`` ones too
  (tests/import_graph.py). Inside the engine, only the modules that sit on top
  of it like any user may import the package itself (its public API).
* Layers (docs/architecture.md): the engine imports nothing from the HTTP
  client, the catalog or the service; the client (``kvclient/``) imports only
  the engine (and the standard library and third-party packages); the catalog
  imports nothing from the client or the service. The service sits on top and
  may import any of them. The named exceptions below are checked to still
  exist, so they cannot go stale; none of them is an import of the client.
  The catalog's own layers are tests/catalog/test_layers.py.
* Across packages only public names: no module imports an underscore-prefixed
  module or name of another package (``from kvstore._x import y``,
  ``import kvstore._x``, ``from kvstore.x import _y``), lazily or not.
* The packages above the engine use its API (``ENGINE_API``: the package and
  its public modules); the few imports of engine parts that remain are
  listed with their reasons, so a new one fails.

That every exception class lives in an ``errors`` module, in every package,
is tests/test_exception_names.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from import_graph import REPO, find_cycle, import_graph, module_name, package_of

PACKAGES = ("kvstore", "kvclient", "catalog", "service")
GRAPH = import_graph(*PACKAGES)

# Imports across layers that are allowed, each with its reason. `lakekv` is
# the engine's command; `lakekv lake ...` and `lakekv serve` are defined by
# their packages and handed to them by kvstore/cli.py (docs/architecture.md
# names this exception). Both imports are made inside functions, when the
# parser is built or the command runs, and `lake` is skipped when the catalog
# is not installed, but they are still dependencies of kvstore.cli, so they
# are listed here rather than hidden.
LAYERING_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("kvstore.cli", "catalog.cli"): "adds the `lakekv lake` subcommands the catalog defines",
    ("kvstore.cli", "service.cli"): "adds the `lakekv serve` arguments and runs the server",
}


def _within(package: str) -> dict[str, set[str]]:
    return {
        module: {dep for dep in deps if package_of(dep) == package}
        for module, deps in GRAPH.items()
        if package_of(module) == package
    }


def _imports_across(importer: str, imported: tuple[str, ...]) -> set[tuple[str, str]]:
    return {
        (module, dep)
        for module, deps in GRAPH.items()
        if package_of(module) == importer
        for dep in deps
        if package_of(dep) in imported
    }


def test_the_cycle_finder_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


# Engine modules that may "import kvstore" (the public API): the CLI, demo and
# doctor sit on top of it, like any user. No other module imports the package.
ENGINE_PACKAGE_IMPORTERS = {"kvstore.cli", "kvstore.demo", "kvstore.doctor"}


def test_no_import_cycles_among_engine_modules() -> None:
    graph = _within("kvstore")
    importers = sorted(name for name, deps in graph.items() if "kvstore" in deps and name != "kvstore")
    assert [name for name in importers if name not in ENGINE_PACKAGE_IMPORTERS] == []
    # The package __init__ re-exports everything: an edge into it is not a cycle of modules.
    cycle = find_cycle({name: deps - {"kvstore"} for name, deps in graph.items()})
    assert cycle is None, " -> ".join(cycle or [])


def test_no_import_cycles_among_client_modules() -> None:
    graph = _within("kvclient")
    assert "kvclient.transport" in graph
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_graph_counts_lazy_imports() -> None:
    # kvstore.cli imports service.cli only inside functions.
    assert "service.cli" in GRAPH["kvstore.cli"]
    # catalog.verify imports kvstore.verify only under TYPE_CHECKING; kvstore is in the graph too.
    assert "kvstore.verify" in GRAPH["catalog.verify"]


def test_no_import_cycles_among_catalog_modules() -> None:
    graph = _within("catalog")
    assert "catalog.durable.lake" in graph and "catalog.spark.control" in graph  # subpackages are in
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_no_import_cycles_among_service_modules() -> None:
    graph = _within("service")
    assert "service.iceberg.routes" in graph
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_kvstore_imports_nothing_from_catalog_or_service() -> None:
    upward = _imports_across("kvstore", ("catalog", "service"))
    assert sorted(upward - LAYERING_EXCEPTIONS.keys()) == []


def test_kvstore_imports_nothing_from_the_client() -> None:
    # No exception: kvstore.open reaches the client through entry points (kvstore/registry.py).
    assert "kvclient.remote" in GRAPH and "kvstore.registry" in GRAPH
    assert sorted(_imports_across("kvstore", ("kvclient",))) == []


def test_the_client_imports_only_the_engine() -> None:
    # Other imports (stdlib, third party) are not in the graph: only project packages are.
    assert "kvstore.batch" in GRAPH["kvclient.remote"]
    others = _imports_across("kvclient", tuple(p for p in PACKAGES if p not in ("kvclient", "kvstore")))
    assert sorted(others) == []


def test_the_service_may_import_the_client() -> None:
    # The server enforces the client's key bound (service.codec).
    assert ("service.codec", "kvclient") in _imports_across("service", ("kvclient",))


def test_catalog_imports_nothing_from_service() -> None:
    assert sorted(_imports_across("catalog", ("service",))) == []


def test_catalog_imports_nothing_from_the_client() -> None:
    assert sorted(_imports_across("catalog", ("kvclient",))) == []


def test_every_layering_exception_is_still_an_import() -> None:
    upward = _imports_across("kvstore", ("catalog", "service")) | _imports_across("catalog", ("service",))
    assert sorted(LAYERING_EXCEPTIONS.keys() - upward) == []


def test_no_import_cycles_across_the_packages() -> None:
    cycle = find_cycle(GRAPH)
    assert cycle is None, " -> ".join(cycle or [])



def _private_imports_across_packages(path: Path) -> list[str]:
    """``module: imported name`` for each underscore-prefixed module or name ``path`` imports from another package."""
    importer = module_name(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if package_of(target) not in PACKAGES or package_of(target) == package_of(importer):
                continue
            # Any private part: a module (kvstore._x), a subpackage, or the imported name itself.
            if any(part.startswith("_") and not part.startswith("__") for part in target.split(".")):
                found.append(f"{importer}: {target}")
    return found


# The engine's API for the packages above it: the package itself and these
# modules (docs/kv.md, docs/architecture.md). Its other modules are the
# engine's own parts.
ENGINE_API = {
    "kvstore", "kvstore.api", "kvstore.errors", "kvstore.store", "kvstore.txn", "kvstore.snapshot",
    "kvstore.batch", "kvstore.backoff", "kvstore.retrying", "kvstore.options", "kvstore.verify",
    "kvstore.watch", "kvstore.leases", "kvstore.cas", "kvstore.keyrange",
    "kvstore.objstore", "kvstore.objstore.base", "kvstore.objstore.factory", "kvstore.format.checksum",
}
# Imports of engine parts from above that remain, each with its reason. A new
# one fails the test until it is listed here or goes through ENGINE_API.
ENGINE_PARTS_USED_ABOVE: dict[tuple[str, str], str] = {
    ("service.kv_api", "kvstore.reader"): "visible_value: the watch stream decodes the raw rows it is handed",
    ("service.idempotency", "kvstore.reader"): "visible_value: idempotency records are read as raw rows",
    ("service.idempotency", "kvstore.format.rows"): "PUT, the row kind of a raw row",
    ("service.kv_api", "kvstore.freshness"): "check_consistency: validates ?consistency= as the store does",
    ("service.iceberg.routes", "kvstore.format.names"): "IDENTITY_PATH: the readiness probe heads the store's identity object",
    ("catalog.spark.control", "kvstore.format.names"): "IDENTITY_PATH: hello gives the store id a Spark JVM checks at the data root",
    ("kvclient.remote", "kvstore.format.rows"): "PUT, the row kind of a remote batch's mutations",
    ("kvclient.remote", "kvstore.freshness"): "check_consistency: the client validates consistency as the store does",
    ("kvclient.remote", "kvstore.oracle"): "ISOLATION_LEVELS: the client validates isolation as the store does",
}


def _engine_parts_imported_above() -> set[tuple[str, str]]:
    return {
        (module, dep)
        for module, deps in GRAPH.items()
        if package_of(module) in ("kvclient", "catalog", "service")
        for dep in deps
        if package_of(dep) == "kvstore" and dep not in ENGINE_API
    }


def test_packages_above_use_the_engine_s_api() -> None:
    assert sorted(_engine_parts_imported_above() - ENGINE_PARTS_USED_ABOVE.keys()) == []
    assert sorted(ENGINE_PARTS_USED_ABOVE.keys() - _engine_parts_imported_above()) == []  # none stale
    assert all(module in GRAPH for module in ENGINE_API)


def test_no_package_imports_a_private_name_of_another() -> None:
    found = [hit for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))
             for hit in _private_imports_across_packages(path)]
    assert found == []


def test_the_private_import_check_sees_every_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = (
        "import kvstore._hidden\n"
        "from kvstore._hidden import name\n"
        "from kvstore.batch import _helper, check_key\n"
        "def lazy():\n    from kvstore import _x\n"
        "from catalog import _own\n"  # same package: allowed
        "from kvstore import __version__\n"  # dunder: not private
    )
    package = tmp_path / "catalog"
    package.mkdir()
    (package / "probe.py").write_text(source)
    monkeypatch.setattr("import_graph.REPO", tmp_path)  # module_name() resolves against it
    assert _private_imports_across_packages(package / "probe.py") == [
        "catalog.probe: kvstore._hidden",
        "catalog.probe: kvstore._hidden.name",
        "catalog.probe: kvstore.batch._helper",
        "catalog.probe: kvstore._x",
    ]
