"""catalog/table.py: a ``Table`` through its public methods, on each kind of host.

A table loaded from the live lakehouse commits each write at once and
returns the new version; one loaded from ``lake.transaction()`` applies its
writes to the transaction (they return None and are seen outside only after
the commit); one loaded from ``lake.at(version=...)`` refuses every write.
The model test drives a random sequence of appends, overwrites and deletes
against a Python list.
"""

from __future__ import annotations

import contextlib
import itertools
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import catalog
from catalog import DataFile, ReadOnlyError, RetryableConflictError, SchemaMismatchError, Table
from catalog.errors import UnreadableMetadataError
from kvstore.errors import TransactionClosedError

from catalog_util import ORDERS, orders

INTS = pa.schema([("x", pa.int64())])
_names = itertools.count()


def ints(values: list[int]) -> pa.Table:
    return pa.table({"x": pa.array(values, pa.int64())}, schema=INTS)


def xs(table: Table, **scan: object) -> list[int]:
    """The table's ``x`` values, sorted (a scan has no row order)."""
    return sorted(table.scan(**scan).to_arrow().column("x").to_pylist())  # type: ignore[arg-type]


def paths(lake: catalog.Lakehouse, table: Table) -> set[str]:
    """The objects under the table's location in the lakehouse's object store."""
    return {meta.path for meta in lake.objects.list(table.location + "/")}


@pytest.fixture
def table(lake: catalog.Lakehouse) -> Table:
    lake.create_namespace("db")
    return lake.create_table("db.t", INTS)


# -- what a table is ------------------------------------------------------------------


def test_properties_describe_the_created_table(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("sales")
    created = lake.create_table("sales.orders", ORDERS, partition_by=["day"], properties={"owner": "ana"})
    loaded = lake.load_table("sales.orders")

    assert loaded.name == "sales.orders"
    assert loaded.namespace == ("sales",)
    assert loaded.short_name == "orders"
    assert loaded.id == created.id and len(loaded.id) == 32
    assert loaded.format == "parquet"
    assert loaded.location == f"data/{loaded.id}"
    assert loaded.schema.names == ["id", "day", "amount"]
    assert [f.metadata[b"field_id"] for f in loaded.schema] == [b"1", b"2", b"3"]
    assert loaded.partition_by == ["day"]
    assert loaded.properties == {"owner": "ana"}
    # A native table's Iceberg metadata is derived (catalog.iceberg_derived).
    assert loaded.metadata_location == f"{lake.url}/data/{loaded.id}/metadata/{2:020d}-{0:020d}.metadata.json"
    assert loaded.schema_version == created.schema_version
    assert repr(loaded) == f"Table('sales.orders', id={loaded.id}, format=parquet)"


def test_properties_is_a_copy(table: Table) -> None:
    props = table.properties
    props["x"] = "y"
    assert table.properties == {}


def test_id_and_location_survive_a_rename(lake: catalog.Lakehouse, table: Table) -> None:
    lake.rename_table("db.t", "db.renamed")
    renamed = lake.load_table("db.renamed")
    assert (renamed.id, renamed.location, renamed.name) == (table.id, table.location, "db.renamed")


def test_an_iceberg_table_is_read_from_its_metadata_and_takes_no_native_files(
    lake: catalog.Lakehouse, tmp_path: Path
) -> None:
    # Its rows go through pyiceberg (tests/catalog/test_iceberg_tables.py); here its metadata file is missing.
    lake.create_namespace("db")
    pointer = f"file://{tmp_path}/ice/metadata/00000-x.metadata.json"
    ice = lake.create_table("db.ice", format="iceberg", location=f"file://{tmp_path}/ice", metadata_location=pointer)
    assert (ice.format, ice.location, ice.metadata_location, ice.partition_by) == (
        "iceberg", f"file://{tmp_path}/ice", pointer, []
    )
    with pytest.raises(UnreadableMetadataError, match="db.ice.*cannot read Iceberg metadata"):
        ice.schema
    with pytest.raises(UnreadableMetadataError, match="db.ice"):
        ice.append(ints([1]))
    with pytest.raises(ValueError, match="native parquet tables"):
        ice.write_files(ints([1]))
    with pytest.raises(ValueError, match="native parquet tables"):
        ice.commit_files([])
    with pytest.raises(ValueError, match="native parquet tables"):
        ice.update_schema()


# -- append, overwrite, delete ---------------------------------------------------------


def test_append_commits_one_version_and_returns_it(lake: catalog.Lakehouse, table: Table) -> None:
    before = lake.version
    version = table.append(ints([1, 2, 3]))
    assert version == before + 1 == lake.version
    assert xs(table) == [1, 2, 3]
    assert table.append(ints([4])) == version + 1
    assert xs(lake.load_table("db.t")) == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "data",
    [
        pa.record_batch({"x": pa.array([1, 2], pa.int64())}),
        [pa.record_batch({"x": pa.array([1], pa.int64())}), pa.record_batch({"x": pa.array([2], pa.int64())})],
        pa.RecordBatchReader.from_batches(INTS, [pa.record_batch({"x": pa.array([1, 2], pa.int64())})]),
    ],
    ids=["batch", "list-of-batches", "reader"],
)
def test_append_takes_any_arrow_data(table: Table, data: object) -> None:
    table.append(data)
    assert xs(table) == [1, 2]


