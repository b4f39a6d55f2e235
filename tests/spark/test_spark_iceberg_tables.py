"""Tables created over the Iceberg REST API (pyiceberg, DuckDB), used from Spark through the catalog plugin.

``lakekv serve`` runs on the SAME lakehouse the shared Spark session has as
catalog ``lake``; pyiceberg and DuckDB create and write tables through it,
Spark reads, describes, time-travels and appends to them through the
plugin, and each answer is checked row for row against what pyiceberg or
DuckDB read.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import duckdb
import duckdb_ext
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

import catalog
from catalog.spark.control import ControlPlane, data_root
from service.testing import ServerProcess

TOKEN = "spark-iceberg-token-0123456789"
EVENTS = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string()), pa.field("score", pa.float64())])


@pytest.fixture(scope="module")
def rest_server(lake_catalog: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """``lakekv serve`` on the lakehouse Spark's catalog ``lake`` serves."""
    log = tmp_path_factory.mktemp("iceberg-rest") / "server.log"
    process = ServerProcess(lake_catalog, log, token=TOKEN).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def rest(rest_server: ServerProcess) -> RestCatalog:
    return RestCatalog("lakekv", uri=rest_server.url, token=TOKEN)


def duck(server: ServerProcess) -> duckdb.DuckDBPyConnection:
    extension_dir = os.path.join(list(duckdb_ext.__path__)[0], "extensions")
    con = duckdb.connect(config={"extension_directory": extension_dir, "autoinstall_known_extensions": False})
    for name in ("httpfs", "avro", "parquet", "iceberg"):
        con.execute(f"LOAD {name}")
    con.execute(f"CREATE SECRET lakekv_token (TYPE iceberg, TOKEN '{TOKEN}')")
    con.execute(f"ATTACH 'lakekv' AS ice (TYPE iceberg, ENDPOINT '{server.url}', SECRET lakekv_token)")
    return con


def rows(spark: SparkSession, sql: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(sql).collect())


def short(ns: str) -> str:
    return ns.removeprefix("lake.")


def events(rest: RestCatalog, ns: str, name: str = "events") -> tuple[str, object]:
    table = rest.create_table(f"{short(ns)}.{name}", schema=EVENTS)
    table.append(pa.table({"id": [1, 2, 3], "name": ["a", "b", None], "score": [0.5, 1.5, 2.5]}, schema=EVENTS))
    table.append(pa.table({"id": [4, 5], "name": ["d", "e"], "score": [4.0, None]}, schema=EVENTS))
    return f"{ns}.{name}", table


def test_show_tables_lists_an_iceberg_table_beside_native_ones(spark: SparkSession, ns: str, rest: RestCatalog) -> None:
    # Before: SHOW TABLES loaded every table and failed for the whole namespace.
    spark.sql(f"CREATE TABLE {ns}.native (id BIGINT)")
    events(rest, ns)
    listed = sorted(r.tableName for r in spark.sql(f"SHOW TABLES IN {ns}").collect())
    assert listed == ["events", "native"]


def test_show_tables_loads_no_table(spark: SparkSession, ns: str, lake_catalog: str, tmp_path: Path) -> None:
    # A table whose Iceberg metadata is gone cannot be loaded; the listing of its namespace still works.
    spark.sql(f"CREATE TABLE {ns}.native (id BIGINT)")
    with catalog.open(lake_catalog, poll_interval_s=0, background_maintenance=False) as lake:
        lake.create_table(
            f"{short(ns)}.broken", format="iceberg", location=f"file://{tmp_path}/broken",
            metadata_location=f"file://{tmp_path}/broken/metadata/00000-gone.metadata.json",
        )
    assert sorted(r.tableName for r in spark.sql(f"SHOW TABLES IN {ns}").collect()) == ["broken", "native"]
    with pytest.raises(PySparkException, match=r"broken.*cannot read Iceberg metadata"):
        spark.sql(f"SELECT * FROM {ns}.broken").collect()


def test_register_exposes_iceberg_tables_to_spark_sql(
    spark: SparkSession, ns: str, rest: RestCatalog, lake_catalog: str
) -> None:
    from catalog.spark.sql_names import register

    events(rest, ns)
    with catalog.open(lake_catalog, poll_interval_s=0, background_maintenance=False) as lake:
        registration = register(spark, lake, short(ns))
    assert registration.tables == [f"{short(ns)}.events"] and registration.skipped == {}
    assert rows(spark, f"SELECT id FROM `{short(ns)}.events` WHERE id > 3") == [(4,), (5,)]


