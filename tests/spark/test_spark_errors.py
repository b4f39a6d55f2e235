"""Catalog conflicts reach the PySpark driver as the catalog's exceptions (catalog/spark/errors.py)."""

from __future__ import annotations

import traceback

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

import catalog
from catalog.errors import CatalogConflictError, IncompatibleConflictError, RetryableConflictError
from catalog.spark import catalog_errors, conflict_from
from catalog.spark.errors import annotated_conflicts


def worker_traceback(exc: BaseException) -> str:
    """The text Spark carries for an exception raised in a Python worker: its formatted traceback."""
    return "".join(traceback.format_exception(exc))


def raised_in_worker(exc: BaseException) -> BaseException:
    try:
        with annotated_conflicts():
            raise exc
    except BaseException as raised:  # noqa: BLE001 - we want exactly what the worker raised
        return raised
    raise AssertionError("unreachable")


class FakeSparkError(Exception):
    """Stands for PythonException / AnalysisException: the worker's traceback inside a longer text."""


@pytest.mark.parametrize("cls", [RetryableConflictError, IncompatibleConflictError])
def test_a_worker_traceback_gives_back_the_class_message_and_attributes(cls: type[CatalogConflictError]) -> None:
    original = raised_in_worker(cls("overwrite of 'c.t': 2 files: added", ours="overwrite", theirs="append", object="c.t", version=9))
    spark_error = FakeSparkError(
        "[PYTHON_DATA_SOURCE_ERROR] Failed to commit: \n" + worker_traceback(original) + "\nJVM stacktrace:\n\tat org.apache..."
    )
    rebuilt = conflict_from(spark_error)
    assert type(rebuilt) is cls
    assert str(rebuilt) == "overwrite of 'c.t': 2 files: added"
    assert (rebuilt.ours, rebuilt.theirs, rebuilt.object, rebuilt.version) == ("overwrite", "append", "c.t", 9)


def test_a_message_of_several_lines_comes_back_whole() -> None:
    original = raised_in_worker(RetryableConflictError("first line\nsecond line", ours="delete", version=3))
    rebuilt = conflict_from(FakeSparkError(worker_traceback(original) + "\n\tat org.apache.spark.Foo\n"))
    assert type(rebuilt) is RetryableConflictError
    assert str(rebuilt) == "first line\nsecond line" and (rebuilt.ours, rebuilt.version) == ("delete", 3)


def test_the_outermost_conflict_wins_and_a_missing_note_still_gives_class_and_message() -> None:
    text = (
        "catalog.errors.IncompatibleConflictError: first\n"
        "...\n"
        "catalog.errors.RetryableConflictError: append of 'a.b': lost\n"
    )
    rebuilt = conflict_from(FakeSparkError(text))
    assert type(rebuilt) is RetryableConflictError and str(rebuilt) == "append of 'a.b': lost"
    assert rebuilt.ours == "unknown" and rebuilt.version is None


def test_the_traceback_can_sit_in_a_cause_or_the_java_exception() -> None:
    original = raised_in_worker(RetryableConflictError("lost", ours="append"))
    try:
        try:
            raise FakeSparkError(worker_traceback(original))
        except FakeSparkError as inner:
            raise RuntimeError("An error occurred while calling o71.save") from inner
    except RuntimeError as outer:
        assert type(conflict_from(outer)) is RetryableConflictError

    class Py4JLike(Exception):
        def __init__(self, java_text: str) -> None:
            super().__init__("An error occurred while calling o71.save")
            self.java_exception = java_text

    assert type(conflict_from(Py4JLike(worker_traceback(original)))) is RetryableConflictError


@pytest.mark.parametrize(
    "text",
    [
        "RetryableConflictError in the middle of a sentence",
        "some.other.RetryableConflictError: not ours",
        "kvstore.errors.ConflictError: a KV conflict is not a catalog one",
        "catalog.errors.NoSuchTableError: table 'a.b' does not exist",
    ],
)
def test_other_errors_are_not_conflicts(text: str) -> None:
    assert conflict_from(FakeSparkError(text)) is None
    error = FakeSparkError(text)
    with pytest.raises(FakeSparkError) as info:
        with catalog_errors():
            raise error
    assert info.value is error  # passed through unchanged