@pytest.mark.parametrize("data", [{"x": [1]}, [], [1, 2], "x"])
def test_append_of_non_arrow_data_is_a_type_error(table: Table, data: object) -> None:
    with pytest.raises(TypeError, match="pyarrow Table"):
        table.append(data)
    assert xs(table) == []


@pytest.mark.parametrize(
    "data",
    [
        pa.table({"y": pa.array([1], pa.int64())}),  # x missing
        pa.table({"x": pa.array([1], pa.int64()), "y": pa.array([1], pa.int64())}),  # extra column
        pa.table({"x": pa.array(["a"], pa.string())}),  # wrong type
    ],
    ids=["missing", "extra", "type"],
)
def test_data_not_fitting_the_schema_is_a_schema_mismatch(lake: catalog.Lakehouse, table: Table, data: pa.Table) -> None:
    before = lake.version
    with pytest.raises(SchemaMismatchError):
        table.append(data)
    with pytest.raises(SchemaMismatchError):
        table.overwrite(data)
    with pytest.raises(SchemaMismatchError):
        table.write_files(data)
    assert lake.version == before
    assert paths(lake, table) == set()


def test_overwrite_without_a_filter_replaces_every_row(lake: catalog.Lakehouse, table: Table) -> None:
    table.append(ints([1, 2]))
    table.append(ints([3]))
    version = table.overwrite(ints([7, 8]))
    assert version == lake.version
    assert xs(table) == [7, 8]
    assert lake.history(limit=1)[0].operations[0]["kind"] == "overwrite"


def test_overwrite_with_a_filter_replaces_only_matching_rows(table: Table) -> None:
    table.append(ints([1, 2, 3, 4]))
    table.overwrite(ints([30, 40]), filter=pc.field("x") >= 3)
    assert xs(table) == [1, 2, 30, 40]


def test_overwrite_refuses_new_rows_outside_its_filter(lake: catalog.Lakehouse, table: Table) -> None:
    table.append(ints([1, 5]))
    before = (lake.version, paths(lake, table))
    with pytest.raises(ValueError, match="1 new row"):
        table.overwrite(ints([6, 1]), filter=pc.field("x") > 4)
    assert (lake.version, paths(lake, table)) == before
    assert xs(table) == [1, 5]


def test_delete_removes_exactly_the_matching_rows(lake: catalog.Lakehouse, table: Table) -> None:
    table.append(ints([1, 2, 3]))
    table.append(ints([10, 11]))
    version = table.delete(pc.field("x") == 2)
    assert version == lake.version
    assert xs(table) == [1, 3, 10, 11]
    summary = lake.history(limit=1)[0].operations[0]
    # the file holding x=2 is rewritten without it: the summary counts the rows deleted
    assert (summary["kind"], summary["files_removed"], summary["files_added"]) == ("delete", 1, 1)
    assert (summary["rows_removed"], summary["rows_added"]) == (1, 0)


def test_delete_of_nothing_matching_leaves_the_rows(table: Table) -> None:
    table.append(ints([1, 2]))
    table.delete(pc.field("x") > 100)
    assert xs(table) == [1, 2]


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda t: t.delete(None), ValueError, "delete needs a filter"),
        (lambda t: t.delete("x > 1"), TypeError, "Expression"),
        (lambda t: t.delete(pc.field("nope") == 1), ValueError, "nope"),
        (lambda t: t.overwrite(ints([1]), filter="x == 1"), TypeError, "Expression"),
        (lambda t: t.overwrite(ints([1]), filter=pc.field("nope") == 1), ValueError, "nope"),
        (lambda t: t.files(filter=3), TypeError, "Expression"),
    ],
    ids=["delete-none", "delete-str", "delete-unknown-column", "overwrite-str", "overwrite-unknown-column", "files-int"],
)
def test_bad_filters_are_refused(lake: catalog.Lakehouse, table: Table, call, error, message) -> None:  # type: ignore[no-untyped-def]
    table.append(ints([1]))
    before = lake.version
    with pytest.raises(error, match=message):
        call(table)
    assert lake.version == before
    assert xs(table) == [1]


