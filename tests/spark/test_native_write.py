"""A failed write through the plugin's native writer (NativeWrite) leaves no file of its own behind."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from py4j.protocol import Py4JJavaError


def data_files(lake_url: str) -> set[str]:
    """Every file under the lakehouse's data/ directory, store-relative."""
    root = Path(lake_url)
    return {str(p.relative_to(root)) for p in (root / "data").rglob("*") if p.is_file()}


@pytest.fixture
def raising_udf(spark: SparkSession) -> Iterator[str]:
    """SQL function ``lakekv_boom(x)``: x, except that it raises for x = 999 (the last row of range(1000))."""

    def boom(x: int) -> int:
        if x == 999:
            raise ValueError("lakekv_boom: refused row 999")
        return x

    spark.udf.register("lakekv_boom", boom, "bigint")
    yield "lakekv_boom"


def test_a_ctas_whose_python_udf_raises_creates_no_table_and_leaves_no_file(
    spark: SparkSession, ns: str, lake_catalog: str, raising_udf: str
) -> None:
    before = data_files(lake_catalog)
    # One input partition: the UDF's first batches are written (a file is open) before row 999 raises.
    with pytest.raises((PySparkException, Py4JJavaError), match="refused row 999"):
        spark.sql(f"CREATE TABLE {ns}.c AS SELECT {raising_udf}(id) AS id FROM range(0, 1000, 1, 1)")
    assert not spark.catalog.tableExists(f"{ns}.c")
    assert data_files(lake_catalog) == before


def test_an_insert_whose_python_udf_raises_adds_no_file(
    spark: SparkSession, ns: str, lake_catalog: str, raising_udf: str
) -> None:
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT, p BIGINT) PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO {ns}.t VALUES (1, 0)")
    before = data_files(lake_catalog)
    # Partitioned, several input partitions: each task opens files for several partition values.
    with pytest.raises((PySparkException, Py4JJavaError), match="refused row 999"):
        spark.sql(f"INSERT INTO {ns}.t SELECT {raising_udf}(id), id % 3 FROM range(0, 1000, 1, 2)")
    assert data_files(lake_catalog) == before
    assert spark.sql(f"SELECT count(*) FROM {ns}.t").first()[0] == 1


@contextmanager
def failing_file_open(spark: SparkSession) -> Iterator[None]:
    """Fault injection: Parquet files are created, then opening their writer fails.

    pyspark's jars have no Brotli codec: parquet-mr creates the file, then
    fails looking the codec up (BadConfigurationException), which is what a
    task interrupted while opening a file also leaves behind.
    """
    key = "spark.sql.parquet.compression.codec"
    previous = spark.conf.get(key)
    spark.conf.set(key, "brotli")
    try:
        yield
    finally:
        spark.conf.set(key, previous)


@pytest.mark.parametrize("statement", ["ctas", "insert"])
def test_a_file_whose_opening_fails_is_deleted(
    spark: SparkSession, ns: str, lake_catalog: str, statement: str
) -> None:
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT)")
    before = data_files(lake_catalog)
    with failing_file_open(spark):
        with pytest.raises((PySparkException, Py4JJavaError), match="BrotliCodec"):
            if statement == "ctas":
                spark.sql(f"CREATE TABLE {ns}.c AS SELECT id FROM range(0, 10, 1, 2)")
            else:
                spark.sql(f"INSERT INTO {ns}.t SELECT id FROM range(0, 10, 1, 2)")
    left = data_files(lake_catalog) - before
    assert not left, f"files left by the failed write: {sorted(left)} ({[os.path.getsize(Path(lake_catalog) / f) for f in left]} bytes)"
    assert not spark.catalog.tableExists(f"{ns}.c")
    spark.sql(f"INSERT INTO {ns}.t VALUES (7)")  # the session writes again once the fault is gone
    assert [r.id for r in spark.sql(f"SELECT id FROM {ns}.t").collect()] == [7]