def test_a_catalog_conflict_itself_passes_through() -> None:
    error = RetryableConflictError("lost", ours="append")
    with pytest.raises(RetryableConflictError) as info:
        with catalog_errors():
            raise error
    assert info.value is error and info.value.__cause__ is None


def test_annotating_twice_adds_one_note() -> None:
    error = RetryableConflictError("lost", ours="append")
    with pytest.raises(RetryableConflictError):
        with annotated_conflicts():
            with annotated_conflicts():
                raise error
    assert len(error.__notes__) == 1


# -- through a real Spark write ----------------------------------------------------------------


def test_a_real_spark_conflict_raises_the_catalog_class(spark: SparkSession, lake_url: str) -> None:
    with catalog.open(lake_url) as lake:
        lake.create_namespace("e")
        table = lake.create_table("e.t", pa.schema([("n", pa.int64())]))
        table.append(pa.table({"n": [1, 2, 3]}))
        read_version = lake.version
        table.append(pa.table({"n": [4]}))  # committed after the overwrite's input was read

    data = spark.read.format("lakehouse").option("lakehouse", lake_url).option("versionAsOf", str(read_version)).load("e.t")
    doubled = data.selectExpr("n * 2 AS n")

    def overwrite() -> None:
        doubled.write.format("lakehouse").option("lakehouse", lake_url).option("readVersion", str(read_version)).mode(
            "overwrite"
        ).save("e.t")

    with pytest.raises(Exception) as raw:
        overwrite()
    assert not isinstance(raw.value, CatalogConflictError)  # what Spark raises on its own
    with pytest.raises(RetryableConflictError) as info:
        with catalog_errors():
            overwrite()
    error = info.value
    assert "committed after its input was read" in str(error)
    assert (error.ours, error.object) == ("overwrite", "e.t")
    assert error.__cause__ is not None and not isinstance(error.__cause__, CatalogConflictError)
    with catalog.open(lake_url) as lake:
        assert sorted(lake.load_table("e.t").scan().to_arrow().column("n").to_pylist()) == [1, 2, 3, 4]

    # Read at the newest version, the same read-modify-write commits.
    with catalog.open(lake_url) as lake:
        latest = lake.version
    fresh = spark.read.format("lakehouse").option("lakehouse", lake_url).option("versionAsOf", str(latest)).load("e.t")
    with catalog_errors():
        fresh.selectExpr("n * 2 AS n").write.format("lakehouse").option("lakehouse", lake_url).option(
            "readVersion", str(latest)
        ).mode("overwrite").save("e.t")
    with catalog.open(lake_url) as lake:
        assert sorted(lake.load_table("e.t").scan().to_arrow().column("n").to_pylist()) == [2, 4, 6, 8]


def test_a_real_spark_failure_that_is_no_conflict_is_not_converted(spark: SparkSession, lake_url: str) -> None:
    with catalog.open(lake_url) as lake:
        lake.create_namespace("e")
    df = spark.createDataFrame([(1,)], "n bigint")
    with pytest.raises(Exception) as info:
        with catalog_errors():
            df.write.format("lakehouse").option("lakehouse", lake_url).mode("append").save("e.missing")
    assert not isinstance(info.value, CatalogConflictError)
    assert "does not exist" in str(info.value)


def test_read_version_is_refused_for_an_append(spark: SparkSession, lake_url: str) -> None:
    with catalog.open(lake_url) as lake:
        lake.create_namespace("e")
        lake.create_table("e.t", pa.schema([("n", pa.int64())]))
    df = spark.createDataFrame([(1,)], "n bigint")
    with pytest.raises(Exception, match="readVersion only applies to"):
        df.write.format("lakehouse").option("lakehouse", lake_url).option("readVersion", "1").mode("append").save("e.t")
