"""The Iceberg table location index: maintained by create/drop/rename, read in a few keys, racing overlaps conflict."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import catalog
from catalog import keys, table_locations
from kvstore.errors import ConflictError
from location_index_util import forget_index

_names = itertools.count()


def _open(url: str | None = None) -> catalog.Lakehouse:
    return catalog.open(url or f"memory://table-locations-{next(_names)}", poll_interval_s=0)


def _create(lake: Any, name: str, location: str) -> None:
    lake.create_table(name, format="iceberg", location=location, metadata_location=f"{location}/metadata/v1.json")


def _linear(lake: catalog.Lakehouse, location: str) -> dict[str, str]:
    """The old rule, table by table: every Iceberg table whose normalized location overlaps ``location``."""
    out = {}
    for ns in lake.list_namespaces(recursive=True):
        for name in lake.list_tables(ns):
            table = lake.load_table(name)
            if table.format != "iceberg" or not table.location:
                continue
            try:
                theirs = table_locations.normalize(table.location)
            except ValueError:  # never indexed, so the linear rule skips it too
                continue
            if table_locations.under(location, theirs) or table_locations.under(theirs, location):
                out[name] = theirs
    return out


def _indexed(lake: catalog.Lakehouse, location: str) -> dict[str, str]:
    with lake.tree.host.reading() as reader:
        return table_locations.overlapping(reader.kv, location)


# Locations drawn from a small tree so that overlaps are frequent; some spelled
# differently (s3a, trailing slash, percent-encoded) or not normalizable at all.
_SEGMENT = st.sampled_from(["a", "b", "ab"])
_PATH = st.lists(_SEGMENT, min_size=0, max_size=3).map("/".join)
_SPELLING = st.sampled_from(["s3://bkt/{}", "s3a://BKT/{}/", "s3://bkt/.//{}", "file:///w/{}"])
_LOCATION = st.one_of(
    st.builds(lambda spelling, path: spelling.format(path), _SPELLING, _PATH),
    st.sampled_from(["relative/a", "s3://bkt/a/../b"]),
)
_TABLE = st.sampled_from(["n1.t1", "n1.t2", "n2.t3", "n2.t4", "n1.t5"])
_STEP = st.one_of(
    st.tuples(st.just("create"), _TABLE, _LOCATION),
    st.tuples(st.just("create"), _TABLE, _LOCATION),
    st.tuples(st.just("drop"), _TABLE),
    st.tuples(st.just("rename"), _TABLE, _TABLE),
    st.tuples(st.just("drop_ns"), st.sampled_from(["n1", "n2"])),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_STEP, min_size=1, max_size=12), queries=st.lists(_LOCATION, min_size=1, max_size=4))
def test_index_answers_as_listing_every_table(steps: list[tuple[Any, ...]], queries: list[str]) -> None:
    """After any creates, drops, renames and cascading namespace drops, the index finds exactly the
    tables a read of every table finds, and a create is refused exactly when that read says it overlaps."""
    with _open() as lake:
        for step in steps:
            kind, *args = step
            if kind == "create":
                name, location = args
                ns = name.rsplit(".", 1)[0]
                if not lake.namespace_exists(ns):
                    lake.create_namespace(ns)
                if lake.table_exists(name):
                    continue
                try:
                    uri = table_locations.normalize(location)
                except ValueError:
                    uri = None
                clash = _linear(lake, uri) if uri is not None else {}
                if clash:
                    with pytest.raises(ValueError, match=f"overlaps the location of table {min(clash)} "):
                        _create(lake, name, location)
                    assert not lake.table_exists(name)
                else:
                    _create(lake, name, location)
            elif kind == "drop" and lake.table_exists(args[0]):
                lake.drop_table(args[0])
            elif kind == "rename" and lake.table_exists(args[0]) and not lake.table_exists(args[1]):
                if not lake.namespace_exists(args[1].rsplit(".", 1)[0]):
                    lake.create_namespace(args[1].rsplit(".", 1)[0])
                lake.rename_table(args[0], args[1])
            elif kind == "drop_ns" and lake.namespace_exists(args[0]):
                lake.drop_namespace(args[0], cascade=True)
        for query in [*queries, "s3://bkt/", "file:///"]:
            try:
                uri = table_locations.normalize(query)
            except ValueError:  # refused before any lookup: nothing to compare
                continue
            assert _indexed(lake, uri) == _linear(lake, uri)


class _CountingReader:
    """A KV reader that counts the keys it returns (gets and scanned rows) and the reads made."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reads = 0
        self.keys = 0

    def get(self, key: bytes) -> bytes | None:
        self.reads += 1
        value: bytes | None = self.inner.get(key)
        self.keys += value is not None
        return value

    def scan(self, *args: Any, **kwargs: Any) -> Iterator[tuple[bytes, bytes]]:
        self.reads += 1
        for row in self.inner.scan(*args, **kwargs):
            self.keys += 1
            yield row


def _lake_with_tables(count: int) -> catalog.Lakehouse:
    lake = _open()
    lake.create_namespace("ns")
    with lake.transaction() as tx:
        for i in range(count):
            _create(tx, f"ns.t{i}", f"s3://bkt/wh/ns/t{i}")
    return lake


def test_a_check_reads_as_many_keys_at_1000_tables_as_at_10() -> None:
    counts = []
    for tables in (10, 1000):
        with _lake_with_tables(tables) as lake:
            with lake.tree.host.reading() as reader:
                counting = _CountingReader(reader.kv)
                assert table_locations.overlapping(counting, "s3://bkt/wh/ns/new") == {}
                assert table_locations.overlapping(counting, "s3://bkt/wh/ns/t5/sub") == {"ns.t5": "s3://bkt/wh/ns/t5"}
            counts.append((counting.reads, counting.keys))
    assert counts[0] == counts[1]
    assert counts[0][1] == 1  # only the one overlapping table's entry was read


def test_racing_creates_of_overlapping_locations_conflict(tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    with _open(url) as first, _open(url) as second:
        first.create_namespace("ns")
        second.refresh()
        with pytest.raises(ConflictError):
            with first.transaction() as tx:
                _create(tx, "ns.outer", "s3://bkt/wh/outer")
                _create(second, "ns.inner", "s3://bkt/wh/outer/inner")  # commits while tx is open
        first.refresh()
        assert not first.table_exists("ns.outer") and first.table_exists("ns.inner")


def test_racing_creates_of_separate_locations_both_commit(tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    with _open(url) as first, _open(url) as second:
        first.create_namespace("ns")
        second.refresh()
        with first.transaction() as tx:
            _create(tx, "ns.left", "s3://bkt/wh/left")
            _create(second, "ns.right", "s3://bkt/wh/right")
        first.refresh()
        assert first.table_exists("ns.left") and first.table_exists("ns.right")


def test_build_indexes_an_older_lakehouse_once() -> None:
    with _lake_with_tables(3) as lake:
        forget_index(lake)
        with lake.tree.host.reading() as reader:
            assert not table_locations.complete(reader.kv)
            assert table_locations.overlapping(reader.kv, "s3://bkt/wh/ns") == {}
        table_locations.build(lake.store)
        lake.refresh()
        with lake.tree.host.reading() as reader:
            assert table_locations.complete(reader.kv)
            assert table_locations.overlapping(reader.kv, "s3://bkt/wh/ns") == _linear(lake, "s3://bkt/wh/ns")
            assert len(table_locations.overlapping(reader.kv, "s3://bkt/wh/ns")) == 3
        version = lake.version
        table_locations.build(lake.store)  # marked: nothing to do, nothing committed
        assert lake.refresh() == version
