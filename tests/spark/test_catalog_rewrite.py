"""UPDATE and MERGE INTO through the catalog plugin (copy-on-write, Spark's own Parquet writer).

Each statement is compared row by row with the same change computed by plain
Spark SQL over a temporary view of the rows before it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

import catalog
from tests.spark.lake_history import commits_after
from tests.spark.test_catalog_plugin import lake_url_of, rows, short

pytestmark = pytest.mark.spark

COLUMNS = "id BIGINT, region STRING, amount INT, day DATE, note STRING, price DECIMAL(10,2)"
ROWS = """
    (1, 'eu', 10, DATE'2024-01-01', 'apple', 1.50), (2, 'eu', NULL, DATE'2024-01-02', NULL, NULL),
    (3, 'us', 7, DATE'2024-01-01', 'avocado', 3.25), (4, 'us', 2, NULL, 'banana', 0.99),
    (5, 'apac', 5, DATE'2024-01-03', 'apricot', 12.00), (6, NULL, 9, DATE'2024-01-02', 'cherry', 7.10),
    (7, 'us', NULL, DATE'2024-01-04', 'almond', NULL), (8, 'apac', 1, DATE'2024-01-01', NULL, 2.00)
"""
SOURCE = """
    SELECT *, CAST(NULL AS DATE) AS day, CAST(NULL AS DECIMAL(10,2)) AS price FROM VALUES
        (2, 'eu', 20, 'two'), (4, 'us', -4, 'four'), (5, 'apac', NULL, 'five'),
        (10, 'eu', 100, 'ten'), (11, NULL, 110, 'eleven')
    AS src(id, region, amount, note)
"""


def make_table(spark: SparkSession, ns: str) -> str:
    table = f"{ns}.orders"
    spark.sql(f"CREATE TABLE {table} ({COLUMNS}) PARTITIONED BY (region)")
    spark.sql(f"INSERT INTO {table} VALUES {ROWS}")
    spark.sql(f"INSERT INTO {table} VALUES (9, 'eu', 3, DATE'2024-01-05', 'kiwi', 4.00)")  # a second file in 'eu'
    return table


def snapshot(spark: SparkSession, table: str, view: str) -> None:
    """The table's rows now as a temporary view over collected rows (later commits do not change it)."""
    spark.createDataFrame(spark.table(table).collect(), spark.table(table).schema).createOrReplaceTempView(view)


def table_rows(spark: SparkSession, table: str) -> list[tuple[object, ...]]:
    return rows(spark, f"SELECT * FROM {table} ORDER BY id, region, amount")


@pytest.mark.parametrize(
    ("assignments", "condition"),
    [
        ("amount = amount * 2", "region = 'us'"),
        ("note = upper(note), price = price + 1", "amount > 4"),
        ("amount = 0", "amount IS NULL OR day < DATE'2024-01-02'"),
        ("region = 'moved'", "id IN (1, 5, 6)"),  # rows change partition
        ("day = DATE'2030-01-01'", "price * 2 > 5"),  # no exact form: Spark filters the rows
        ("amount = -1", None),  # every row
        ("amount = -1", "id > 100"),  # no row
    ],
)
def test_update_changes_exactly_the_rows_plain_spark_changes(
    spark: SparkSession, ns: str, assignments: str, condition: str | None
) -> None:
    table = make_table(spark, ns)
    snapshot(spark, table, "before")
    where = "" if condition is None else f" WHERE {condition}"
    spark.sql(f"UPDATE {table} SET {assignments}{where}")
    changed = {a.split("=", 1)[0].strip(): a.split("=", 1)[1].strip() for a in assignments.split(", ")}
    test = "true" if condition is None else f"coalesce({condition}, false)"
    columns = ", ".join(
        f"IF({test}, {changed[c]}, {c}) AS {c}" if c in changed else c
        for c in ("id", "region", "amount", "day", "note", "price")
    )
    expected = rows(spark, f"SELECT * FROM (SELECT {columns} FROM before) ORDER BY id, region, amount")
    assert table_rows(spark, table) == expected


def test_an_update_is_one_commit_that_rewrites_only_the_files_it_reads(spark: SparkSession, ns: str) -> None:
    table = make_table(spark, ns)
    name = f"{short(ns)}.orders"
    with catalog.open(lake_url_of(spark)) as lake:
        before = lake.version
        t = lake.load_table(name)
        region_id = str(t.schema.field("region").metadata[b"field_id"].decode())
        untouched = {f.path for f in t.files() if f.partition.get(region_id) in ("eu", "apac")}
    spark.sql(f"UPDATE {table} SET amount = 0 WHERE region = 'us'")
    with catalog.open(lake_url_of(spark)) as lake:
        (entry,) = commits_after(lake, before)
        summary = entry.operations[0]
        assert summary["kind"] == "overwrite"
        assert summary["rows_removed"] == summary["rows_added"] >= 3  # every row of the files read, written again
        after = lake.load_table(name).files()
        assert untouched <= {f.path for f in after}  # files the scan pruned were not rewritten
        assert all(f.crc32c is not None and f.parquet_field_ids for f in after)
        # Every file is read by the catalog's Python reader too: its checksum holds, its columns match by id.
        assert sorted(lake.load_table(name).scan().to_arrow().column("id").to_pylist()) == list(range(1, 10))


