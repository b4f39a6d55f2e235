"""tables.check_location: the overlap check through the location index answers as reading every table did."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

import catalog
from catalog import table_locations
from catalog.access import CatalogReader
from service.errors import ApiError
from service.iceberg import tables
from service.iceberg.warehouse import Warehouse
from location_index_util import forget_index

_names = itertools.count()
ROOT = "s3://bkt/wh"
EXISTING = {
    "ns.a": f"{ROOT}/ns/a",
    "ns.ab": f"{ROOT}/ns/ab",
    "ns.deep": f"{ROOT}/ns/x/y/deep",
    "other.c": f"s3a://BKT/wh/other/c/",
    "other.legacy": "relative/legacy",  # from before confinement: never overlaps
}
QUERIES = [
    f"{ROOT}/ns/a", f"{ROOT}/ns/a/sub", f"{ROOT}/ns", f"{ROOT}/ns/b", f"{ROOT}/ns/x", f"{ROOT}/ns/x/y/deep/z",
    f"{ROOT}/other/c", f"{ROOT}/other", f"{ROOT}/relative/legacy", f"{ROOT}/ns/%61/x", ROOT, "s3://bkt/elsewhere",
]


def _answer(check: Callable[[], str]) -> str:
    try:
        return check()
    except ApiError as exc:
        return f"{exc.status} {exc.message}"


@pytest.fixture
def lake() -> Iterator[catalog.Lakehouse]:
    with catalog.open(f"memory://location-checks-{next(_names)}", poll_interval_s=0) as lake:
        lake.create_namespace("ns")
        lake.create_namespace("other")
        for name, location in EXISTING.items():
            lake.create_table(name, format="iceberg", location=location, metadata_location=f"{location}/m.json")
        yield lake


@pytest.mark.parametrize("indexed", [True, False], ids=["indexed", "older-lakehouse"])
def test_answers_as_the_table_by_table_rule(lake: catalog.Lakehouse, indexed: bool) -> None:
    if not indexed:
        forget_index(lake)
    warehouse = Warehouse(ROOT)
    for query, name in itertools.product(QUERIES, ["ns.a", "ns.new", "other.c"]):
        old = _answer(lambda: warehouse.check_table_location(query, tables.other_locations(lake, name), "location"))
        new = _answer(lambda: tables.check_location(lake, warehouse, query, name, "location"))
        assert new == old, (query, name)
    with lake.tree.host.reading() as reader:  # an older lakehouse's index was built by the first check
        assert table_locations.complete(reader.kv)


def test_a_transaction_older_than_the_index_reads_every_table(lake: catalog.Lakehouse) -> None:
    forget_index(lake)
    warehouse = Warehouse(ROOT)
    with lake.transaction() as tx:
        with pytest.raises(ApiError, match="overlaps the location of table ns.a"):
            tables.check_location(tx, warehouse, f"{ROOT}/ns/a/x", "ns.new", "location")
        assert tables.check_location(tx, warehouse, f"{ROOT}/ns/b", "ns.new", "location") == f"{ROOT}/ns/b"
    with lake.tree.host.reading() as reader:  # built by the first check, for the transactions after this one
        assert table_locations.complete(reader.kv)


class _ListingForbidden:
    """A lakehouse seen only through its catalog reads: listing or loading tables is an AttributeError."""

    def __init__(self, lake: catalog.Lakehouse) -> None:
        self.tree = self
        self.host = self
        self._lake = lake

    @contextmanager
    def reading(self) -> Iterator[CatalogReader]:
        with self._lake.tree.host.reading() as reader:
            yield reader


def test_an_indexed_check_lists_no_table(lake: catalog.Lakehouse) -> None:
    warehouse = Warehouse(ROOT)
    tables.check_location(lake, warehouse, f"{ROOT}/ns/b", "ns.new", "location")  # the first check builds the index
    view = _ListingForbidden(lake)
    assert tables.check_location(view, warehouse, f"{ROOT}/ns/b", "ns.new", "location") == f"{ROOT}/ns/b"
    with pytest.raises(ApiError, match="overlaps the location of table ns.deep"):
        tables.check_location(view, warehouse, f"{ROOT}/ns/x", "ns.new", "location")
