"""The public catalog API: namespaces, tables, views, transactions, time travel."""

import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import catalog
import kvstore
from catalog import errors
from kvstore.objstore import MemoryStore
from kvstore.errors import TransactionClosedError

from catalog_util import ORDERS, orders


def test_namespaces(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("sales", properties={"owner": "bi"})
    lake.create_namespace("sales.eu")
    lake.create_namespace("a.b.c", parents=True)
    assert lake.list_namespaces() == ["a", "sales"]
    assert lake.list_namespaces("sales") == ["sales.eu"]
    assert lake.list_namespaces("a", recursive=True) == ["a.b", "a.b.c"]
    assert lake.namespace_exists("sales.eu") and not lake.namespace_exists("sales.us")
    assert lake.namespace_properties("sales") == {"owner": "bi"}
    lake.update_namespace_properties("sales", updates={"tier": "gold"}, removals=["owner"])
    assert lake.namespace_properties("sales") == {"tier": "gold"}
    with pytest.raises(errors.NamespaceAlreadyExistsError):
        lake.create_namespace("sales")
    with pytest.raises(errors.NoSuchNamespaceError, match="parents=True"):
        lake.create_namespace("x.y")
    with pytest.raises(errors.NoSuchNamespaceError):
        lake.namespace_properties("nope")
    with pytest.raises(errors.NamespaceNotEmptyError, match="sales.eu"):
        lake.drop_namespace("sales")
    lake.drop_namespace("sales", cascade=True)
    assert lake.list_namespaces() == ["a"]


def test_tables_crud_and_errors(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("s")
    t = lake.create_table("s.orders", ORDERS, partition_by=["day"], properties={"k": "v"})
    assert t.name == "s.orders" and t.partition_by == ["day"] and t.properties == {"k": "v"}
    assert lake.list_tables("s") == ["s.orders"] and lake.table_exists("s.orders")
    with pytest.raises(errors.TableAlreadyExistsError):
        lake.create_table("s.orders", ORDERS)
    with pytest.raises(errors.NoSuchNamespaceError):
        lake.create_table("nope.t", ORDERS)
    with pytest.raises(errors.NoSuchTableError):
        lake.load_table("s.missing")
    with pytest.raises(ValueError, match="partition_by: no column 'zzz'"):
        lake.create_table("s.t2", ORDERS, partition_by=["zzz"])
    with pytest.raises(ValueError, match="part 2"):
        lake.create_table("s./etc", ORDERS)
    with pytest.raises(TypeError):
        lake.create_table("s.t3", {"a": int})
    t.append(orders([1, 2]))
    lake.create_namespace("archive")
    lake.rename_table("s.orders", "archive.orders_2024")
    moved = lake.load_table("archive.orders_2024")
    assert moved.id == t.id and moved.scan().count() == 2
    assert not lake.table_exists("s.orders")
    t.update_properties(updates={"a": "1"}, removals=["k"])
    assert lake.load_table("archive.orders_2024").properties == {"a": "1"}
    lake.drop_table("archive.orders_2024")
    assert lake.list_tables("archive") == []
    with pytest.raises(errors.NoSuchTableError):
        lake.drop_table("archive.orders_2024")


def test_append_overwrite_delete_scan(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("s")
    t = lake.create_table("s.o", ORDERS, partition_by=["day"])
    v1 = t.append(orders([1, 2, 3], "mon"))
    v2 = t.append(pa.Table.from_batches(orders([4, 5], "tue").to_batches()).to_batches()[0])
    assert v2 > v1
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 4, 5]
    assert t.scan(pc.field("day") == "tue").files() == t.files(pc.field("day") == "tue")
    assert len(t.files(pc.field("day") == "tue")) == 1 and len(t.files()) == 2
    assert t.scan(columns=["id"], filter=pc.field("id") > 3).to_arrow().to_pylist() == [{"id": 4}, {"id": 5}]
    assert t.scan(limit=2).count() == 2
    t.delete(pc.field("id") == 2)
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 3, 4, 5]
    t.overwrite(orders([7], "tue"), filter=pc.field("day") == "tue")
    assert sorted(t.scan().to_arrow().column("id").to_pylist()) == [1, 3, 7]
    with pytest.raises(ValueError, match="do not match the filter"):
        t.overwrite(orders([8], "mon"), filter=pc.field("day") == "tue")
    t.overwrite(orders([9]))
    assert t.scan().to_arrow().column("id").to_pylist() == [9]
    with pytest.raises(errors.SchemaMismatchError, match="'amount'"):
        t.append(pa.table({"id": [1], "day": ["x"], "amount": ["not a number"]}))
    with pytest.raises(TypeError):
        t.append([{"id": 1}])
    with pytest.raises(TypeError):
        t.scan(filter="id > 1")
    with pytest.raises(ValueError, match="no column 'zzz'"):
        t.scan(columns=["zzz"])


def test_every_supported_type_round_trips(local_lake: catalog.Lakehouse) -> None:
    import datetime as dt
    import decimal

    schema = pa.schema(
        [
            ("i8", pa.int8()), ("u64", pa.uint64()), ("f32", pa.float32()), ("dec", pa.decimal128(10, 3)),
            ("s", pa.string()), ("b", pa.binary()), ("ok", pa.bool_()), ("d", pa.date32()),
            ("ts", pa.timestamp("us")), ("tz", pa.timestamp("ms", "UTC")), ("l", pa.list_(pa.int32())),
            ("st", pa.struct([("x", pa.int16()), ("y", pa.string())])),
        ]
    )
    local_lake.create_namespace("t")
    t = local_lake.create_table("t.all", schema)
    data = pa.table(
        {
            "i8": [1, None], "u64": [2**63, 0], "f32": [1.5, None], "dec": [decimal.Decimal("1.250"), None],
            "s": ["é", None], "b": [b"\x00\xff", None], "ok": [True, None], "d": [dt.date(2024, 2, 29), None],
            "ts": [dt.datetime(2024, 1, 1, 12), None], "tz": [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), None],
            "l": [[1, 2], None], "st": [{"x": 1, "y": "a"}, None],
        },
        schema=schema,
    )
    t.append(data)
    back = local_lake.load_table("t.all").scan().to_arrow()
    assert back.to_pylist() == data.to_pylist() and back.schema.equals(schema)
    assert len(t.files(pc.field("dec") > decimal.Decimal("2"))) == 0
    assert len(t.files(pc.field("tz") >= pa.scalar(dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), pa.timestamp("ms", "UTC")))) == 1


