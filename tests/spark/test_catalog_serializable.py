"""Write queries that read lakehouse tables commit serializably (LakehouseCatalog as TransactionalCatalogPlugin).

Deterministic: a UDF, in a Python worker (its own process), commits to the
table the query reads while the query runs, through the catalog API. The
write must then fail with RetryableConflictError and change nothing; without
that commit, or when the commit cannot touch what the query selected, it
commits.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

import catalog
from tests.spark.lake_history import commits_after
from tests.spark.test_catalog_plugin import lake_url_of, rows, short

pytestmark = pytest.mark.spark


@pytest.fixture
def tables(spark: SparkSession, ns: str) -> tuple[str, str]:
    """``t1`` (id, region), partitioned, with rows in 'eu' and 'us'; ``t2`` (id, tag), empty."""
    spark.sql(f"CREATE TABLE {ns}.t1 (id BIGINT, region STRING) PARTITIONED BY (region)")
    spark.sql(f"INSERT INTO {ns}.t1 VALUES (1, 'eu'), (2, 'eu'), (3, 'us')")
    spark.sql(f"CREATE TABLE {ns}.t2 (id BIGINT, tag BIGINT)")
    return f"{ns}.t1", f"{ns}.t2"


def appending_udf(spark: SparkSession, ns: str, flag: Path, region: str) -> Callable[..., object]:
    """A UDF ``append_once(x)`` that returns x and, the first time only, appends (100, region) to t1."""
    url, t1, flag_path = lake_url_of(spark), f"{short(ns)}.t1", str(flag)

    @F.udf(LongType())
    def append_once(x: int) -> int:
        import os

        import pyarrow as pa

        import catalog

        try:  # O_EXCL: of the tasks running at once, only one appends
            os.close(os.open(flag_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return x
        with catalog.open(url) as lake:
            table = lake.load_table(t1)
            table.append(pa.table({"id": [100], "region": [region]}).cast(table.schema))
        return x

    spark.udf.register("append_once", append_once)
    return append_once


def version_of(spark: SparkSession) -> int:
    with catalog.open(lake_url_of(spark)) as lake:
        return lake.version


def test_insert_select_whose_source_changed_while_it_ran_is_a_retryable_conflict(
    spark: SparkSession, ns: str, tables: tuple[str, str], tmp_path: Path
) -> None:
    t1, t2 = tables
    appending_udf(spark, ns, tmp_path / "appended", "eu")
    with pytest.raises(PySparkException, match="RetryableConflictError") as error:
        spark.sql(f"INSERT INTO {t2} SELECT id, append_once(id) FROM {t1}")
    assert "read table" in str(error.value)
    assert rows(spark, f"SELECT count(*) FROM {t2}") == [(0,)]  # nothing written
    assert rows(spark, f"SELECT count(*) FROM {t1}") == [(4,)]  # the other writer's append stands
    # The same query again, with no commit meanwhile (the UDF appends only once): it commits.
    before = version_of(spark)
    spark.sql(f"INSERT INTO {t2} SELECT id, append_once(id) FROM {t1}")
    with catalog.open(lake_url_of(spark)) as lake:
        assert [h.operations[0]["kind"] for h in commits_after(lake, before)] == ["append"]
    assert rows(spark, f"SELECT id FROM {t2} ORDER BY id") == [(1,), (2,), (3,), (100,)]


def test_a_commit_outside_what_the_query_selected_does_not_conflict(
    spark: SparkSession, ns: str, tables: tuple[str, str], tmp_path: Path
) -> None:
    t1, t2 = tables
    appending_udf(spark, ns, tmp_path / "appended", "us")  # the query reads only 'eu'
    spark.sql(f"INSERT INTO {t2} SELECT id, append_once(id) FROM {t1} WHERE region = 'eu'")
    assert rows(spark, f"SELECT id FROM {t2} ORDER BY id") == [(1,), (2,)]
    assert os.path.exists(tmp_path / "appended")  # the append did happen during the query


def test_a_time_travel_read_never_conflicts(spark: SparkSession, ns: str, tables: tuple[str, str], tmp_path: Path) -> None:
    t1, t2 = tables
    version = version_of(spark)
    appending_udf(spark, ns, tmp_path / "appended", "eu")
    spark.sql(f"INSERT INTO {t2} SELECT id, append_once(id) FROM {t1} VERSION AS OF {version}")
    assert rows(spark, f"SELECT id FROM {t2} ORDER BY id") == [(1,), (2,), (3,)]


def test_insert_into_a_table_from_itself_conflicts_with_a_concurrent_append(
    spark: SparkSession, ns: str, tables: tuple[str, str], tmp_path: Path
) -> None:
    t1, _ = tables
    appending_udf(spark, ns, tmp_path / "appended", "us")
    with pytest.raises(PySparkException, match="RetryableConflictError"):
        spark.sql(f"INSERT INTO {t1} SELECT append_once(id) + 10, region FROM {t1}")
    assert rows(spark, f"SELECT id FROM {t1} ORDER BY id") == [(1,), (2,), (3,), (100,)]


def test_merge_whose_source_changed_while_it_ran_is_a_retryable_conflict(
    spark: SparkSession, ns: str, tables: tuple[str, str], tmp_path: Path
) -> None:
    t1, t2 = tables
    spark.sql(f"INSERT INTO {t2} VALUES (1, 0), (3, 0)")
    expected = rows(spark, f"SELECT * FROM {t2} ORDER BY id")
    appending_udf(spark, ns, tmp_path / "appended", "eu")
    with pytest.raises(PySparkException, match="RetryableConflictError"):
        spark.sql(
            f"MERGE INTO {t2} t USING (SELECT append_once(id) AS id FROM {t1}) s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET tag = 1 WHEN NOT MATCHED THEN INSERT (id, tag) VALUES (s.id, 2)"
        )
    assert rows(spark, f"SELECT * FROM {t2} ORDER BY id") == expected


def test_create_table_as_select_whose_source_changed_while_it_ran_is_a_retryable_conflict(
    spark: SparkSession, ns: str, tables: tuple[str, str], tmp_path: Path
) -> None:
    t1, _ = tables
    appending_udf(spark, ns, tmp_path / "appended", "eu")
    # A staged CTAS commits with its durable transaction: the read is checked in that commit.
    with pytest.raises(PySparkException, match="RetryableConflictError"):
        spark.sql(f"CREATE TABLE {ns}.t3 AS SELECT id, append_once(id) AS tag FROM {t1}")
    assert rows(spark, f"SHOW TABLES IN {ns}") == [(short(ns), "t1", False), (short(ns), "t2", False)]
    spark.sql(f"CREATE TABLE {ns}.t3 AS SELECT id, append_once(id) AS tag FROM {t1}")  # no commit meanwhile
    assert rows(spark, f"SELECT id FROM {ns}.t3 ORDER BY id") == [(1,), (2,), (3,), (100,)]


def test_create_or_replace_a_table_from_itself_commits(spark: SparkSession, ns: str, tables: tuple[str, str]) -> None:
    t1, _ = tables
    # The read of t1 is checked against others' commits, not against the statement's own replacement.
    spark.sql(f"CREATE OR REPLACE TABLE {t1} AS SELECT id * 10 AS id, region FROM {t1}")
    assert rows(spark, f"SELECT id FROM {t1} ORDER BY id") == [(10,), (20,), (30,)]
