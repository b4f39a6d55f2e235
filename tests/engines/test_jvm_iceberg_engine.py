"""A JVM Iceberg engine (Spark 4.1 with Apache Iceberg's ``iceberg-spark-runtime``)
reads and writes through ``lakekv serve``'s Iceberg REST API, row for row,
with pyiceberg on the other side.

Each test has namespaces of its own on the session's server (conftest.py).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from jvm_iceberg import JvmEngineError, JvmIcebergEngine, engine_home
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DateType, DecimalType, LongType, NestedField, StringType

import catalog
from service.testing import ServerProcess

ORDERS_SQL = "id BIGINT, region STRING, amount DECIMAL(10,2), day DATE"
ORDERS = [
    (1, "eu", Decimal("9.50"), datetime.date(2026, 11, 1)),
    (2, "us", Decimal("3.00"), datetime.date(2026, 11, 1)),
    (3, "eu", Decimal("1.25"), datetime.date(2026, 11, 2)),
    (4, "apac", None, datetime.date(2026, 11, 3)),
]


def rest(server: ServerProcess) -> RestCatalog:
    assert server.token is not None, "the engines' server has a token (conftest.py)"
    return RestCatalog("lakekv", uri=server.url, token=server.token)


def values_sql(rows: Sequence[tuple[object, ...]]) -> str:
    def literal(value: object) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        if isinstance(value, datetime.date):
            return f"DATE '{value.isoformat()}'"
        return str(value)

    return ", ".join("(" + ", ".join(literal(v) for v in row) + ")" for row in rows)


def pyiceberg_rows(table: pa.Table) -> list[tuple[object, ...]]:
    return sorted(tuple(row.values()) for row in table.to_pylist())


def test_the_engine_creates_a_partitioned_table_and_reads_back_every_row(
    jvm_iceberg: JvmIcebergEngine, lake_server: ServerProcess
) -> None:
    jvm_iceberg.run_sql(lake_server.url, [
        "CREATE NAMESPACE jvm_own",
        f"CREATE TABLE jvm_own.orders ({ORDERS_SQL}) USING iceberg PARTITIONED BY (region)",
        f"INSERT INTO jvm_own.orders VALUES {values_sql(ORDERS[:2])}",
        f"INSERT INTO jvm_own.orders VALUES {values_sql(ORDERS[2:])}",
    ], token=lake_server.token)
    rows = jvm_iceberg.run_sql(lake_server.url, "SELECT * FROM jvm_own.orders ORDER BY id", token=lake_server.token)
    assert rows == ORDERS
    # Partitioned for real: one data file per region, and pruning by it.
    files = jvm_iceberg.run_sql(
        lake_server.url, "SELECT partition.region FROM jvm_own.orders.files ORDER BY 1", token=lake_server.token)
    assert files == [("apac",), ("eu",), ("eu",), ("us",)]
    eu = jvm_iceberg.run_sql(
        lake_server.url, "SELECT id FROM jvm_own.orders WHERE region = 'eu' ORDER BY id", token=lake_server.token)
    assert eu == [(1,), (3,)]
    with catalog.open(lake_server.store_url, poll_interval_s=0, background_maintenance=False) as lake:
        assert lake.load_table("jvm_own.orders").format == "iceberg"  # a lakehouse catalog object


def test_pyiceberg_reads_what_the_engine_wrote(jvm_iceberg: JvmIcebergEngine, lake_server: ServerProcess) -> None:
    jvm_iceberg.run_sql(lake_server.url, [
        "CREATE NAMESPACE jvm_to_py",
        f"CREATE TABLE jvm_to_py.orders ({ORDERS_SQL}) USING iceberg PARTITIONED BY (region)",
        f"INSERT INTO jvm_to_py.orders VALUES {values_sql(ORDERS)}",
    ], token=lake_server.token)
    table = rest(lake_server).load_table("jvm_to_py.orders")
    assert [f.name for f in table.spec().fields] == ["region"]
    assert pyiceberg_rows(table.scan().to_arrow()) == sorted(ORDERS, key=lambda r: r[0])
    eu = table.scan(row_filter="region == 'eu'").to_arrow()
    assert sorted(eu.column("id").to_pylist()) == [1, 3]


PY_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "amount", DecimalType(10, 2), required=False),
    NestedField(4, "day", DateType(), required=False),
)
PY_SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))


def arrow_orders(rows: Sequence[tuple[object, ...]]) -> pa.Table:
    schema = pa.schema([
        ("id", pa.int64()), ("region", pa.string()), ("amount", pa.decimal128(10, 2)), ("day", pa.date32())])
    return pa.Table.from_pylist([dict(zip(schema.names, row, strict=True)) for row in rows], schema=schema)


def test_the_engine_reads_a_table_pyiceberg_created_at_every_snapshot(
    jvm_iceberg: JvmIcebergEngine, lake_server: ServerProcess
) -> None:
    cat = rest(lake_server)
    cat.create_namespace("py_to_jvm")
    table = cat.create_table("py_to_jvm.orders", schema=PY_SCHEMA, partition_spec=PY_SPEC)
    table.append(arrow_orders(ORDERS[:2]))
    first = table.current_snapshot()
    assert first is not None
    table.append(arrow_orders(ORDERS[2:]))

    rows = jvm_iceberg.run_sql(lake_server.url, "SELECT * FROM py_to_jvm.orders ORDER BY id", token=lake_server.token)
    assert rows == ORDERS
    older = jvm_iceberg.run_sql(
        lake_server.url, f"SELECT * FROM py_to_jvm.orders VERSION AS OF {first.snapshot_id} ORDER BY id",
        token=lake_server.token)
    assert older == ORDERS[:2]
    # By time: the snapshot current at the first append's commit time (UTC, the session's zone).
    at = datetime.datetime.fromtimestamp(first.timestamp_ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    by_time = jvm_iceberg.run_sql(
        lake_server.url, f"SELECT * FROM py_to_jvm.orders TIMESTAMP AS OF '{at}' ORDER BY id", token=lake_server.token)
    assert by_time == ORDERS[:2]
    snapshots = jvm_iceberg.run_sql(
        lake_server.url, "SELECT snapshot_id FROM py_to_jvm.orders.snapshots ORDER BY committed_at", token=lake_server.token)
    assert [s for (s,) in snapshots] == [s.snapshot_id for s in cat.load_table("py_to_jvm.orders").snapshots()]


def test_the_engine_reads_an_older_snapshot_of_its_own_table_by_id(
    jvm_iceberg: JvmIcebergEngine, lake_server: ServerProcess
) -> None:
    jvm_iceberg.run_sql(lake_server.url, [
        "CREATE NAMESPACE jvm_history",
        f"CREATE TABLE jvm_history.orders ({ORDERS_SQL}) USING iceberg PARTITIONED BY (region)",
        f"INSERT INTO jvm_history.orders VALUES {values_sql(ORDERS[:1])}",
    ], token=lake_server.token)
    (first,), = jvm_iceberg.run_sql(
        lake_server.url, "SELECT snapshot_id FROM jvm_history.orders.snapshots", token=lake_server.token)
    jvm_iceberg.run_sql(lake_server.url, [
        f"INSERT INTO jvm_history.orders VALUES {values_sql(ORDERS[1:])}",
        "DELETE FROM jvm_history.orders WHERE id = 1",
    ], token=lake_server.token)
    assert jvm_iceberg.run_sql(
        lake_server.url, "SELECT * FROM jvm_history.orders ORDER BY id", token=lake_server.token) == ORDERS[1:]
    assert jvm_iceberg.run_sql(
        lake_server.url, f"SELECT * FROM jvm_history.orders VERSION AS OF {first}", token=lake_server.token) == ORDERS[:1]
    # pyiceberg lands on the same rows at that snapshot.
    table = rest(lake_server).load_table("jvm_history.orders")
    assert pyiceberg_rows(table.scan(snapshot_id=first).to_arrow()) == ORDERS[:1]


def test_schema_changes_cross_both_ways_by_field_id(jvm_iceberg: JvmIcebergEngine, lake_server: ServerProcess) -> None:
    token = lake_server.token
    jvm_iceberg.run_sql(lake_server.url, [
        "CREATE NAMESPACE evolve",
        f"CREATE TABLE evolve.orders ({ORDERS_SQL}) USING iceberg PARTITIONED BY (region)",
        f"INSERT INTO evolve.orders VALUES {values_sql(ORDERS[:2])}",
        "ALTER TABLE evolve.orders RENAME COLUMN amount TO total",
        "ALTER TABLE evolve.orders ADD COLUMN note STRING",
        "ALTER TABLE evolve.orders DROP COLUMN day",
        "INSERT INTO evolve.orders VALUES (3, 'eu', 1.25, 'late')",
    ], token=token)
    cat = rest(lake_server)
    table = cat.load_table("evolve.orders")
    assert [f.name for f in table.schema().fields] == ["id", "region", "total", "note"]
    expected = [(1, "eu", Decimal("9.50"), None), (2, "us", Decimal("3.00"), None), (3, "eu", Decimal("1.25"), "late")]
    assert pyiceberg_rows(table.scan().to_arrow()) == expected

    # And back: pyiceberg renames a column; the engine reads the older files by field id.
    with table.update_schema() as update:
        update.rename_column("note", "remark")
    table.append(pa.Table.from_pylist(
        [{"id": 4, "region": "us", "total": Decimal("2.00"), "remark": "py"}], schema=table.schema().as_arrow()))
    rows = jvm_iceberg.run_sql(lake_server.url, "SELECT * FROM evolve.orders ORDER BY id", token=token)
    assert rows == [*expected, (4, "us", Decimal("2.00"), "py")]
    assert [name for (name, *_rest) in jvm_iceberg.run_sql(
        lake_server.url, "DESCRIBE evolve.orders", token=token)][:4] == ["id", "region", "total", "remark"]


@pytest.mark.parametrize("mode", ["copy-on-write", "merge-on-read"])
def test_pyiceberg_reads_the_engines_updates_and_deletes(
    jvm_iceberg: JvmIcebergEngine, lake_server: ServerProcess, mode: str
) -> None:
    ns = "rows_" + mode.replace("-", "_")
    jvm_iceberg.run_sql(lake_server.url, [
        f"CREATE NAMESPACE {ns}",
        f"""CREATE TABLE {ns}.orders ({ORDERS_SQL}) USING iceberg PARTITIONED BY (region)
            TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = '{mode}', 'write.update.mode' = '{mode}')""",
        f"INSERT INTO {ns}.orders VALUES {values_sql(ORDERS)}",
        f"UPDATE {ns}.orders SET amount = 10.00 WHERE id = 3",
        f"DELETE FROM {ns}.orders WHERE id = 2",
    ], token=lake_server.token)
    expected = [ORDERS[0], (3, "eu", Decimal("10.00"), ORDERS[2][3]), ORDERS[3]]
    assert jvm_iceberg.run_sql(
        lake_server.url, f"SELECT * FROM {ns}.orders ORDER BY id", token=lake_server.token) == expected
    table = rest(lake_server).load_table(f"{ns}.orders")
    assert pyiceberg_rows(table.scan().to_arrow()) == expected
    # The two modes really differ: merge-on-read leaves delete files that pyiceberg applied above.
    (delete_files,), = jvm_iceberg.run_sql(
        lake_server.url, f"SELECT count(*) FROM {ns}.orders.delete_files", token=lake_server.token)
    if mode == "copy-on-write":
        assert delete_files == 0
    else:
        assert delete_files > 0


def test_the_engine_reads_a_native_table_made_with_the_python_api(
    jvm_iceberg: JvmIcebergEngine, lake_server: ServerProcess
) -> None:
    with catalog.open(lake_server.store_url, poll_interval_s=0, background_maintenance=False) as lake:
        lake.create_namespace("native_to_jvm")
        table = lake.create_table("native_to_jvm.orders", arrow_orders([]).schema, partition_by=["region"])
        table.append(arrow_orders(ORDERS))
    rows = jvm_iceberg.run_sql(lake_server.url, "SELECT * FROM native_to_jvm.orders ORDER BY id", token=lake_server.token)
    assert rows == ORDERS


def test_a_failed_statement_is_reported_and_the_engine_goes_on(
    jvm_iceberg: JvmIcebergEngine, lake_server: ServerProcess
) -> None:
    with pytest.raises(JvmEngineError, match="no_such_ns"):
        jvm_iceberg.run_sql(lake_server.url, "SELECT * FROM no_such_ns.t", token=lake_server.token)
    with pytest.raises(JvmEngineError, match="ForbiddenException: Forbidden: invalid bearer token$"):
        jvm_iceberg.run_sql(lake_server.url, "SHOW NAMESPACES", token="wrong-token-0123456789abcdef")
    assert jvm_iceberg.run_sql(lake_server.url, "SELECT 1 + 1", token=lake_server.token) == [(2,)]


def test_result_values_come_back_as_plain_python(jvm_iceberg: JvmIcebergEngine, lake_server: ServerProcess) -> None:
    rows = jvm_iceberg.run_sql(lake_server.url, """SELECT named_struct('a', 1, 'b', array(2, 3)) AS s,
        map('k', 1.5D) AS m, TIMESTAMP '2026-11-27 01:02:03.456' AS ts, TIMESTAMP_NTZ '2026-11-27 01:02:03' AS ntz,
        INTERVAL '2' DAY AS i, X'00FF' AS b, CAST(NULL AS STRING) AS n""", token=lake_server.token)
    assert rows == [(
        (1, [2, 3]), {"k": 1.5}, datetime.datetime(2026, 11, 27, 1, 2, 3, 456000),
        datetime.datetime(2026, 11, 27, 1, 2, 3), datetime.timedelta(days=2), bytearray(b"\x00\xff"), None,
    )]


@pytest.mark.parametrize("statements", [[], "", ["SELECT 1", "  "], [b"SELECT 1"]])
def test_run_sql_refuses_no_statement(jvm_iceberg: JvmIcebergEngine, statements: object) -> None:
    with pytest.raises(ValueError, match="statements must be"):
        jvm_iceberg.run_sql("http://127.0.0.1:1", statements)  # type: ignore[arg-type]


def test_a_missing_engine_names_the_make_target(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LAKEKV_JVM_ICEBERG_HOME", str(tmp_path / "nothing-here"))
    with pytest.raises(FileNotFoundError, match="make jvm-iceberg-engine"):
        engine_home()