def test_schema_evolution_reads_old_files(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("s")
    t = lake.create_table("s.o", pa.schema([("id", pa.int32()), ("name", pa.string()), ("x", pa.int64())]))
    t.append(pa.table({"id": pa.array([1], pa.int32()), "name": ["a"], "x": [5]}))
    t.update_schema().add_column("score", pa.float64()).rename_column("name", "label").drop_column("x").widen(
        "id", pa.int64()
    ).commit()
    t2 = lake.load_table("s.o")
    assert t2.schema.names == ["id", "label", "score"] and t2.schema.field("id").type == pa.int64()
    t2.append(pa.table({"id": [2], "label": ["b"], "score": [0.5]}))
    assert sorted(t2.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "label": "a", "score": None},
        {"id": 2, "label": "b", "score": 0.5},
    ]
    with pytest.raises(ValueError, match="without loss"):
        t2.update_schema().widen("id", pa.int8()).commit()
    # A stale handle's schema change loses to the one already made: retryable.
    with pytest.raises(errors.RetryableConflictError):
        t.update_schema().add_column("late", pa.int8()).commit()


def test_column_comments_persist_and_bad_ones_change_nothing(local_lake: catalog.Lakehouse) -> None:
    local_lake.create_namespace("s")
    t = local_lake.create_table("s.o", pa.schema([("id", pa.int64())]))
    t.update_schema().add_column("region", pa.string()).set_comment("region", "sales region").commit()
    local_lake.load_table("s.o").update_schema().set_comment("id", "order number").commit()
    version = local_lake.version
    with pytest.raises(ValueError, match="set_comment: no column 'nope'"):
        local_lake.load_table("s.o").update_schema().set_comment("nope", "x").commit()
    with pytest.raises(TypeError, match="comment"):
        local_lake.load_table("s.o").update_schema().set_comment("id", 5)  # type: ignore[arg-type]
    assert local_lake.version == version
    with catalog.open(local_lake.url, poll_interval_s=0) as again:
        schema = again.load_table("s.o").schema
        assert [f.metadata.get(b"comment") for f in schema] == [b"order number", b"sales region"]
        again.load_table("s.o").update_schema().set_comment("id", None).commit()
        assert b"comment" not in again.load_table("s.o").schema.field("id").metadata
        assert again.load_table("s.o").schema.field("id").metadata[b"field_id"] == b"1"  # the id stays