def test_select_with_filters_describe_and_ctas(spark: SparkSession, ns: str, rest: RestCatalog) -> None:
    name, table = events(rest, ns)
    expected = sorted(tuple(r.values()) for r in table.refresh().scan().to_arrow().to_pylist())
    assert rows(spark, f"SELECT id, name, score FROM {name}") == expected
    assert rows(spark, f"SELECT id, name FROM {name} WHERE id >= 2 AND score > 1.0") == [(2, "b"), (3, None), (4, "d")]
    assert rows(spark, f"SELECT count(*) FROM {name} WHERE name IS NULL") == [(1,)]
    described = {r.col_name: r.data_type for r in spark.sql(f"DESCRIBE TABLE {name}").collect()}
    assert (described["id"], described["name"], described["score"]) == ("bigint", "string", "double")
    spark.sql(f"CREATE TABLE {ns}.copy AS SELECT * FROM {name} WHERE id < 4")
    assert rows(spark, f"SELECT * FROM {ns}.copy") == [e for e in expected if e[0] < 4]
    spark.sql(f"INSERT INTO {ns}.copy SELECT * FROM {name} WHERE id >= 4")  # the read is checked at the commit
    assert rows(spark, f"SELECT * FROM {ns}.copy") == expected


def test_renamed_column_reads_by_field_id(spark: SparkSession, ns: str, rest: RestCatalog) -> None:
    name, table = events(rest, ns)
    with table.update_schema() as update:
        update.rename_column("name", "label")
    assert rows(spark, f"SELECT id, label FROM {name} WHERE id <= 2") == [(1, "a"), (2, "b")]


def test_version_and_timestamp_as_of(spark: SparkSession, ns: str, rest: RestCatalog, lake_catalog: str) -> None:
    name, table = events(rest, ns)
    with catalog.open(lake_catalog, poll_interval_s=0, background_maintenance=False) as lake:
        before = lake.refresh()
        between = dt.datetime.now(dt.timezone.utc)
    table.refresh().append(pa.table({"id": [6], "name": ["f"], "score": [6.0]}, schema=EVENTS))
    assert rows(spark, f"SELECT count(*) FROM {name}") == [(6,)]
    assert rows(spark, f"SELECT max(id) FROM {name} VERSION AS OF {before}") == [(5,)]
    stamp = between.strftime("%Y-%m-%d %H:%M:%S.%f")
    assert rows(spark, f"SELECT count(*) FROM {name} TIMESTAMP AS OF '{stamp}'") == [(5,)]