# -- write_files and commit_files --------------------------------------------------------


def test_write_files_commits_nothing_until_commit_files(lake: catalog.Lakehouse, table: Table) -> None:
    before = lake.version
    files = table.write_files(ints([1, 2, 3]))
    assert [type(f) for f in files] == [DataFile]
    assert sum(f.rows for f in files) == 3
    assert {f.path for f in files} <= paths(lake, table)
    assert all(f.path.startswith(table.location + "/") for f in files)
    assert lake.version == before and xs(table) == [] and table.files() == []

    version = table.commit_files(files)
    assert version == before + 1 == lake.version
    assert xs(table) == [1, 2, 3]
    assert [f.id for f in table.files()] == [f.id for f in files]


def test_commit_files_overwrite_with_a_filter(table: Table) -> None:
    table.append(ints([1, 2, 3]))
    files = table.write_files(ints([20]))
    table.commit_files(files, mode="overwrite", filter=pc.field("x") == 2)
    assert xs(table) == [1, 3, 20]


def test_commit_files_overwrite_without_a_filter(table: Table) -> None:
    table.append(ints([1, 2, 3]))
    table.commit_files(table.write_files(ints([9])), mode="overwrite")
    assert xs(table) == [9]


def test_commit_files_replace_swaps_exactly_the_replaced_files(table: Table) -> None:
    table.append(ints([1, 2]))
    table.append(ints([3, 4]))
    first, second = sorted(table.files(), key=lambda f: f.stats["1"][0])
    rewritten = table.write_files(ints([1, 200]))  # an UPDATE x=200 WHERE x=2, copy-on-write
    table.commit_files(rewritten, mode="replace", filter=pc.field("x") == 2, replaced=[first])
    assert xs(table) == [1, 3, 4, 200]
    assert {f.id for f in table.files()} == {second.id} | {f.id for f in rewritten}


def test_commit_files_replace_of_a_file_no_longer_live_is_retryable(lake: catalog.Lakehouse, table: Table) -> None:
    table.append(ints([1, 2]))
    [old] = table.files()
    table.overwrite(ints([5]))  # the file the rewrite read is gone
    before = lake.version
    with pytest.raises(RetryableConflictError, match="rewritten or removed"):
        table.commit_files(table.write_files(ints([1])), mode="replace", replaced=[old])
    assert lake.version == before
    assert xs(table) == [5]