def test_a_delete_covering_whole_files_removes_them_without_reading(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("s")
    schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
    t = lake.create_table("s.o", schema, partition_by=["day"])
    t.append(pa.table({"id": [1, 2], "day": ["mon", "mon"]}, schema=schema))
    t.append(pa.table({"id": [3, 4], "day": ["tue", "tue"]}, schema=schema))
    t.append(pa.table({"id": [5, 6], "day": ["wed", "wed"]}, schema=schema))
    [mon] = t.files(filter=pc.field("day") == "mon")
    # Garbage in place of the files the delete covers whole: reading one would
    # raise CorruptDataFileError, so the delete proves it did not read them.
    lake.objects.put(mon.path, b"not parquet")
    t.delete(pc.field("day") == "mon")
    assert sorted(lake.load_table("s.o").scan().to_arrow().column("id").to_pylist()) == [3, 4, 5, 6]
    # A delete of part of a file still reads and rewrites it.
    lake.load_table("s.o").delete((pc.field("day") == "tue") & (pc.field("id") == 3))
    assert sorted(lake.load_table("s.o").scan().to_arrow().column("id").to_pylist()) == [4, 5, 6]


def test_views(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("s")
    lake.create_view("s.big", sql="SELECT * FROM s.o WHERE amount > 10", dialect="spark", properties={"p": "1"})
    v = lake.load_view("s.big")
    assert (v.sql, v.dialect, v.properties, v.version) == ("SELECT * FROM s.o WHERE amount > 10", "spark", {"p": "1"}, 1)
    lake.replace_view("s.big", sql="SELECT 1")
    v2 = lake.load_view("s.big")
    assert (v2.sql, v2.dialect, v2.properties, v2.version) == ("SELECT 1", "spark", {"p": "1"}, 2)
    assert lake.list_views("s") == ["s.big"] and lake.list_tables("s") == []
    with pytest.raises(errors.ViewAlreadyExistsError):
        lake.create_view("s.big", sql="x")
    lake.create_table("s.o", ORDERS)
    with pytest.raises(errors.TableAlreadyExistsError):
        lake.create_table("s.big", ORDERS)
    with pytest.raises(errors.NoSuchViewError):
        lake.load_view("s.o")
    lake.drop_view("s.big")
    assert not lake.view_exists("s.big")


def test_transaction_is_one_version_and_rolls_back(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("s")
    a = lake.create_table("s.a", ORDERS)
    lake.create_table("s.b", ORDERS)
    before = lake.version
    with lake.transaction() as tx:
        tx.load_table("s.a").append(orders([1]))
        tx.load_table("s.b").overwrite(orders([2, 3]))
        tx.create_namespace("t")
        tx.create_table("t.c", ORDERS).append(orders([4]))
        assert tx.load_table("t.c").scan().count() == 1  # reads see the transaction's own writes
        assert not lake.namespace_exists("t")  # ... and nobody else does yet
    assert tx.version == before + 1 == lake.version
    assert lake.load_table("t.c").scan().count() == 1
    with pytest.raises(TransactionClosedError):
        tx.create_namespace("u")
    files_before = {m.path for m in lake.objects.list("data/")}
    with pytest.raises(RuntimeError):
        with lake.transaction() as tx2:
            tx2.load_table("s.a").append(orders([5]))
            raise RuntimeError("boom")
    assert a.scan().count() == 1 and lake.version == before + 1
    assert {m.path for m in lake.objects.list("data/")} == files_before  # the rolled-back files are gone


def test_time_travel() -> None:
    # The storage's clock runs an hour ahead between the commits, so "mid"
    # lies certainly between their root files' timestamps with no waiting.
    skew = [0.0]
    inner = MemoryStore(clock=lambda: time.time() + skew[0])
    lake = catalog.Lakehouse(kvstore.open(inner, poll_interval_s=0))
    lake.create_namespace("s")
    t = lake.create_table("s.o", ORDERS)
    v1 = t.append(orders([1]))
    mid = time.time() + 1800
    skew[0] = 3600.0
    t.append(orders([2]))
    lake.drop_table("s.o")
    assert not lake.table_exists("s.o")
    past = lake.at(version=v1)
    assert past.load_table("s.o").scan().count() == 1
    with pytest.raises(errors.ReadOnlyError):
        past.load_table("s.o").append(orders([3]))
    with pytest.raises(errors.ReadOnlyError):
        past.create_namespace("x")
    assert lake.at(timestamp=mid).load_table("s.o").scan().count() == 1
    lake.close()


def test_iceberg_pointer_compare_and_set(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("s")
    t = lake.create_table("s.ice", format="iceberg", location="warehouse/s/ice", metadata_location="m/v1.json")
    assert t.format == "iceberg" and t.metadata_location == "m/v1.json"
    lake.commit_metadata_location("s.ice", "m/v2.json", "m/v1.json")
    with pytest.raises(errors.RetryableConflictError, match="m/v2.json"):
        lake.commit_metadata_location("s.ice", "m/v3.json", "m/v1.json")
    assert lake.load_table("s.ice").metadata_location == "m/v2.json"
    with pytest.raises(ValueError, match="iceberg"):
        lake.load_table("s.ice").append(orders([1]))


def test_reopen_by_url(local_lake: catalog.Lakehouse) -> None:
    local_lake.create_namespace("s")
    local_lake.create_table("s.o", ORDERS).append(orders([1, 2]))
    with catalog.open(local_lake.url, background=False) as again:
        assert again.load_table("s.o").scan().count() == 2
    with pytest.raises(TypeError):
        catalog.open(None)


def test_a_huge_transaction_keeps_a_bounded_summary(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("many")
    with lake.transaction() as tx:
        for i in range(2000):
            tx.create_table(f"many.t{i:04d}", ORDERS)
    assert len(lake.list_tables("many")) == 2000
    (entry,) = lake.history(limit=1)
    more = entry.operations[-1]
    assert more["kind"] == "more" and more["operations"] + len(entry.operations) - 1 == 2000


def test_transaction_append_rebases_over_a_property_change(tmp_path) -> None:
    url = str(tmp_path / "l")
    with catalog.open(url, poll_interval_s=0) as lake, catalog.open(url, poll_interval_s=0) as other:
        lake.create_namespace("s")
        lake.create_table("s.o", ORDERS)
        other.refresh()
        with lake.transaction() as tx:
            tx.load_table("s.o").append(orders([1]))
            other.load_table("s.o").update_properties(updates={"k": "v"})  # lands first
        assert lake.load_table("s.o").scan().count() == 1 and lake.load_table("s.o").properties == {"k": "v"}
        with pytest.raises(errors.RetryableConflictError):
            with lake.transaction() as tx:
                tx.load_table("s.o").scan().count()  # a real read of the table's data ...
                tx.load_table("s.o").append(orders([2]))
                other.refresh()
                other.load_table("s.o").append(orders([3]))  # ... that a concurrent append changes


def test_update_namespace_properties_answers_what_the_commit_did(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("answers", {"a": "1", "b": "2"})
    result = lake.update_namespace_properties("answers", updates={"c": "3"}, removals=["a", "zz"])
    assert result == {"updated": ["c"], "removed": ["a"], "missing": ["zz"], "version": lake.version}
    with lake.transaction() as tx:
        staged = tx.update_namespace_properties("answers", removals=["b"])
    assert staged == {"updated": [], "removed": ["b"], "missing": [], "version": None}
    assert lake.namespace_properties("answers") == {"c": "3"}
