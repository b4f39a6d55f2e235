"""The Spark catalog plugin (io.lakekv.spark.LakehouseCatalog) through spark.sql and DataFrames.

Every test works in its own namespace of ONE catalog ``lake`` (fixture ``ns``)
on the shared SparkSession; the lakehouse is also opened from Python (and
from a second process) to check what Spark did and to commit behind its back.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import textwrap
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

import catalog
from tests.spark.test_spark_source import EVERY_TYPE, every_type_rows, rows_by_id

pytestmark = pytest.mark.spark


def rows(spark: SparkSession, sql: str) -> list[tuple[object, ...]]:
    return [tuple(row) for row in spark.sql(sql).collect()]


def count(spark: SparkSession, sql: str) -> int:
    return int(spark.sql(sql).collect()[0][0])


def explain(spark: SparkSession, sql: str) -> str:
    """The physical plan, with the scan's metadata (file index) not shortened."""
    key = "spark.sql.maxMetadataStringLength"
    before = spark.conf.get(key)
    spark.conf.set(key, "10000")
    try:
        return str(spark.sql(f"EXPLAIN {sql}").collect()[0][0])
    finally:
        spark.conf.set(key, before)


def short(ns: str) -> str:
    """``lake.x`` -> ``x``: the namespace as the Python catalog names it."""
    return ns.split(".", 1)[1]