def test_commit_files_read_files_refuses_a_file_committed_since_the_read(lake: catalog.Lakehouse, table: Table) -> None:
    table.append(ints([1, 2]))
    read = table.files()
    table.append(ints([3]))  # committed after the read
    new = table.write_files(ints([10, 20]))
    with pytest.raises(RetryableConflictError, match="committed after its input was read"):
        table.commit_files(new, mode="overwrite", read_files=read)
    assert xs(table) == [1, 2, 3]
    assert not {f.path for f in new} & paths(lake, table)  # the failed commit's files are deleted

    read = table.files()
    table.commit_files(table.write_files(ints([10, 20])), mode="overwrite", read_files=read)
    assert xs(table) == [10, 20]


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"added": "f"}, TypeError, "added"),
        ({"added": ["f"]}, TypeError, "added must be a list of DataFile"),
        ({"mode": "overwrite", "read_files": ["f"]}, TypeError, "read_files must be"),
        ({"mode": "replace", "replaced": [1]}, TypeError, "replaced must be"),
        ({"mode": "upsert"}, ValueError, "mode must be"),
        ({"mode": "append", "filter": pc.field("x") == 1}, ValueError, "filter only goes with"),
        ({"mode": "append", "read_files": []}, ValueError, "read_files only goes with"),
        ({"mode": "replace"}, ValueError, "replaced goes with mode='replace'"),
        ({"mode": "overwrite", "replaced": []}, ValueError, "replaced goes with mode='replace'"),
        ({"mode": "overwrite", "filter": pc.field("nope") == 1}, ValueError, "nope"),
    ],
)
def test_commit_files_refuses_bad_arguments(
    lake: catalog.Lakehouse, table: Table, kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    table.append(ints([1]))
    before = lake.version
    arguments = {"added": table.write_files(ints([2])), **kwargs}
    with pytest.raises(error, match=message):
        table.commit_files(**arguments)  # type: ignore[arg-type]
    assert lake.version == before
    assert xs(table) == [1]


# -- scans and files ---------------------------------------------------------------------


@pytest.fixture
def orders_table(lake: catalog.Lakehouse) -> Table:
    lake.create_namespace("sales")
    t = lake.create_table("sales.orders", ORDERS, partition_by=["day"])
    t.append(orders([1, 2], "mon", 1.5))
    t.append(orders([3], "tue", 2.5))
    t.append(orders([4, 5, 6], "wed", 3.5))
    return t


def test_scan_with_filter_columns_and_limit(orders_table: Table) -> None:
    rows = orders_table.scan(filter=pc.field("id") >= 3, columns=["id", "day"]).to_arrow()
    assert rows.schema.names == ["id", "day"]
    assert sorted(zip(rows.column("id").to_pylist(), rows.column("day").to_pylist())) == [
        (3, "tue"), (4, "wed"), (5, "wed"), (6, "wed")
    ]
    limited = orders_table.scan(filter=pc.field("day") == "wed", columns=["amount"], limit=2).to_arrow()
    assert limited.num_rows == 2 and limited.column("amount").to_pylist() == [3.5, 3.5]
    assert orders_table.scan().count() == 6
    assert orders_table.scan(limit=0).to_arrow().num_rows == 0
    assert orders_table.scan(limit=0).to_arrow().schema.names == ["id", "day", "amount"]
    assert orders_table.scan(limit=100).count() == 6


def test_scan_to_batches_holds_only_selected_columns(orders_table: Table) -> None:
    batches = list(orders_table.scan(columns=["day"], limit=4).to_batches())
    assert all(b.schema.names == ["day"] and b.num_rows > 0 for b in batches)
    assert sum(b.num_rows for b in batches) == 4


def test_files_are_pruned_by_filter(orders_table: Table) -> None:
    every = orders_table.files()
    assert len(every) == 3 and sum(f.rows for f in every) == 6
    [wed] = orders_table.files(filter=pc.field("day") == "wed")
    assert wed.rows == 3
    assert orders_table.files(filter=pc.field("id") > 100) == []
    scan = orders_table.scan(filter=pc.field("id") <= 2)
    assert [f.rows for f in scan.files()] == [2]
    assert scan.files() is scan.files()  # planned once


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"columns": ["nope"]}, ValueError, "no column 'nope'"),
        ({"columns": "id"}, TypeError, "columns"),
        ({"columns": [1]}, TypeError, "columns"),
        ({"limit": -1}, ValueError, "limit"),
        ({"limit": True}, TypeError, "limit"),
        ({"filter": "id > 1"}, TypeError, "Expression"),
        ({"filter": pc.field("nope") > 1}, ValueError, "nope"),
    ],
)
def test_scan_refuses_bad_arguments(orders_table: Table, kwargs: dict[str, object], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        orders_table.scan(**kwargs)  # type: ignore[arg-type]


def test_a_table_reads_its_host_view_not_its_load_time(lake: catalog.Lakehouse, table: Table) -> None:
    """A live table's definition is a snapshot, but its scans read the newest data."""
    other = lake.load_table("db.t")
    other.append(ints([1]))
    assert xs(table) == [1]


# -- properties and schema ---------------------------------------------------------------


def test_update_properties_sets_and_removes_in_one_commit(lake: catalog.Lakehouse, table: Table) -> None:
    assert table.update_properties({"a": "1", "b": "2"}) == lake.version
    version = table.update_properties({"c": "3"}, removals=["a"])
    assert version == lake.version
    assert lake.load_table("db.t").properties == {"b": "2", "c": "3"}
    assert table.properties == {}  # as of when it was loaded


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"updates": {"a": 1}}, TypeError),
        ({"updates": {"a": "1"}, "removals": ["a"]}, ValueError),
        ({"removals": "a"}, TypeError),
        ({"updates": {"": "1"}}, ValueError),
    ],
)
def test_update_properties_refuses_bad_arguments(
    lake: catalog.Lakehouse, table: Table, kwargs: dict[str, object], error: type
) -> None:
    before = lake.version
    with pytest.raises(error):
        table.update_properties(**kwargs)  # type: ignore[arg-type]
    assert lake.version == before