# Each MERGE with the same change written as a plain query over `before` and `src`.
MERGES = {
    "update and insert": (
        """WHEN MATCHED THEN UPDATE SET amount = s.amount, note = s.note
           WHEN NOT MATCHED THEN INSERT (id, region, amount, note) VALUES (s.id, s.region, s.amount, s.note)""",
        """SELECT t.id, t.region, s.amount, t.day, s.note, t.price FROM before t JOIN src s ON t.id = s.id
           UNION ALL SELECT t.* FROM before t LEFT ANTI JOIN src s ON t.id = s.id
           UNION ALL SELECT s.id, s.region, s.amount, NULL, s.note, NULL FROM src s LEFT ANTI JOIN before t ON t.id = s.id""",
    ),
    "conditional update, delete": (
        """WHEN MATCHED AND s.amount < 0 THEN DELETE
           WHEN MATCHED AND s.amount IS NULL THEN UPDATE SET note = 'null amount'
           WHEN MATCHED THEN UPDATE SET *""",
        """SELECT t.* FROM before t LEFT ANTI JOIN src s ON t.id = s.id
           UNION ALL SELECT t.id, t.region, t.amount, t.day, 'null amount', t.price
               FROM before t JOIN src s ON t.id = s.id WHERE s.amount IS NULL
           UNION ALL SELECT s.id, s.region, s.amount, s.day, s.note, s.price
               FROM before t JOIN src s ON t.id = s.id WHERE s.amount >= 0""",
    ),
    "not matched by source": (
        """WHEN MATCHED THEN UPDATE SET amount = t.amount + 1000
           WHEN NOT MATCHED BY SOURCE AND t.region = 'us' THEN DELETE
           WHEN NOT MATCHED BY SOURCE THEN UPDATE SET note = 'no source'""",
        """SELECT t.id, t.region, t.amount + 1000 AS amount, t.day, t.note, t.price FROM before t LEFT SEMI JOIN src s ON t.id = s.id
           UNION ALL SELECT t.id, t.region, t.amount, t.day, 'no source', t.price
               FROM before t LEFT ANTI JOIN src s ON t.id = s.id WHERE NOT coalesce(t.region = 'us', false)""",
    ),
    "insert only": (
        """WHEN NOT MATCHED AND s.amount > 100 THEN INSERT *""",
        """SELECT * FROM before
           UNION ALL SELECT s.id, s.region, s.amount, s.day, s.note, s.price
               FROM src s LEFT ANTI JOIN before t ON t.id = s.id WHERE s.amount > 100""",
    ),
}


@pytest.mark.parametrize(("clauses", "reference"), list(MERGES.values()), ids=list(MERGES))
def test_merge_gives_what_the_same_change_in_plain_spark_gives(
    spark: SparkSession, ns: str, clauses: str, reference: str
) -> None:
    table = make_table(spark, ns)
    snapshot(spark, table, "before")
    spark.sql(SOURCE).createOrReplaceTempView("src")
    spark.sql(f"MERGE INTO {table} t USING src s ON t.id = s.id {clauses}")
    expected = rows(spark, f"SELECT * FROM ({reference}) ORDER BY id, region, amount")
    assert table_rows(spark, table) == expected
    assert expected != rows(spark, "SELECT * FROM before ORDER BY id, region, amount")  # each merge changes rows


def test_a_merge_that_fails_in_a_task_changes_nothing_and_leaves_no_file(spark: SparkSession, ns: str) -> None:
    table = make_table(spark, ns)
    expected = table_rows(spark, table)
    spark.sql(SOURCE).createOrReplaceTempView("src")
    with catalog.open(lake_url_of(spark)) as lake:
        version = lake.version
        stored_before = {m.path for m in lake.objects.list("data/")}
    with pytest.raises(PySparkException, match="boom"):
        spark.sql(
            f"MERGE INTO {table} t USING src s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET amount = CAST(IF(s.id = 5, raise_error('boom'), s.amount) AS INT)"
        )
    assert table_rows(spark, table) == expected
    with catalog.open(lake_url_of(spark)) as lake:
        assert commits_after(lake, version) == []
        leftovers = {m.path for m in lake.objects.list("data/")} - stored_before
        # Failed tasks and the aborted job delete their files; a task cut off mid-write leaves its file to gc.
        lake.gc(grace_s=0)
        assert not leftovers & {m.path for m in lake.objects.list("data/")}


def test_an_update_that_lost_a_race_is_a_retryable_conflict_and_changes_nothing(
    spark: SparkSession, ns: str, tmp_path: Path
) -> None:
    """Another writer deletes a row of a file the UPDATE read, between its scan and its commit."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    table = make_table(spark, ns)
    url, name, flag = lake_url_of(spark), f"{short(ns)}.orders", str(tmp_path / "deleted")

    @F.udf(LongType())
    def delete_once(n: int) -> int:
        """In a Python worker (its own process), while the UPDATE runs."""
        import os

        import pyarrow.compute as pc

        import catalog

        try:  # O_EXCL: of the tasks running at once, only one goes on
            os.close(os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return n
        with catalog.open(url) as lake:
            lake.load_table(name).delete(pc.field("id") == 4)
        return n

    spark.udf.register("delete_once", delete_once)
    with pytest.raises(PySparkException, match="RetryableConflictError"):
        spark.sql(f"UPDATE {table} SET amount = CAST(delete_once(amount) AS INT) + 1 WHERE region = 'us'")
    # The other writer's delete stands; the update changed nothing.
    assert rows(spark, f"SELECT id, amount FROM {table} WHERE region = 'us' ORDER BY id") == [(3, 7), (7, None)]


def test_update_and_merge_refuse_options(spark: SparkSession, ns: str) -> None:
    table = make_table(spark, ns)
    with pytest.raises(PySparkException):
        spark.sql(f"UPDATE {table} WITH (mergeSchema = 'true') SET amount = 1")
    assert rows(spark, f"SELECT count(*) FROM {table} WHERE amount = 1") == [(1,)]