def append_in_another_process(url: str, table: str, ids: list[int]) -> None:
    code = textwrap.dedent(
        f"""
        import pyarrow as pa, catalog
        with catalog.open({url!r}) as lake:
            t = lake.load_table({table!r})
            t.append(pa.table({{"id": {ids!r}}}).cast(t.schema))
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# -- namespaces ---------------------------------------------------------------------


def test_namespaces_nested_with_properties(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE NAMESPACE {ns}.child WITH DBPROPERTIES ('team' = 'sales')")
    assert rows(spark, f"SHOW NAMESPACES IN {ns}") == [(f"{short(ns)}.child",)]
    spark.sql(f"ALTER NAMESPACE {ns}.child SET PROPERTIES ('team' = 'ops', 'tier' = 'gold')")
    described = dict(rows(spark, f"DESCRIBE NAMESPACE EXTENDED {ns}.child"))
    assert "((team,ops), (tier,gold))" in described["Properties"] or "team" in described["Properties"]
    with catalog.open(lake_url_of(spark)) as lake:
        assert lake.namespace_properties(f"{short(ns)}.child") == {"team": "ops", "tier": "gold"} | owner_of(lake, f"{short(ns)}.child")

    spark.sql(f"CREATE TABLE {ns}.child.t (id BIGINT)")
    with pytest.raises(PySparkException, match="SCHEMA_NOT_EMPTY|NonEmptyNamespace|not empty"):
        spark.sql(f"DROP NAMESPACE {ns}.child")
    spark.sql(f"DROP NAMESPACE {ns}.child CASCADE")
    assert rows(spark, f"SHOW NAMESPACES IN {ns}") == []


def lake_url_of(spark: SparkSession) -> str:
    return spark.conf.get("spark.sql.catalog.lake.url")


def owner_of(lake: catalog.Lakehouse, namespace: str) -> dict[str, str]:
    """Spark adds an ``owner`` property to every namespace it creates."""
    return {k: v for k, v in lake.namespace_properties(namespace).items() if k == "owner"}


# -- tables: DDL --------------------------------------------------------------------


def test_create_table_partitioned_with_properties_and_describe(spark: SparkSession, ns: str) -> None:
    spark.sql(
        f"CREATE TABLE {ns}.orders (id BIGINT COMMENT 'order number', region STRING, amount DECIMAL(10,2)) "
        "PARTITIONED BY (region) TBLPROPERTIES ('team' = 'sales') COMMENT 'all orders'"
    )
    assert rows(spark, f"SHOW TABLES IN {ns}") == [(short(ns), "orders", False)]
    lines = rows(spark, f"DESCRIBE TABLE EXTENDED {ns}.orders")
    assert lines[:3] == [("id", "bigint", "order number"), ("region", "string", None), ("amount", "decimal(10,2)", None)]
    partition_info = lines.index(("# Partition Information", "", ""))
    assert lines[partition_info + 2] == ("region", "string", None)
    described = {name: value for name, value, _ in lines}
    assert described["Comment"] == "all orders"
    assert described["Provider"] == "lakehouse"
    assert described["Location"].startswith("file://") and "/data/" in described["Location"]
    assert "team=sales" in described["Table Properties"]
    assert "lakekv.version=" in described["Table Properties"]

    with catalog.open(lake_url_of(spark)) as lake:
        table = lake.load_table(f"{short(ns)}.orders")
        assert table.partition_by == ["region"]
        assert table.properties["team"] == "sales"
        assert table.schema.names == ["id", "region", "amount"]
        assert table.schema.field("id").metadata[b"comment"] == b"order number"
    spark.sql(f"INSERT INTO {ns}.orders VALUES (1, 'eu', 2.50)")  # a commented column takes writes as any other
    assert rows(spark, f"SELECT id, amount FROM {ns}.orders") == [(1, Decimal("2.50"))]


def test_unsupported_clauses_are_errors(spark: SparkSession, ns: str) -> None:
    with pytest.raises(PySparkException, match="LOCATION"):
        spark.sql(f"CREATE TABLE {ns}.t (id BIGINT) LOCATION '/tmp/elsewhere'")
    with pytest.raises(PySparkException, match="partitions by columns only"):
        spark.sql(f"CREATE TABLE {ns}.t (id BIGINT) PARTITIONED BY (bucket(4, id))")
    with pytest.raises(PySparkException, match="USING csv"):
        spark.sql(f"CREATE TABLE {ns}.t (id BIGINT) USING csv")
    with pytest.raises(PySparkException, match="column default value"):
        spark.sql(f"CREATE TABLE {ns}.t (id BIGINT DEFAULT 1)")
    assert rows(spark, f"SHOW TABLES IN {ns}") == []


def test_ctas_and_replace_are_atomic(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t PARTITIONED BY (p) AS SELECT id, id % 2 AS p FROM range(10)")
    assert count(spark, f"SELECT count(*) FROM {ns}.t") == 10
    assert rows(spark, f"SELECT p, count(*) FROM {ns}.t GROUP BY p ORDER BY p") == [(0, 5), (1, 5)]

    spark.sql(f"CREATE OR REPLACE TABLE {ns}.t AS SELECT id FROM range(3)")
    assert rows(spark, f"SELECT id FROM {ns}.t ORDER BY id") == [(0,), (1,), (2,)]

    # A query that fails half-way: nothing becomes visible, the old table stays.
    with pytest.raises(PySparkException, match="boom"):
        spark.sql(f"CREATE TABLE {ns}.failed AS SELECT id, CAST(raise_error('boom') AS INT) AS x FROM range(5)")
    assert rows(spark, f"SHOW TABLES IN {ns}") == [(short(ns), "t", False)]
    with pytest.raises(PySparkException, match="boom"):
        spark.sql(f"CREATE OR REPLACE TABLE {ns}.t AS SELECT CAST(raise_error('boom') AS BIGINT) AS id")
    assert rows(spark, f"SELECT id FROM {ns}.t ORDER BY id") == [(0,), (1,), (2,)]


def test_an_insert_whose_task_fails_mid_write_changes_nothing_and_leaves_no_file(spark: SparkSession, ns: str) -> None:
    from tests.spark.lake_history import commits_after

    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT, x INT)")
    spark.sql(f"INSERT INTO {ns}.t VALUES (1, 1), (2, 2)")
    with catalog.open(lake_url_of(spark)) as lake:
        version = lake.version
        stored_before = {m.path for m in lake.objects.list("data/")}
    # Four tasks: three finish (their files are written), the last raises on its last row.
    with pytest.raises(PySparkException, match="boom"):
        spark.sql(f"INSERT INTO {ns}.t SELECT id, CAST(IF(id = 399, raise_error('boom'), 1) AS INT) FROM range(0, 400, 1, 4)")
    assert rows(spark, f"SELECT id, x FROM {ns}.t ORDER BY id") == [(1, 1), (2, 2)]
    with catalog.open(lake_url_of(spark)) as lake:
        assert commits_after(lake, version) == []
        referenced = {f.path for f in lake.load_table(f"{short(ns)}.t").files()}
        leftovers = {m.path for m in lake.objects.list("data/")} - stored_before
        assert not leftovers & referenced
        lake.gc(grace_s=0)
        assert not leftovers & {m.path for m in lake.objects.list("data/")}


def test_alter_table_columns_read_right_by_field_id(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT, name STRING, score INT)")
    spark.sql(f"INSERT INTO {ns}.t VALUES (1, 'a', 10)")
    spark.sql(f"ALTER TABLE {ns}.t RENAME COLUMN name TO label")
    spark.sql(f"ALTER TABLE {ns}.t DROP COLUMN score")
    spark.sql(f"ALTER TABLE {ns}.t ADD COLUMN score BIGINT")  # a new column with an old name
    spark.sql(f"ALTER TABLE {ns}.t ALTER COLUMN id TYPE BIGINT")
    spark.sql(f"INSERT INTO {ns}.t VALUES (2, 'b', 20)")
    # The old file's `score` (dropped) must not show up as the new `score`.
    assert rows(spark, f"SELECT id, label, score FROM {ns}.t ORDER BY id") == [(1, "a", None), (2, "b", 20)]
    # Spark wraps the catalog's refusal in a SparkException (UNSUPPORTED_TABLE_CHANGE).
    with pytest.raises(Exception, match="FIRST/AFTER"):
        spark.sql(f"ALTER TABLE {ns}.t ADD COLUMN z INT FIRST")


def test_alter_column_type_widens(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t (id INT)")
    spark.sql(f"INSERT INTO {ns}.t VALUES (7)")
    spark.sql(f"ALTER TABLE {ns}.t ALTER COLUMN id TYPE BIGINT")
    assert spark.table(f"{ns}.t").schema["id"].dataType.simpleString() == "bigint"
    spark.sql(f"INSERT INTO {ns}.t VALUES ({2**40})")
    assert rows(spark, f"SELECT id FROM {ns}.t ORDER BY id") == [(7,), (2**40,)]


def test_column_comments_are_added_changed_and_removed(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT)")
    spark.sql(f"ALTER TABLE {ns}.t ADD COLUMN region STRING COMMENT 'sales region'")
    spark.sql(f"ALTER TABLE {ns}.t ALTER COLUMN id COMMENT 'order number'")

    def comments() -> dict[str, str]:
        return {r.col_name: r.comment for r in spark.sql(f"DESCRIBE TABLE {ns}.t").collect() if not r.col_name.startswith("#")}

    assert comments() == {"id": "order number", "region": "sales region"}
    spark.sql(f"ALTER TABLE {ns}.t ALTER COLUMN region COMMENT 'ISO region'")
    assert comments()["region"] == "ISO region"
    spark.sql(f"INSERT INTO {ns}.t VALUES (1, 'eu')")  # commented columns take writes as any other
    assert rows(spark, f"SELECT id, region FROM {ns}.t") == [(1, "eu")]
    with catalog.open(lake_url_of(spark)) as lake:
        table = lake.load_table(f"{short(ns)}.t")
        assert table.schema.field("region").metadata[b"comment"] == b"ISO region"
        table.update_schema().set_comment("region", None).commit()  # the Python API removes one
    assert comments() == {"id": "order number", "region": None}


def test_properties_rename_and_drop(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT)")
    spark.sql(f"ALTER TABLE {ns}.t SET TBLPROPERTIES ('a' = '1', 'b' = '2')")
    spark.sql(f"ALTER TABLE {ns}.t UNSET TBLPROPERTIES ('a')")
    props = dict(rows(spark, f"SHOW TBLPROPERTIES {ns}.t"))
    assert props["b"] == "2" and "a" not in props
    spark.sql(f"ALTER TABLE {ns}.t RENAME TO {short(ns)}.u")  # the new name is in the same catalog
    assert rows(spark, f"SHOW TABLES IN {ns}") == [(short(ns), "u", False)]
    spark.sql(f"INSERT INTO {ns}.u VALUES (1)")
    with catalog.open(lake_url_of(spark)) as lake:
        purged = {f.path for f in lake.load_table(f"{short(ns)}.u").files()}
    spark.sql(f"DROP TABLE {ns}.u PURGE")
    assert rows(spark, f"SHOW TABLES IN {ns}") == []
    with catalog.open(lake_url_of(spark)) as lake:
        assert purged and not purged & {meta.path for meta in lake.objects.list("data/")}  # gone at once
    spark.sql(f"CREATE TABLE {ns}.v (id BIGINT)")
    spark.sql(f"INSERT INTO {ns}.v VALUES (1)")
    with catalog.open(lake_url_of(spark)) as lake:
        kept = {f.path for f in lake.load_table(f"{short(ns)}.v").files()}
    spark.sql(f"DROP TABLE {ns}.v")
    with catalog.open(lake_url_of(spark)) as lake:
        assert kept <= {meta.path for meta in lake.objects.list("data/")}  # kept for time travel until gc
    with pytest.raises(PySparkException, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql(f"SELECT * FROM {ns}.v")


# -- views, USE, DataFrame API ---------------------------------------------------------


def test_views_by_three_part_name(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t AS SELECT id FROM range(6)")
    spark.sql(f"CREATE VIEW {ns}.evens AS SELECT id FROM {ns}.t WHERE id % 2 = 0")
    assert rows(spark, f"SELECT id FROM {ns}.evens ORDER BY id") == [(0,), (2,), (4,)]
    assert [r[1] for r in rows(spark, f"SHOW VIEWS IN {ns}")] == ["evens"]
    spark.sql(f"INSERT INTO {ns}.t VALUES (6)")
    assert count(spark, f"SELECT count(*) FROM {ns}.evens") == 4  # a view reads its table fresh
    spark.sql(f"DROP VIEW {ns}.evens")
    assert rows(spark, f"SHOW VIEWS IN {ns}") == []


def test_use_and_spark_table(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t AS SELECT id FROM range(4)")
    spark.sql(f"USE {ns}")
    try:
        assert count(spark, "SELECT count(*) FROM t") == 4
    finally:
        spark.sql("USE spark_catalog.default")
    assert spark.table(f"{ns}.t").count() == 4


def test_write_to_append_create_replace_and_insert_overwrite(spark: SparkSession, ns: str) -> None:
    df = spark.range(5).withColumnRenamed("id", "x")
    df.writeTo(f"{ns}.t").create()
    df.writeTo(f"{ns}.t").append()
    assert count(spark, f"SELECT count(*) FROM {ns}.t") == 10
    spark.range(2).withColumnRenamed("id", "x").writeTo(f"{ns}.t").createOrReplace()
    assert count(spark, f"SELECT count(*) FROM {ns}.t") == 2
    spark.sql(f"INSERT INTO {ns}.t VALUES (100)")
    spark.sql(f"INSERT OVERWRITE {ns}.t VALUES (7), (8)")
    assert rows(spark, f"SELECT x FROM {ns}.t ORDER BY x") == [(7,), (8,)]
    # A write option nobody honours is an error, and nothing is written.
    with pytest.raises(PySparkException, match="replaceWhere"):
        spark.range(1).withColumnRenamed("id", "x").writeTo(f"{ns}.t").option("replaceWhere", "x = 7").append()
    assert rows(spark, f"SELECT x FROM {ns}.t ORDER BY x") == [(7,), (8,)]


def test_an_overwrite_that_would_drop_a_concurrent_commit_is_a_retryable_conflict(
    spark: SparkSession, ns: str, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    from catalog.errors import RetryableConflictError
    from catalog.spark import catalog_errors

    spark.sql(f"CREATE TABLE {ns}.t (n BIGINT)")
    spark.sql(f"INSERT INTO {ns}.t VALUES (1), (2), (3)")
    first = int(dict(rows(spark, f"SHOW TBLPROPERTIES {ns}.t"))["lakekv.version"])
    url, table, flag = lake_url_of(spark), f"{short(ns)}.t", str(tmp_path / "appended")

    @F.udf(LongType())
    def append_once(n: int) -> int:
        """In a Python worker (its own process), while the query runs: another writer appends."""
        import os

        import pyarrow as pa

        import catalog

        try:  # O_EXCL: of the tasks running at once, only one goes on
            os.close(os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return n
        with catalog.open(url) as lake:
            lake.load_table(table).append(pa.table({"n": pa.array([4], pa.int64())}))
        return n

    spark.udf.register("append_once_sql", append_once)
    query = spark.table(f"{ns}.t").select((append_once("n") * 2).alias("n"))
    with pytest.raises(PySparkException, match="RetryableConflictError") as raw:
        query.writeTo(f"{ns}.t").overwrite(F.lit(True))
    # The query read the table it overwrites: the check of its reads finds the append first.
    assert "read table" in str(raw.value)
    assert rows(spark, f"SELECT n FROM {ns}.t ORDER BY n") == [(1,), (2,), (3,), (4,)]  # nothing replaced
    os.remove(flag)  # the same, with the catalog's class back in Python
    with pytest.raises(RetryableConflictError) as conflict:
        with catalog_errors():
            spark.sql(f"INSERT OVERWRITE {ns}.t SELECT append_once_sql(n) * 2 FROM {ns}.t")
    assert (conflict.value.ours, conflict.value.object) == ("overwrite", table)
    assert count(spark, f"SELECT count(*) FROM {ns}.t") == 5
    spark.sql(f"INSERT OVERWRITE {ns}.t SELECT n * 10 FROM {ns}.t")  # nothing committed meanwhile: replaces
    assert rows(spark, f"SELECT n FROM {ns}.t ORDER BY n") == [(10,), (20,), (30,), (40,), (40,)]
    # Written from a time-travel read, an overwrite restores that version's rows (the target is current).
    spark.sql(f"INSERT OVERWRITE {ns}.t SELECT * FROM {ns}.t VERSION AS OF {first}")
    assert rows(spark, f"SELECT n FROM {ns}.t ORDER BY n") == [(1,), (2,), (3,)]


def test_time_travel_version_and_timestamp(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT)")
    spark.sql(f"INSERT INTO {ns}.t VALUES (1)")
    with catalog.open(lake_url_of(spark)) as lake:
        first = lake.version
        between = dt.datetime.now(dt.timezone.utc)
    spark.sql(f"INSERT INTO {ns}.t VALUES (2)")
    assert rows(spark, f"SELECT id FROM {ns}.t VERSION AS OF {first}") == [(1,)]
    stamp = between.strftime("%Y-%m-%d %H:%M:%S.%f")
    assert rows(spark, f"SELECT id FROM {ns}.t TIMESTAMP AS OF '{stamp}'") == [(1,)]
    assert count(spark, f"SELECT count(*) FROM {ns}.t") == 2
    with pytest.raises(PySparkException, match="is a number"):
        spark.sql(f"SELECT * FROM {ns}.t VERSION AS OF 'latest'")


def test_timestamp_as_of_a_microsecond_after_a_commit_sees_it(spark: SparkSession, ns: str) -> None:
    """Spark gives the plugin microseconds; the lakehouse's commit times are finer than milliseconds,
    so cutting the time to a millisecond could drop a commit made earlier in that millisecond."""
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT)")
    checked = 0
    for n in range(1, 6):
        spark.sql(f"INSERT INTO {ns}.t VALUES ({n})")
        with catalog.open(lake_url_of(spark)) as lake:
            committed = lake.history(limit=1)[0].timestamp
        after = dt.datetime.fromtimestamp(committed, dt.timezone.utc) + dt.timedelta(microseconds=1)
        if after.microsecond % 1000 == 0:
            continue  # on a millisecond already: cutting to milliseconds would lose nothing here
        stamp = after.strftime("%Y-%m-%d %H:%M:%S.%f")
        assert count(spark, f"SELECT count(*) FROM {ns}.t TIMESTAMP AS OF '{stamp}'") == n
        checked += 1
    assert checked, "every commit landed on a whole millisecond: the storage's clock is too coarse for this test"


def test_every_type_round_trips_and_maps(spark: SparkSession, ns: str) -> None:
    schema = EVERY_TYPE.append(pa.field("m", pa.map_(pa.string(), pa.int64())))
    data = every_type_rows().append_column("m", pa.array([[("a", 1)], [], None], type=pa.map_(pa.string(), pa.int64())))
    with catalog.open(lake_url_of(spark)) as lake:
        lake.load_table  # the namespace exists already (fixture)
        lake.create_table(f"{short(ns)}.src", schema).append(data)
    spark.sql(f"CREATE TABLE {ns}.copy AS SELECT * FROM {ns}.src")
    with catalog.open(lake_url_of(spark)) as lake:
        source = lake.load_table(f"{short(ns)}.src").scan().to_arrow()
        copy = lake.load_table(f"{short(ns)}.copy").scan().to_arrow()
    assert copy.schema.names == source.schema.names
    for row_copy, row_source in zip(rows_by_id(copy), rows_by_id(source)):
        row_source = dict(row_source)
        row_copy = dict(row_copy)
        assert row_copy.pop("m") == row_source.pop("m")
        assert row_copy == row_source


# -- freshness: every query sees the latest version at its planning --------------------


def test_another_process_commit_is_seen_by_the_next_query(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT)")
    spark.sql(f"INSERT INTO {ns}.t VALUES (1), (2)")
    assert count(spark, f"SELECT count(*) FROM {ns}.t") == 2
    append_in_another_process(lake_url_of(spark), f"{short(ns)}.t", list(range(10, 20)))
    assert count(spark, f"SELECT count(*) FROM {ns}.t") == 12
    assert count(spark, f"SELECT count(*) FROM {ns}.t WHERE id > -1") == 12


def test_own_insert_and_insert_select_from_itself(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT)")
    for i in range(4):
        spark.sql(f"INSERT INTO {ns}.t VALUES ({i})")
    with catalog.open(lake_url_of(spark)) as lake:
        assert lake.load_table(f"{short(ns)}.t").scan().count() == 4
    assert count(spark, f"SELECT count(*) FROM {ns}.t") == 4
    spark.sql(f"INSERT INTO {ns}.t VALUES (4), (5), (6)")
    spark.sql(f"INSERT INTO {ns}.t SELECT * FROM {ns}.t")
    assert count(spark, f"SELECT count(*) FROM {ns}.t") == 14


def test_filtered_then_unfiltered_query(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT, p STRING) PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {ns}.t SELECT id, CAST(id % 3 AS STRING) FROM range(12)")
    assert count(spark, f"SELECT count(*) FROM {ns}.t WHERE p = '1'") == 4
    assert count(spark, f"SELECT count(*) FROM {ns}.t") == 12
    df = spark.table(f"{ns}.t")
    assert df.where("p = '2'").count() == 4
    assert df.count() == 12


def test_a_dataframe_keeps_the_version_it_was_analysed_at(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT)")
    spark.sql(f"INSERT INTO {ns}.t VALUES (1)")
    df = spark.table(f"{ns}.t")
    append_in_another_process(lake_url_of(spark), f"{short(ns)}.t", [2, 3])
    assert df.count() == 1
    assert spark.table(f"{ns}.t").count() == 3


def test_filters_prune_files(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT, p STRING) PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {ns}.t SELECT id, CAST(id % 4 AS STRING) FROM range(40)")
    with catalog.open(lake_url_of(spark)) as lake:
        table = lake.load_table(f"{short(ns)}.t")
        all_files, p3_files = len(table.files()), len(table.files(filter=pc.field("p") == "3"))
    assert all_files == 4 * p3_files  # one or more files per partition, as many in each (one per task)
    assert f"InMemoryFileIndex({p3_files} paths)" in explain(spark, f"SELECT * FROM {ns}.t WHERE p = '3'")
    assert f"InMemoryFileIndex({all_files} paths)" in explain(spark, f"SELECT * FROM {ns}.t")
    assert count(spark, f"SELECT count(*) FROM {ns}.t WHERE p = '3' AND id >= 0") == 10


def test_files_from_before_parquet_field_ids_read_through_the_python_source(spark: SparkSession, ns: str) -> None:
    """Entries without parquet_field_ids (older writers) are still read right, after a rename."""
    from catalog.datafiles import DataFile

    with catalog.open(lake_url_of(spark)) as lake:
        table = lake.create_table(f"{short(ns)}.t", pa.schema([("id", pa.int64()), ("name", pa.string())]))
        written = table.write_files(pa.table({"id": [1], "name": ["a"]}).cast(table.schema))
        # What an older writer recorded: the same file, without the flag.
        old = [DataFile.from_json({k: v for k, v in f.to_json().items() if k != "parquet_field_ids"}) for f in written]
        table.commit_files(old)
        lake.load_table(f"{short(ns)}.t").update_schema().rename_column("name", "label").commit()
    assert rows(spark, f"SELECT id, label FROM {ns}.t") == [(1, "a")]


def test_catalog_options_are_checked(spark: SparkSession, lake_catalog: str) -> None:
    spark.conf.set("spark.sql.catalog.badopts", "io.lakekv.spark.LakehouseCatalog")
    spark.conf.set("spark.sql.catalog.badopts.url", lake_catalog)
    spark.conf.set("spark.sql.catalog.badopts.replaceWhere", "x")
    with pytest.raises(Exception, match="unknown option spark.sql.catalog.badopts.replaceWhere"):
        spark.sql("SHOW NAMESPACES IN badopts").collect()


def test_decimal_and_date_filters_prune(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t (d DATE, amount DECIMAL(10,2))")
    spark.sql(f"INSERT INTO {ns}.t VALUES (DATE'2024-01-01', 1.50)")
    spark.sql(f"INSERT INTO {ns}.t VALUES (DATE'2025-01-01', 9.25)")  # one row: one file
    assert rows(spark, f"SELECT amount FROM {ns}.t WHERE d > DATE'2024-06-01'") == [(Decimal("9.25"),)]
    assert "InMemoryFileIndex(1 paths)" in explain(spark, f"SELECT * FROM {ns}.t WHERE amount < 2")


def test_a_name_not_in_unicode_nfc_is_refused(spark: SparkSession, ns: str) -> None:
    """``café`` typed as NFD is not a second namespace or table beside the NFC one (catalog.names)."""
    nfc, nfd = "caf\u00e9", "cafe\u0301"
    spark.sql(f"CREATE NAMESPACE {ns}.`{nfc}`")
    spark.sql(f"CREATE TABLE {ns}.`{nfc}`.`{nfc}` (id INT)")
    for statement in (
        f"CREATE NAMESPACE {ns}.`{nfd}`",
        f"CREATE TABLE {ns}.`{nfc}`.`{nfd}` (id INT)",
        f"INSERT INTO {ns}.`{nfd}`.`{nfc}` VALUES (1)",
    ):
        with pytest.raises(PySparkException, match="not in Unicode NFC"):
            spark.sql(statement)
    assert [r[0] for r in rows(spark, f"SHOW NAMESPACES IN {ns}")] == [f"{short(ns)}.`{nfc}`"]
    assert [r[1] for r in rows(spark, f"SHOW TABLES IN {ns}.`{nfc}`")] == [nfc]