def test_update_schema_applies_every_step_in_one_commit(lake: catalog.Lakehouse, table: Table) -> None:
    table.append(ints([1, 2]))
    before = lake.version
    version = (
        table.update_schema()
        .add_column("y", pa.int32())
        .add_column("z", pa.string())
        .rename_column("x", "key")
        .widen("y", pa.int64())
        .drop_column("z")
        .set_comment("key", "the key")
        .commit()
    )
    assert version == before + 1 == lake.version
    loaded = lake.load_table("db.t")
    assert loaded.schema.names == ["key", "y"]
    assert loaded.schema.field("y").type == pa.int64()
    assert loaded.schema.field("key").metadata[b"field_id"] == b"1"  # a rename keeps the field id
    assert loaded.schema_version == table.schema_version + 1
    old = loaded.scan().to_arrow()
    assert sorted(old.column("key").to_pylist()) == [1, 2] and old.column("y").to_pylist() == [None, None]
    loaded.append(pa.table({"key": pa.array([3], pa.int64()), "y": pa.array([30], pa.int64())}))
    assert sorted(loaded.scan(columns=["y"]).to_arrow().column("y").to_pylist(), key=str) == [30, None, None]


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda b: b.add_column("x", pa.int64()), "x"),
        (lambda b: b.add_column("y", pa.int64(), nullable=False), "y"),
        (lambda b: b.rename_column("nope", "y"), "nope"),
        (lambda b: b.widen("x", pa.int32()), "x"),
        (lambda b: b.drop_column("x"), "x"),  # the last column
    ],
    ids=["add-existing", "add-required", "rename-missing", "narrow", "drop-last"],
)
def test_update_schema_refuses_a_change_that_cannot_apply(lake: catalog.Lakehouse, table: Table, build, message) -> None:  # type: ignore[no-untyped-def]
    before = lake.version
    builder = build(table.update_schema())
    with pytest.raises(ValueError, match=message):
        builder.commit()
    assert lake.version == before
    assert lake.load_table("db.t").schema.names == ["x"]


def test_update_schema_builder_checks_argument_types(table: Table) -> None:
    with pytest.raises(TypeError):
        table.update_schema().add_column("y", "int64")
    with pytest.raises(TypeError):
        table.update_schema().widen("x", int)
    with pytest.raises(ValueError):
        table.update_schema().add_column("", pa.int64())


# -- hosts: a past version, a transaction ------------------------------------------------


WRITES = {
    "append": lambda t: t.append(ints([9])),
    "overwrite": lambda t: t.overwrite(ints([9])),
    "overwrite-filter": lambda t: t.overwrite(ints([9]), filter=pc.field("x") > 5),
    "delete": lambda t: t.delete(pc.field("x") == 1),
    "write_files": lambda t: t.write_files(ints([9])),
    "commit_files": lambda t: t.commit_files([]),
    "update_properties": lambda t: t.update_properties({"k": "v"}),
    "update_schema": lambda t: t.update_schema().add_column("y", pa.int64()).commit(),
}


@pytest.mark.parametrize("write", sorted(set(WRITES) - {"overwrite", "overwrite-filter"}))
def test_a_table_of_a_past_version_refuses_every_write(lake: catalog.Lakehouse, table: Table, write: str) -> None:
    version = table.append(ints([1]))
    table.append(ints([2]))
    with lake.at(version=version) as past:
        old = past.load_table("db.t")
        assert xs(old) == [1]
        before = (lake.version, paths(lake, table))
        with pytest.raises(ReadOnlyError, match="read-only"):
            WRITES[write](old)
        assert (lake.version, paths(lake, table)) == before
        assert xs(old) == [1]
    assert xs(table) == [1, 2]


@pytest.mark.parametrize("write", sorted(set(WRITES) - {"overwrite", "overwrite-filter"}))
def test_a_table_of_an_ended_transaction_refuses_every_write(lake: catalog.Lakehouse, table: Table, write: str) -> None:
    table.append(ints([1]))
    with lake.transaction() as tx:
        inside = tx.load_table("db.t")
    before = (lake.version, paths(lake, table))
    with pytest.raises(TransactionClosedError, match="committed"):
        WRITES[write](inside)
    assert (lake.version, paths(lake, table)) == before
    with pytest.raises(TransactionClosedError):
        inside.scan().to_arrow()


