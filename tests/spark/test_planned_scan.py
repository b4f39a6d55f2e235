"""How the plugin hands a query's planned files to Spark (PlannedParquetScan, ScanPlans).

A scan whose files fit in one task reports one partition holding every row,
so a global aggregate over it runs without a shuffle. That is a claim Spark
plans joins and aggregates on: these tests check the answers of the shapes
that use it (grouping, ordering, windows, joins with one-task and many-task
scans, unions) against the same rows computed in Python, with and without
the claim. Plans kept per version must never hide a commit.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from pyspark.sql import SparkSession

import catalog

pytestmark = pytest.mark.spark


@contextmanager
def settings(spark: SparkSession, **values: str) -> Iterator[None]:
    """SQL settings for a block, put back after it (the session is shared)."""
    keys = {key.replace("__", "."): value for key, value in values.items()}
    before = {key: spark.conf.get(key, None) for key in keys}
    for key, value in keys.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def physical_plan(spark: SparkSession, sql: str) -> str:
    return str(spark.sql(f"EXPLAIN {sql}").collect()[0][0])


def rows(spark: SparkSession, sql: str) -> list[tuple[object, ...]]:
    return [tuple(row) for row in spark.sql(sql).collect()]


@pytest.fixture
def tables(spark: SparkSession, ns: str) -> dict[str, list[tuple[int, int]]]:
    """``one``: one small file (one task); ``many``: four files (two tasks by Spark's default split sizes); rows as (k, v)."""
    one = [(k, k % 3) for k in range(20)]
    many = [(k, k % 5) for k in range(10, 50)]
    spark.sql(f"CREATE TABLE {ns}.one (k BIGINT, v BIGINT)")
    spark.sql(f"INSERT INTO {ns}.one SELECT /*+ REPARTITION(1) */ id, id % 3 FROM range(20)")
    spark.sql(f"CREATE TABLE {ns}.many (k BIGINT, v BIGINT)")
    for start in range(0, len(many), 10):
        spark.sql(f"INSERT INTO {ns}.many SELECT /*+ REPARTITION(1) */ id, id % 5 FROM range({10 + start}, {20 + start})")
    return {"one": one, "many": many}


def test_a_global_aggregate_over_one_task_needs_no_shuffle(spark: SparkSession, ns: str, tables: dict) -> None:
    query = f"SELECT count(*), sum(v) FROM {ns}.one WHERE k >= 5"
    assert "Exchange" not in physical_plan(spark, query)
    assert rows(spark, query) == [(15, sum(v for k, v in tables["one"] if k >= 5))]
    many = f"SELECT count(*), sum(v) FROM {ns}.many"
    assert "Exchange SinglePartition" in physical_plan(spark, many)
    assert rows(spark, many) == [(40, sum(v for _, v in tables["many"]))]
    # Pruned to one of the four files: one task again.
    pruned = f"SELECT count(*), sum(v) FROM {ns}.many WHERE k < 15"
    assert "Exchange" not in physical_plan(spark, pruned)
    assert rows(spark, pruned) == [(5, sum(v for k, v in tables["many"] if k < 15))]


def test_one_task_is_claimed_only_when_small_and_without_bucketed_shuffles(spark: SparkSession, ns: str, tables: dict) -> None:
    """Rows AQE would not coalesce into one partition, or Spark's shuffle-to-match-keys on: the shuffle stays."""
    query = f"SELECT count(*), sum(v) FROM {ns}.one WHERE k >= 5"
    expected = [(15, sum(v for k, v in tables["one"] if k >= 5))]
    with settings(spark, spark__sql__adaptive__advisoryPartitionSizeInBytes="64b"):  # 20 rows of 16 bytes
        assert "Exchange SinglePartition" in physical_plan(spark, query)
        assert rows(spark, query) == expected
    with settings(spark, spark__sql__sources__v2__bucketing__shuffle__enabled="true"):
        assert "Exchange SinglePartition" in physical_plan(spark, query)
        joined = f"SELECT count(*) FROM {ns}.one o JOIN {ns}.many m ON o.k = m.k"
        assert rows(spark, joined) == [(10,)]
    assert "Exchange" not in physical_plan(spark, query)


@pytest.mark.parametrize("bucketing", ["true", "false"])
def test_queries_over_one_task_scans_answer_right(spark: SparkSession, ns: str, tables: dict, bucketing: str) -> None:
    """With Spark's key-grouped planning on (the default) and off."""
    one, many = tables["one"], tables["many"]
    with settings(spark, spark__sql__sources__v2__bucketing__enabled=bucketing):
        assert rows(spark, f"SELECT v, count(*), sum(k) FROM {ns}.one GROUP BY v ORDER BY v") == [
            (v, sum(1 for _, w in one if w == v), sum(k for k, w in one if w == v)) for v in range(3)
        ]
        assert rows(spark, f"SELECT k FROM {ns}.one ORDER BY v DESC, k LIMIT 3") == [(2,), (5,), (8,)]
        ranked = rows(spark, f"SELECT k, rank() OVER (PARTITION BY v ORDER BY k DESC) FROM {ns}.one WHERE k < 6")
        assert sorted(ranked) == [(0, 2), (1, 2), (2, 2), (3, 1), (4, 1), (5, 1)]
        assert rows(spark, f"SELECT count(DISTINCT v) FROM {ns}.one") == [(3,)]
        # One task joined with four, with itself, and with another one-task scan of the same table.
        joined = rows(spark, f"SELECT o.k, m.v FROM {ns}.one o JOIN {ns}.many m ON o.k = m.k ORDER BY o.k")
        assert joined == [(k, v) for k, v in many if k < 20]
        on_v = rows(spark, f"SELECT count(*) FROM {ns}.one a JOIN {ns}.one b ON a.v = b.v")
        assert on_v == [(sum(c * c for c in Counter(v for _, v in one).values()),)]
        pruned = rows(
            spark,
            f"SELECT a.v, count(*) FROM {ns}.one a JOIN (SELECT * FROM {ns}.one WHERE k < 3) b "
            f"ON a.v = b.v GROUP BY a.v ORDER BY a.v",
        )
        assert pruned == [(v, sum(1 for _, w in one if w == v)) for v in range(3)]
        grouped_join = rows(
            spark,
            f"SELECT m.v, count(*) FROM {ns}.many m JOIN {ns}.one o ON m.v = o.v GROUP BY m.v ORDER BY m.v",
        )
        counts = Counter(v for _, v in one)
        assert grouped_join == [
            (v, sum(counts[v] for _, w in many if w == v)) for v in sorted({v for _, v in many}) if counts[v]
        ]
        union = rows(spark, f"SELECT count(*), sum(k) FROM (SELECT k FROM {ns}.one UNION ALL SELECT k FROM {ns}.many)")
        assert union == [(60, sum(k for k, _ in one) + sum(k for k, _ in many))]


def test_a_repeated_query_sees_another_process_commit(spark: SparkSession, ns: str, tables: dict) -> None:
    """The plan kept for a version is not used once a load finds a newer one."""
    query = f"SELECT count(*), sum(k) FROM {ns}.one WHERE k < 100"
    assert rows(spark, query) == [(20, 190)]
    assert rows(spark, query) == [(20, 190)]  # the same version: the kept plan
    url = spark.conf.get("spark.sql.catalog.lake.url")
    table = f"{ns.split('.', 1)[1]}.one"
    with catalog.open(url) as lake:
        before = lake.version
    code = textwrap.dedent(
        f"""
        import pyarrow as pa, catalog
        with catalog.open({url!r}) as lake:
            t = lake.load_table({table!r})
            t.append(pa.table({{"k": [50, 60], "v": [0, 0]}}).cast(t.schema))
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert rows(spark, query) == [(22, 300)]
    assert rows(spark, f"SELECT count(*), sum(k) FROM {ns}.one VERSION AS OF {before} WHERE k < 100") == [(20, 190)]
