"""The catalog's layers (docs/architecture.md, "Lakehouse layout"): each module imports only its own layer and those below.

Every import counts, lazy and ``TYPE_CHECKING`` ones too (tests/import_graph.py).
With this, a call from a lower layer into a higher one can only go through
an object handed down (a :class:`catalog.table.TableHost`), never through an
import or a hook registered by the layer above.
"""

from __future__ import annotations

from import_graph import import_graph

# Lowest first. A module not listed fails the test, so a new module gets a place.
LAYERS: list[tuple[str, set[str]]] = [
    ("records", {
        "catalog.errors", "catalog.names", "catalog.paging", "catalog.keys", "catalog.records", "catalog.schema", "catalog.predicates", "catalog.lazy_module",
        "catalog.arguments", "catalog.conflicts", "catalog.datafiles", "catalog.opcodec", "catalog.planning",
        "catalog.access", "catalog.file_index", "catalog.file_columns", "catalog.table_locations", "catalog.freshness", "catalog.context", "catalog.retention", "catalog.iceberg_derived", "catalog.durable.errors", "catalog.durable.records", "catalog.durable.keys",
    }),
    ("operations and the durable protocol", {
        "catalog.ops", "catalog.durable", "catalog.durable.compat", "catalog.durable.work",
        "catalog.durable.implicit", "catalog.durable.locks", "catalog.durable.lifecycle", "catalog.durable.checks",
        "catalog.durable.manager", "catalog.durable.guard",
    }),
    ("transactions", {"catalog.transactions"}),
    ("tables and the tree", {"catalog.table", "catalog.tree", "catalog.iceberg_tables"}),
    ("sessions and parts", {
        "catalog.timetravel", "catalog.durable.session", "catalog.durable.lake", "catalog.maintenance", "catalog.verify",
        "catalog.iceberg_export", "catalog.changes", "catalog.import_files", "catalog.rollback", "catalog.rewrite",
        "catalog.expiry",
    }),
    ("facade and commands", {"catalog", "catalog.lakehouse", "catalog.cli", "catalog.durable.cli"}),
]
SPARK = "catalog.spark"  # the Spark integration sits on top and is checked as one layer

GRAPH = import_graph("catalog")


def _layer_of(module: str) -> int:
    if module == SPARK or module.startswith(SPARK + "."):
        return len(LAYERS)
    for index, (_, modules) in enumerate(LAYERS):
        if module in modules:
            return index
    raise AssertionError(f"{module} has no layer in LAYERS")


def test_every_catalog_module_has_a_layer() -> None:
    unplaced = []
    for module in GRAPH:
        try:
            _layer_of(module)
        except AssertionError:
            unplaced.append(module)
    assert unplaced == []
    listed = set().union(*(modules for _, modules in LAYERS))
    assert sorted(listed - GRAPH.keys()) == []  # no stale entries


def test_imports_go_down_the_layers_only() -> None:
    upward = [
        f"{module} ({LAYERS[_layer_of(module)][0]}) imports {dep} ({LAYERS[_layer_of(dep)][0]})"
        for module, deps in GRAPH.items()
        for dep in deps
        if dep.startswith("catalog") and _layer_of(dep) > _layer_of(module)
    ]
    assert upward == []


def test_the_context_imports_no_other_catalog_module() -> None:
    assert sorted(dep for dep in GRAPH["catalog.context"] if dep.startswith("catalog")) == []


def test_the_check_sees_an_upward_import() -> None:
    # The table layer must not import the sessions: if it did, this is what the test would report.
    assert _layer_of("catalog.table") < _layer_of("catalog.timetravel")
    assert "catalog.tree" in GRAPH["catalog.timetravel"]  # and the graph has the real edges
