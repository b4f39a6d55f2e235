"""Import structure of the lakehouse and the service, and the layering between packages (issue 24).

* No import cycles among catalog modules (``catalog/``, its ``durable/`` and
  ``spark/`` subpackages, and the package ``__init__`` itself), none among
  service modules: every import counts, lazy ones inside functions and
  ``TYPE_CHECKING`` ones too (tests/import_graph.py).
* Layers (docs/architecture.md): the engine imports nothing from the catalog
  or the service, the catalog nothing from the service; the one named
  exception below is checked to still exist, so it cannot go stale.

(This file is not named test_structure.py: tests/ has no ``__init__.py``, so
two test files of one name, this and tests/kvstore/test_structure.py, cannot
be collected in one pytest run.)
"""

from __future__ import annotations

from import_graph import find_cycle, import_graph, package_of

PACKAGES = ("kvstore", "catalog", "service")
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


def test_catalog_imports_nothing_from_service() -> None:
    assert sorted(_imports_across("catalog", ("service",))) == []


def test_every_layering_exception_is_still_an_import() -> None:
    upward = _imports_across("kvstore", ("catalog", "service")) | _imports_across("catalog", ("service",))
    assert sorted(LAYERING_EXCEPTIONS.keys() - upward) == []


def test_no_import_cycles_across_the_packages() -> None:
    cycle = find_cycle(GRAPH)
    assert cycle is None, " -> ".join(cycle or [])
