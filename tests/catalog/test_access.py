"""catalog/access.py: ``CatalogReader`` and ``CatalogWriter`` over one lakekv view.

A reader is built here on the lakehouse's own store, over a snapshot (the
newest or a past version) or an open transaction; the catalog is made
through the lakehouse's public methods. A writer records the caller's reads
(``recorded``) so that ``reads_unchanged`` can tell, on a newer view, whether
any of them would now return something else.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import catalog
from catalog import keys
from catalog.access import CatalogReader, CatalogWriter
from catalog.errors import NoSuchNamespaceError, NoSuchTableError, NoSuchViewError

INTS = pa.schema([("x", pa.int64())])


def ints(values: list[int]) -> pa.Table:
    return pa.table({"x": pa.array(values, pa.int64())}, schema=INTS)


@pytest.fixture
def built(lake: catalog.Lakehouse) -> catalog.Lakehouse:
    lake.create_namespace("a", properties={"owner": "ana", "tier": "gold"})
    lake.create_namespace("a.b.c", parents=True)
    lake.create_namespace("a2")
    lake.create_namespace("ab")
    t = lake.create_table("a.t", INTS, properties={"p": "1"})
    t.append(ints([1, 2]))
    t.append(ints([3]))
    lake.create_table("a.b.u", INTS)
    lake.create_view("a.v", "select 1", properties={"k": "v"})
    return lake


@pytest.fixture
def reader(built: catalog.Lakehouse) -> Iterator[CatalogReader]:
    with built.store.snapshot() as snapshot:
        yield CatalogReader(snapshot)


# -- namespaces ----------------------------------------------------------------------------


def test_namespace_and_require_namespace(reader: CatalogReader) -> None:
    record = reader.require_namespace(("a", "b"))
    assert record == reader.namespace(("a", "b"))
    assert record.created_ms > 0
    assert reader.namespace(("nope",)) is None
    with pytest.raises(NoSuchNamespaceError, match="'a.nope'"):
        reader.require_namespace(("a", "nope"))


def test_child_namespaces_direct_and_recursive(reader: CatalogReader) -> None:
    assert reader.child_namespaces(()) == [("a",), ("a2",), ("ab",)]
    assert reader.child_namespaces(("a",)) == [("a", "b")]  # not a2 or ab, which share its first letter
    assert reader.child_namespaces(("a",), recursive=True) == [("a", "b"), ("a", "b", "c")]
    assert reader.child_namespaces((), recursive=True) == [("a",), ("a", "b"), ("a", "b", "c"), ("a2",), ("ab",)]
    assert reader.child_namespaces(("a", "b", "c")) == []
    assert reader.child_namespaces(("missing",)) == []


def test_namespace_properties(reader: CatalogReader) -> None:
    assert reader.namespace_properties(("a",)) == {"owner": "ana", "tier": "gold"}
    assert reader.namespace_properties(("a2",)) == {}
    assert reader.namespace_properties(("missing",)) == {}


# -- tables and views ----------------------------------------------------------------------


def test_require_table_returns_its_pointer_and_definition(built: catalog.Lakehouse, reader: CatalogReader) -> None:
    table = built.load_table("a.t")
    pointer, definition = reader.require_table(("a",), "t")
    assert (pointer.kind, pointer.id) == ("table", table.id)
    assert (definition.id, definition.format, definition.location) == (table.id, "parquet", f"data/{table.id}")
    assert definition.schema is not None and definition.schema.names == ["x"]
    assert reader.pointer(("a",), "t") == pointer
    assert reader.table_def(table.id) == definition


@pytest.mark.parametrize(
    "ns, name, message",
    [
        (("a",), "nope", r"^table 'a.nope' does not exist$"),
        (("a",), "v", r"^table 'a.v' does not exist$"),  # a view
        (("zz",), "t", r"no namespace 'zz'"),
    ],
    ids=["absent", "a-view", "no-namespace"],
)
def test_require_table_of_no_table(reader: CatalogReader, ns: tuple[str, ...], name: str, message: str) -> None:
    with pytest.raises(NoSuchTableError, match=message):
        reader.require_table(ns, name)


def test_require_table_whose_definition_is_gone(built: catalog.Lakehouse) -> None:
    table_id = built.load_table("a.t").id
    txn = built.store.begin()
    try:
        writer = CatalogWriter(txn)
        writer.delete(keys.table_def(table_id))
        assert writer.table_def(table_id) is None
        with pytest.raises(NoSuchTableError, match="'a.t' does not exist"):
            writer.require_table(("a",), "t")
    finally:
        txn.rollback()
    assert built.table_exists("a.t")


def test_require_view(reader: CatalogReader) -> None:
    pointer = reader.require_view(("a",), "v")
    assert pointer.kind == "view" and pointer.view is not None
    assert (pointer.view.sql, pointer.view.dialect, pointer.view.properties) == ("select 1", "spark", {"k": "v"})
    with pytest.raises(NoSuchViewError, match="'a.t'"):
        reader.require_view(("a",), "t")  # a table
    with pytest.raises(NoSuchViewError, match="'a.nope'"):
        reader.require_view(("a",), "nope")
    assert reader.pointer(("a",), "nope") is None


def test_table_properties_and_unknown_ids(built: catalog.Lakehouse, reader: CatalogReader) -> None:
    table_id = built.load_table("a.t").id
    assert reader.table_properties(table_id) == {"p": "1"}
    assert reader.table_properties("0" * 32) == {}
    assert reader.table_def("0" * 32) is None
    assert reader.live_files("0" * 32) == []


def test_live_files_are_the_table_s_files(built: catalog.Lakehouse, reader: CatalogReader) -> None:
    table = built.load_table("a.t")
    live = reader.live_files(table.id)
    assert sorted(f.id for f in live) == sorted(f.id for f in table.files())
    assert sorted(f.rows for f in live) == [1, 2]
    assert reader.gone_files(table.id) == []


def test_live_and_gone_files_after_a_rewrite(built: catalog.Lakehouse) -> None:
    table = built.load_table("a.t")
    before = {f.id for f in table.files()}
    table.delete(pc.field("x") == 1)
    with built.store.snapshot() as snapshot:
        reader = CatalogReader(snapshot)
        live = {f.id for f in reader.live_files(table.id)}
        gone = reader.gone_files(table.id)
    assert len(live) == 2 and len(live & before) == 1  # the file holding x=1 was rewritten
    [removed] = before - live
    assert [key for key, _ in gone] == [keys.table_gone_file(table.id, removed)]
    assert isinstance(gone[0][1], dict)


def test_a_reader_over_a_past_snapshot_sees_the_past(built: catalog.Lakehouse) -> None:
    version = built.version
    table_id = built.load_table("a.t").id
    built.drop_table("a.t")
    built.drop_namespace("a2")
    with built.store.at(version=version) as snapshot:
        past = CatalogReader(snapshot)
        assert past.require_table(("a",), "t")[0].id == table_id
        assert ("a2",) in past.child_namespaces(())
        assert len(past.live_files(table_id)) == 2
    with built.store.snapshot() as snapshot:
        now = CatalogReader(snapshot)
        with pytest.raises(NoSuchTableError):
            now.require_table(("a",), "t")
        assert ("a2",) not in now.child_namespaces(())


# -- the writer ----------------------------------------------------------------------------


def test_a_writer_sees_its_writes_and_nothing_leaves_before_commit(built: catalog.Lakehouse) -> None:
    table_id = built.load_table("a.t").id
    txn = built.store.begin()
    writer = CatalogWriter(txn)
    writer.put(keys.table_property(table_id, "q"), b"2")
    writer.delete(keys.table_property(table_id, "p"))
    assert writer.table_properties(table_id) == {"q": "2"}
    assert built.load_table("a.t").properties == {"p": "1"}
    txn.commit()
    assert built.load_table("a.t").properties == {"q": "2"}


def test_reads_are_recorded_only_when_asked(built: catalog.Lakehouse) -> None:
    txn = built.store.begin()
    try:
        writer = CatalogWriter(txn)
        assert writer.recorded is None
        writer.namespace(("a",))
        assert writer.recorded is None
        writer.recorded = []
        writer.namespace(("a",))
        writer.namespace_properties(("a",))
        writer.child_namespaces(())
        assert [(kind, key) for kind, key, _ in writer.recorded] == [
            ("get", keys.namespace(("a",))),
            ("scan", keys.namespace_properties(("a",))),
            ("scan", keys.namespace_children(())),
        ]
        assert all(len(digest) == 16 for _, _, digest in writer.recorded)
    finally:
        txn.rollback()


def recorded_reads(lake: catalog.Lakehouse, table_id: str) -> list[tuple[str, bytes, bytes]]:
    """A writer's record of reading namespace ``a``, its tables and table ``a.t``'s files and properties."""
    txn = lake.store.begin()
    try:
        writer = CatalogWriter(txn)
        writer.recorded = []
        writer.require_namespace(("a",))
        writer.require_table(("a",), "t")
        writer.live_files(table_id)
        writer.table_properties(table_id)
        writer.namespace(("later",))  # absent: its absence is recorded too
        return writer.recorded
    finally:
        txn.rollback()


def unchanged(lake: catalog.Lakehouse, recorded: list[tuple[str, bytes, bytes]]) -> bool:
    txn = lake.store.begin()
    try:
        writer = CatalogWriter(txn)
        result = writer.reads_unchanged(recorded)
        assert writer.recorded is None  # repeating them records nothing
        return result
    finally:
        txn.rollback()


def test_reads_unchanged_when_nothing_they_read_changed(built: catalog.Lakehouse) -> None:
    table_id = built.load_table("a.t").id
    recorded = recorded_reads(built, table_id)
    assert unchanged(built, recorded)
    built.load_table("a.b.u").append(ints([5]))  # another table
    built.update_namespace_properties("a2", {"k": "v"})  # another namespace
    assert unchanged(built, recorded)
    assert unchanged(built, [])


@pytest.mark.parametrize(
    "change",
    [
        lambda lake: lake.load_table("a.t").append(ints([4])),
        lambda lake: lake.load_table("a.t").update_properties({"p": "2"}),
        lambda lake: lake.load_table("a.t").update_schema().add_column("y", pa.int64()).commit(),
        lambda lake: lake.create_namespace("later"),
        lambda lake: lake.drop_table("a.t"),
    ],
    ids=["files", "properties", "definition", "absent-key-now-present", "dropped"],
)
def test_reads_changed_when_something_they_read_changed(built: catalog.Lakehouse, change) -> None:  # type: ignore[no-untyped-def]
    recorded = recorded_reads(built, built.load_table("a.t").id)
    change(built)
    assert not unchanged(built, recorded)


def test_reads_unchanged_keeps_the_reader_s_own_record(built: catalog.Lakehouse) -> None:
    recorded = recorded_reads(built, built.load_table("a.t").id)
    txn = built.store.begin()
    try:
        writer = CatalogWriter(txn)
        writer.recorded = []
        writer.namespace(("a",))
        mine = list(writer.recorded)
        assert writer.reads_unchanged(recorded)
        assert writer.recorded == mine
    finally:
        txn.rollback()


def test_live_files_read_the_same_recorded_or_not(built: catalog.Lakehouse) -> None:
    table_id = built.load_table("a.t").id
    with built.store.snapshot() as snapshot:
        plain = CatalogReader(snapshot).live_files(table_id)
        recording = CatalogReader(snapshot)
        recording.recorded = []
        assert recording.live_files(table_id) == plain
        assert [kind for kind, _, _ in recording.recorded] == ["scan"]