def test_insert_into_then_pyiceberg_and_duckdb_read_it(
    spark: SparkSession, ns: str, rest: RestCatalog, rest_server: ServerProcess
) -> None:
    name, _ = events(rest, ns)
    spark.sql(f"INSERT INTO {name} VALUES (10, 'x', 1.0), (11, 'y', NULL)")
    read = rest.load_table(f"{short(ns)}.events")
    got = sorted(read.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [r["id"] for r in got] == [1, 2, 3, 4, 5, 10, 11]
    assert got[-1] == {"id": 11, "name": "y", "score": None}
    # pyiceberg's writer recorded column statistics: a filter prunes the files pyiceberg appended.
    assert sum(task.file.record_count for task in read.scan(row_filter="id >= 10").plan_files()) == 2
    con = duck(rest_server)
    assert con.execute(f"SELECT count(*), sum(id) FROM ice.{short(ns)}.events").fetchone() == (7, 36)
    con.close()


def test_duckdb_table_with_position_deletes_reads_row_for_row(
    spark: SparkSession, ns: str, rest_server: ServerProcess
) -> None:
    con = duck(rest_server)
    con.execute(f"CREATE TABLE ice.{short(ns)}.orders (id BIGINT, amount DOUBLE, note VARCHAR)")
    con.execute(f"INSERT INTO ice.{short(ns)}.orders SELECT i, i * 1.5, 'n' || i FROM range(1, 101) t(i)")
    con.execute(f"DELETE FROM ice.{short(ns)}.orders WHERE id % 7 = 0")
    expected = sorted(con.execute(f"SELECT id, amount, note FROM ice.{short(ns)}.orders").fetchall())
    con.close()
    assert len(expected) == 100 - 14
    assert rows(spark, f"SELECT id, amount, note FROM {ns}.orders") == expected
    assert rows(spark, f"SELECT id FROM {ns}.orders WHERE id BETWEEN 5 AND 9") == [(5,), (6,), (8,), (9,)]


def test_plans_go_to_sparks_reader_only_without_delete_files(
    ns: str, rest: RestCatalog, rest_server: ServerProcess, lake_catalog: str
) -> None:
    events(rest, ns)
    con = duck(rest_server)
    con.execute(f"CREATE TABLE ice.{short(ns)}.orders AS SELECT i AS id FROM range(1, 11) t(i)")
    con.execute(f"DELETE FROM ice.{short(ns)}.orders WHERE id = 3")
    con.close()
    with catalog.open(lake_catalog, poll_interval_s=0, background_maintenance=False) as lake:
        plane = ControlPlane(lake, data_root(lake))
        for table, jvm in (("events", True), ("orders", False)):
            name = [short(ns), table]
            info = plane.handle({"op": "load_table", "args": {"name": name}})["result"]
            assert info["data_root"] is not None and info["data_path"] is None  # written through pyiceberg
            plan = plane.handle({"op": "plan_scan", "args": {"name": name, "id": info["id"], "version": info["version"]}})
            assert plan["result"]["parquet_field_ids"] is jvm, table
            if jvm:  # store-relative paths of files Spark's reader opens under data_root
                assert all(not f["path"].startswith("file:") for f in plan["result"]["files"])
            pruned = plane.handle({"op": "plan_scan", "args": {
                "name": name, "id": info["id"], "version": info["version"],
                "filters": [{"type": "GreaterThan", "attribute": ["id"], "value": 3}],
            }})
            assert pruned["ok"], pruned


def test_delete_from_spark_and_refused_update(spark: SparkSession, ns: str, rest: RestCatalog) -> None:
    name, _ = events(rest, ns)
    spark.sql(f"DELETE FROM {name} WHERE id = 2")
    assert [r["id"] for r in rest.load_table(f"{short(ns)}.events").scan().to_arrow().to_pylist()].count(2) == 0
    with pytest.raises(PySparkException, match=r"UPDATE .*events: an iceberg table .* not a rewrite of its files"):
        spark.sql(f"UPDATE {name} SET score = 0 WHERE id = 1")
    with pytest.raises(PySparkException, match=r"MERGE .*events: an iceberg table .* not a rewrite of its files"):
        spark.sql(f"MERGE INTO {name} t USING (SELECT 1 AS id) s ON t.id = s.id WHEN MATCHED THEN DELETE")
    assert rows(spark, f"SELECT score FROM {name} WHERE id = 1") == [(0.5,)]


def test_registered_table_reads_but_refuses_writes(spark: SparkSession, ns: str, rest: RestCatalog) -> None:
    _, table = events(rest, ns, "source")
    # As if another catalog owned it: its metadata stays, the lakehouse forgets the table, then adopts it.
    metadata_location = table.refresh().metadata_location
    rest.drop_table(f"{short(ns)}.source")
    rest.register_table(f"{short(ns)}.mirror", metadata_location)
    assert rows(spark, f"SELECT count(*) FROM {ns}.mirror") == [(5,)]
    with pytest.raises(PySparkException, match=r"mirror.*registered from another catalog"):
        spark.sql(f"INSERT INTO {ns}.mirror VALUES (9, 'z', 9.0)")
    assert rows(spark, f"SELECT count(*) FROM {ns}.mirror") == [(5,)]


def test_insert_overwrite_is_refused_by_name(spark: SparkSession, ns: str, rest: RestCatalog) -> None:
    name, _ = events(rest, ns)
    with pytest.raises(PySparkException, match=r"events.*INSERT OVERWRITE"):
        spark.sql(f"INSERT OVERWRITE {name} VALUES (1, 'a', 1.0)")
    assert rows(spark, f"SELECT count(*) FROM {name}") == [(5,)]


def test_a_format_v3_table_reads_its_column_defaults_and_refuses_writes(
    spark: SparkSession, ns: str, rest: RestCatalog, rest_server: ServerProcess
) -> None:
    """Upgraded to format version 3 by an Iceberg engine, with a column whose initial default the files
    written before it lack: Spark reads the default (pyiceberg's reader; Spark's own would read NULL)."""
    name, table = events(rest, ns, "v3")
    body = {
        "requirements": [{"type": "assert-table-uuid", "uuid": str(table.metadata.table_uuid)}],  # type: ignore[attr-defined]
        "updates": [
            {"action": "upgrade-format-version", "format-version": 3},
            {"action": "add-schema", "schema": {"type": "struct", "schema-id": 1, "fields": [
                *[f.model_dump(mode="json", by_alias=True, exclude_none=True) for f in table.schema().fields],  # type: ignore[attr-defined]
                {"id": 4, "name": "flag", "required": False, "type": "int", "initial-default": 7, "write-default": 7},
            ]}},
            {"action": "set-current-schema", "schema-id": -1},
        ],
    }
    request = urllib.request.Request(
        f"{rest_server.url}/v1/namespaces/{short(ns)}/tables/v3", data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert json.load(response)["metadata"]["format-version"] == 3
    assert rows(spark, f"SELECT id, flag FROM {name}") == [(1, 7), (2, 7), (3, 7), (4, 7), (5, 7)]
    with pytest.raises(PySparkException, match="format-version 3 table"):
        spark.sql(f"INSERT INTO {name} VALUES (6, 'f', 6.0, 1)")
    assert rows(spark, f"SELECT count(*) FROM {name}") == [(5,)]