@pytest.mark.parametrize("host", ["past", "ended-transaction"])
@pytest.mark.parametrize("write", ["overwrite", "overwrite-filter"])
def test_a_refused_overwrite_writes_no_files(lake: catalog.Lakehouse, table: Table, write: str, host: str) -> None:
    version = table.append(ints([1]))
    with contextlib.ExitStack() as stack:
        if host == "past":
            refusing = stack.enter_context(lake.at(version=version)).load_table("db.t")
            error: type[Exception] = ReadOnlyError
        else:
            with lake.transaction() as tx:
                refusing = tx.load_table("db.t")
            error = TransactionClosedError
        before = (lake.version, paths(lake, table))
        with pytest.raises(error):
            WRITES[write](refusing)
        assert (lake.version, paths(lake, table)) == before


def test_a_table_of_a_transaction_writes_into_it(lake: catalog.Lakehouse, table: Table) -> None:
    table.append(ints([1, 2]))
    before = lake.version
    with lake.transaction() as tx:
        inside = tx.load_table("db.t")
        assert inside.append(ints([3])) is None
        assert inside.delete(pc.field("x") == 1) is None
        assert inside.update_properties({"k": "v"}) is None
        assert inside.update_schema().add_column("y", pa.int64()).commit() is None
        assert inside.commit_files(inside.write_files(ints([4]))) is None
        assert xs(inside) == [2, 3, 4]
        assert tx.load_table("db.t").properties == {"k": "v"}
        assert tx.load_table("db.t").schema.names == ["x", "y"]
        # outside, nothing yet
        assert lake.version == before
        assert xs(lake.load_table("db.t")) == [1, 2]
        assert lake.load_table("db.t").properties == {}
    assert lake.version == before + 1 == tx.version
    after = lake.load_table("db.t")
    assert xs(after) == [2, 3, 4]
    assert after.properties == {"k": "v"} and after.schema.names == ["x", "y"]
    assert [op["kind"] for op in lake.history(limit=1)[0].operations] == [
        "append", "delete", "update_properties", "update_schema", "append"
    ]


def test_a_table_of_a_rolled_back_transaction_leaves_nothing(lake: catalog.Lakehouse, table: Table) -> None:
    before = lake.version
    with pytest.raises(KeyError):
        with lake.transaction() as tx:
            tx.load_table("db.t").append(ints([1]))
            raise KeyError("abandon")
    assert lake.version == before
    assert xs(table) == []
    assert paths(lake, table) == set()


# -- the model ---------------------------------------------------------------------------

small = st.integers(min_value=0, max_value=9)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(small, min_size=1, max_size=4)),
        st.tuples(st.just("overwrite"), st.lists(small, max_size=3), st.none()),
        st.tuples(st.just("overwrite"), st.lists(small, max_size=3), small),  # filter x < k, new rows below k
        st.tuples(st.just("delete"), small),  # x == k
        st.tuples(st.just("delete_below"), small),  # x < k
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps)
def test_data_operations_match_a_list_model(steps: list[tuple]) -> None:  # type: ignore[type-arg]
    with catalog.open(f"memory://test-table-model-{next(_names)}", poll_interval_s=0) as lake:
        lake.create_namespace("m")
        t = lake.create_table("m.t", INTS)
        model: list[int] = []
        version = lake.version
        for step in steps:
            kind = step[0]
            before = sorted(model)
            if kind == "append":
                result = t.append(ints(step[1]))
                model += step[1]
            elif kind == "overwrite" and step[2] is None:
                result = t.overwrite(ints(step[1]))
                model = list(step[1])
            elif kind == "overwrite":
                k = step[2]
                new = [v for v in step[1] if v < k]
                result = t.overwrite(ints(new), filter=pc.field("x") < k)
                model = [v for v in model if v >= k] + new
            elif kind == "delete":
                result = t.delete(pc.field("x") == step[1])
                model = [v for v in model if v != step[1]]
            else:
                result = t.delete(pc.field("x") < step[1])
                model = [v for v in model if v >= step[1]]
            # each write is one commit; one that changes nothing (deleting no row) may commit none
            assert result == lake.version
            assert result == version + 1 if sorted(model) != before else version <= result <= version + 1
            version = lake.version
            assert xs(t) == sorted(model)
            assert sum(f.rows for f in t.files()) == len(model)
