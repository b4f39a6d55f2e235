"""DELETE FROM and TRUNCATE TABLE through the catalog plugin (LakehouseTable as SupportsDelete).

Each delete is compared row by row with the same condition applied by plain
Spark to a DataFrame of the rows before it: a row is kept unless the
condition is TRUE for it (false and NULL both keep it).
"""

from __future__ import annotations

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

import catalog
from catalog.schema import field_id
from tests.spark.lake_history import commits_after
from tests.spark.test_catalog_plugin import lake_url_of, rows, short

pytestmark = pytest.mark.spark

COLUMNS = "id BIGINT, region STRING, amount INT, day DATE, note STRING"
ROWS = """
    (1, 'eu', 10, DATE'2024-01-01', 'apple'), (2, 'eu', NULL, DATE'2024-01-02', NULL),
    (3, 'us', 7, DATE'2024-01-01', 'avocado'), (4, 'us', 2, NULL, 'banana'),
    (5, 'apac', 5, DATE'2024-01-03', 'apricot'), (6, NULL, 9, DATE'2024-01-02', 'cherry'),
    (7, 'us', NULL, DATE'2024-01-04', 'almond'), (8, 'apac', 1, DATE'2024-01-01', NULL)
"""


def make_table(spark: SparkSession, ns: str) -> str:
    table = f"{ns}.orders"
    spark.sql(f"CREATE TABLE {table} ({COLUMNS}) PARTITIONED BY (region)")
    spark.sql(f"INSERT INTO {table} VALUES {ROWS}")
    spark.sql(f"INSERT INTO {table} VALUES (9, 'eu', 3, DATE'2024-01-05', 'kiwi')")  # a second file per region
    return table


@pytest.mark.parametrize(
    "condition",
    [
        "region = 'eu'",  # whole partitions: no file read
        "amount > 5",
        "amount > 5 AND region = 'us'",
        "amount IS NULL OR day < DATE'2024-01-02'",
        "NOT (amount < 5)",  # NULL amounts stay: NOT NULL is NULL
        "region IN ('us', 'apac')",
        "NOT (region IN ('us', 'apac'))",  # the NULL region stays
        "note LIKE 'a%'",
        "amount <=> NULL",
        "NOT (amount <=> 10)",  # <=> is never NULL: NULL amounts go
        "id = 4 OR (region = 'apac' AND NOT (note LIKE 'apr%'))",
    ],
)
def test_delete_removes_exactly_the_rows_plain_spark_selects(spark: SparkSession, ns: str, condition: str) -> None:
    table = make_table(spark, ns)
    expected = rows(spark, f"SELECT * FROM {table} WHERE NOT coalesce({condition}, false) ORDER BY id")
    spark.sql(f"DELETE FROM {table} WHERE {condition}")
    assert rows(spark, f"SELECT * FROM {table} ORDER BY id") == expected
    assert len(expected) < 9  # every condition deletes something


def version_of(spark: SparkSession) -> int:
    """The lakehouse version (what VERSION AS OF takes)."""
    with catalog.open(lake_url_of(spark)) as lake:
        return lake.version


def test_a_delete_of_whole_partitions_is_one_commit_that_reads_no_file(spark: SparkSession, ns: str) -> None:
    table = make_table(spark, ns)
    name = f"{short(ns)}.orders"
    with catalog.open(lake_url_of(spark)) as lake:
        t = lake.load_table(name)
        region_id = str(field_id(t.schema.field("region")))
        eu_files = [f for f in t.files() if f.partition.get(region_id) == "eu"]
        assert len(eu_files) == 2
        others = {f.id for f in t.files()} - {f.id for f in eu_files}
        before = lake.version
        for f in eu_files:  # garbage in their place: a read of one would fail the delete
            lake.objects.put(f.path, b"not parquet")
    spark.sql(f"DELETE FROM {table} WHERE region = 'eu'")
    with catalog.open(lake_url_of(spark)) as lake:
        assert [h.operations[0]["kind"] for h in commits_after(lake, before)] == ["delete"]
        assert {f.id for f in lake.load_table(name).files()} == others  # the other files untouched
    assert rows(spark, f"SELECT id FROM {table} ORDER BY id") == [(3,), (4,), (5,), (6,), (7,), (8,)]


def test_truncate_table_empties_it_and_keeps_time_travel(spark: SparkSession, ns: str) -> None:
    table = make_table(spark, ns)
    version = version_of(spark)
    spark.sql(f"TRUNCATE TABLE {table}")
    assert rows(spark, f"SELECT count(*) FROM {table}") == [(0,)]
    assert rows(spark, f"SELECT count(*) FROM {table} VERSION AS OF {version}") == [(9,)]


@pytest.mark.parametrize("condition", ["id + 1 > 3", "score > 1.5", "score = double('NaN')"])
def test_a_condition_without_an_exact_form_is_a_rewrite_by_spark(spark: SparkSession, ns: str, condition: str) -> None:
    """No source-filter form, or a float column: Spark evaluates it, copy-on-write (RowLevelRewrite)."""
    table = f"{ns}.m"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, score DOUBLE)")
    spark.sql(f"INSERT INTO {table} VALUES (1, 1.0), (2, 2.0), (3, double('NaN')), (4, NULL)")
    expected = rows(spark, f"SELECT * FROM {table} WHERE NOT coalesce({condition}, false) ORDER BY id")
    version = version_of(spark)
    spark.sql(f"DELETE FROM {table} WHERE {condition}")
    with catalog.open(lake_url_of(spark)) as lake:
        assert len(commits_after(lake, version)) == 1
    assert rows(spark, f"SELECT * FROM {table} ORDER BY id") == expected
