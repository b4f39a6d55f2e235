"""Partition and conditional overwrites through the catalog plugin, each compared row by row with plain Spark.

The expected table is computed by Spark from the rows before the write: the
rows the overwrite does not replace, plus the new rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import catalog
from tests.spark.lake_history import commits_after
from tests.spark.test_catalog_plugin import lake_url_of, rows

pytestmark = pytest.mark.spark

BEFORE = """
    (1, 10, 'eu'), (2, NULL, 'eu'), (3, 7, 'us'), (4, 2, 'us'),
    (5, 5, 'apac'), (6, 9, NULL), (7, NULL, 'us'), (8, 1, 'apac')
"""
NEW = "SELECT * FROM VALUES (20, 6, 'eu'), (21, 1, 'apac'), (22, 8, 'eu') AS new(id, amount, region)"


@pytest.fixture
def orders(spark: SparkSession, ns: str) -> str:
    table = f"{ns}.orders"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, amount INT, region STRING) PARTITIONED BY (region)")
    spark.sql(f"INSERT INTO {table} VALUES {BEFORE}")
    spark.sql(f"INSERT INTO {table} VALUES (9, 3, 'eu')")  # a second file in 'eu'
    return table


@pytest.fixture
def dynamic_mode(spark: SparkSession) -> Iterator[None]:
    key = "spark.sql.sources.partitionOverwriteMode"
    spark.conf.set(key, "dynamic")
    try:
        yield
    finally:
        spark.conf.unset(key)


def table_rows(spark: SparkSession, table: str) -> list[tuple[object, ...]]:
    return rows(spark, f"SELECT id, amount, region FROM {table} ORDER BY id")


def expected_rows(kept: DataFrame, new: DataFrame) -> list[tuple[object, ...]]:
    return [tuple(r) for r in kept.unionByName(new).orderBy("id").collect()]


def before(spark: SparkSession, table: str) -> DataFrame:
    """The table's rows now, as a plain DataFrame (collected, so later commits do not change it)."""
    return spark.createDataFrame(spark.table(table).collect(), spark.table(table).schema)


def test_insert_overwrite_of_a_static_partition_replaces_only_it(spark: SparkSession, orders: str) -> None:
    old, new = before(spark, orders), spark.sql(NEW).where("region = 'eu'")
    spark.sql(f"INSERT OVERWRITE {orders} PARTITION (region = 'eu') SELECT id, amount FROM ({NEW}) WHERE region = 'eu'")
    assert table_rows(spark, orders) == expected_rows(old.where("NOT (region <=> 'eu')"), new)


def test_insert_overwrite_in_dynamic_mode_replaces_the_partitions_written(
    spark: SparkSession, orders: str, dynamic_mode: None
) -> None:
    old, new = before(spark, orders), spark.sql(NEW)
    spark.sql(f"INSERT OVERWRITE {orders} {NEW}")
    assert table_rows(spark, orders) == expected_rows(old.where("region IS NULL OR region NOT IN ('eu', 'apac')"), new)


def test_overwrite_partitions_replaces_the_partitions_written(spark: SparkSession, orders: str) -> None:
    old, new = before(spark, orders), spark.sql(NEW).where("region = 'apac'")
    new.writeTo(orders).overwritePartitions()
    assert table_rows(spark, orders) == expected_rows(old.where("NOT (region <=> 'apac')"), new)
    with catalog.open(lake_url_of(spark)) as lake:
        version = lake.version
    spark.sql(NEW).where("id < 0").writeTo(orders).overwritePartitions()  # no rows: no partition, no commit
    with catalog.open(lake_url_of(spark)) as lake:
        assert commits_after(lake, version) == []


def test_overwrite_by_condition_replaces_exactly_the_matching_rows(spark: SparkSession, orders: str) -> None:
    old, new = before(spark, orders), spark.sql(NEW)
    new.writeTo(orders).overwrite(F.col("amount") > 5)  # rows of every partition, files rewritten in part
    assert table_rows(spark, orders) == expected_rows(old.where("NOT coalesce(amount > 5, false)"), new)


def test_dynamic_overwrite_of_an_unpartitioned_table_replaces_it(spark: SparkSession, ns: str, dynamic_mode: None) -> None:
    table = f"{ns}.flat"
    spark.sql(f"CREATE TABLE {table} (id BIGINT)")
    spark.sql(f"INSERT INTO {table} VALUES (1), (2)")
    spark.sql(f"INSERT OVERWRITE {table} VALUES (3)")
    assert rows(spark, f"SELECT id FROM {table}") == [(3,)]


def test_an_overwrite_that_fails_or_cannot_be_exact_changes_nothing(spark: SparkSession, orders: str) -> None:
    with catalog.open(lake_url_of(spark)) as lake:
        version = lake.version
        stored_before = {m.path for m in lake.objects.list("data/")}
    expected = table_rows(spark, orders)
    with pytest.raises(PySparkException, match="boom"):
        spark.sql(
            f"INSERT OVERWRITE {orders} PARTITION (region = 'eu') "
            "SELECT id, CAST(IF(id = 2, raise_error('boom'), 1) AS INT) FROM range(5)"
        )
    # No source-filter form: Spark refuses it (a SparkException py4j passes on unconverted).
    with pytest.raises((PySparkException, Py4JJavaError), match="does not support overwrite by expression"):
        spark.sql(NEW).writeTo(orders).overwrite(F.col("id") + 1 > 3)
    assert table_rows(spark, orders) == expected
    with catalog.open(lake_url_of(spark)) as lake:
        assert commits_after(lake, version) == []
        leftovers = {m.path for m in lake.objects.list("data/")} - stored_before
        # abort() deletes the files of tasks that finished; a task cut off mid-write leaves its file to gc.
        lake.gc(grace_s=0)
        assert not leftovers & {m.path for m in lake.objects.list("data/")}  # the failed job's files are gone


def test_a_concurrent_commit_conflicts_only_if_it_may_hold_replaced_rows(
    spark: SparkSession, orders: str, tmp_path: Path
) -> None:
    from pyspark.sql.types import LongType

    url, table = lake_url_of(spark), orders.split(".", 1)[1]

    def overwrite_eu_while_appending_to(region: str) -> None:
        flag = str(tmp_path / f"appended-{region}")

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
                t = lake.load_table(table)
                t.append(pa.table({"id": [100], "amount": [1], "region": [region]}).cast(t.schema))
            return n

        query = spark.sql(NEW).where("region = 'eu'").select(append_once("id").alias("id"), "amount", "region")
        query.writeTo(orders).overwrite(F.col("region") == "eu")

    old = before(spark, orders)
    overwrite_eu_while_appending_to("us")  # another partition: the overwrite commits on top of it
    appended = spark.createDataFrame([(100, 1, "us")], old.schema)
    new = spark.sql(NEW).where("region = 'eu'")
    assert table_rows(spark, orders) == expected_rows(old.where("NOT (region <=> 'eu')").unionByName(appended), new)

    now = table_rows(spark, orders)
    with pytest.raises(PySparkException, match="RetryableConflictError"):
        overwrite_eu_while_appending_to("eu")  # the replaced partition: it may hold rows the write never saw
    assert sorted(table_rows(spark, orders), key=lambda r: (r[0], str(r[2]))) == sorted(
        [*now, (100, 1, "eu")], key=lambda r: (r[0], str(r[2]))
    )
