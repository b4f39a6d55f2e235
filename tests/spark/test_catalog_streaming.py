"""Streaming writes into catalog tables: one catalog commit per micro-batch, exactly once across restarts."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

import catalog
from tests.spark.lake_history import commits_after
from tests.spark.test_catalog_plugin import lake_url_of, rows, short

pytestmark = pytest.mark.spark

SCHEMA = "id BIGINT, kind STRING"


def add_input(directory: Path, kind: str, ids: list[int]) -> None:
    directory.mkdir(exist_ok=True)
    (directory / f"{kind}.json").write_text("".join(json.dumps({"id": i, "kind": kind}) + "\n" for i in ids))


def last_commit(spark: SparkSession) -> int:
    with catalog.open(lake_url_of(spark)) as lake:
        return max(h.version for h in lake.history(limit=None))


def run_once(spark: SparkSession, source: Path, checkpoint: Path, table: str, complete: bool = False) -> StreamingQuery:
    """Process every input file not yet processed (one micro-batch per run here), then stop."""
    frame = spark.readStream.schema(SCHEMA).json(str(source))
    if complete:
        frame = frame.groupBy("kind").count()
    writer = frame.writeStream.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
    query = writer.outputMode("complete" if complete else "append").toTable(table)
    query.awaitTermination()
    assert query.exception() is None
    return query


def test_each_batch_is_one_commit_and_a_restarted_batch_is_not_appended_twice(
    spark: SparkSession, ns: str, tmp_path: Path
) -> None:
    table = f"{ns}.events"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, kind STRING)")
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    add_input(source, "a", [1, 2, 3])
    before = last_commit(spark)
    query = run_once(spark, source, checkpoint, table)
    assert rows(spark, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,), (3,)]
    with catalog.open(lake_url_of(spark)) as lake:
        assert len(commits_after(lake, before)) == 1
        properties = lake.load_table(f"{short(ns)}.events").properties
    assert properties[f"lakekv.stream.{query.id}.batch"] == "0"

    # The query "crashed" after the catalog committed batch 0 but before Spark logged it:
    # on restart Spark runs batch 0 again, and the catalog must not add its rows twice.
    for name in ("0", ".0.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    before = last_commit(spark)
    again = run_once(spark, source, checkpoint, table)
    assert again.id == query.id  # the same query, from its checkpoint
    # Spark did run batch 0 again, with its 3 rows: the catalog recognised it.
    assert [(p["batchId"], p["numInputRows"]) for p in again.recentProgress] == [(0, 3)]
    assert rows(spark, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,), (3,)]
    with catalog.open(lake_url_of(spark)) as lake:
        assert commits_after(lake, before) == []
        stored = {m.path for m in lake.objects.list(lake.load_table(f"{short(ns)}.events").location + "/")}
        referenced = {f.path for f in lake.load_table(f"{short(ns)}.events").files()}
    assert stored == referenced  # the repeated batch's files were deleted at once

    add_input(source, "b", [4, 5])
    run_once(spark, source, checkpoint, table)
    assert rows(spark, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,), (3,), (4,), (5,)]
    with catalog.open(lake_url_of(spark)) as lake:
        properties = lake.load_table(f"{short(ns)}.events").properties
    assert properties[f"lakekv.stream.{query.id}.batch"] == "1"


def test_complete_mode_replaces_the_table_with_each_batch(spark: SparkSession, ns: str, tmp_path: Path) -> None:
    table = f"{ns}.counts"
    spark.sql(f"CREATE TABLE {table} (kind STRING, count BIGINT)")
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    add_input(source, "a", [1, 2, 3])
    run_once(spark, source, checkpoint, table, complete=True)
    assert rows(spark, f"SELECT kind, count FROM {table} ORDER BY kind") == [("a", 3)]
    add_input(source, "b", [4, 5])
    run_once(spark, source, checkpoint, table, complete=True)
    assert rows(spark, f"SELECT kind, count FROM {table} ORDER BY kind") == [("a", 3), ("b", 2)]


def test_a_table_spark_cannot_write_refuses_a_stream(spark: SparkSession, ns: str, tmp_path: Path) -> None:
    # Nanosecond timestamps: only the Python data path writes this table, and it has no streaming writer.
    schema = pa.schema([("id", pa.int64()), ("kind", pa.string()), ("at", pa.timestamp("ns"))])
    with catalog.open(lake_url_of(spark)) as lake:
        lake.create_table(f"{short(ns)}.t", schema)
    source = tmp_path / "in"
    add_input(source, "a", [1])
    frame = spark.readStream.schema(SCHEMA).json(str(source)).selectExpr("id", "kind", "current_timestamp() AS at")
    with pytest.raises(Exception, match="(?i)streaming"):
        query = frame.writeStream.option("checkpointLocation", str(tmp_path / "c")).toTable(f"{ns}.t")
        query.awaitTermination()
    assert rows(spark, f"SELECT count(*) FROM {ns}.t") == [(0,)]


def test_a_stream_inside_a_durable_transaction_is_refused(spark: SparkSession, ns: str, tmp_path: Path) -> None:
    spark.sql(f"CREATE TABLE {ns}.events (id BIGINT, kind STRING)")
    add_input(tmp_path / "in", "a", [1])
    spark.sql("CALL lake.system.begin_transaction()")
    try:
        frame = spark.readStream.schema(SCHEMA).json(str(tmp_path / "in"))
        with pytest.raises(Exception, match="inside durable transaction"):
            query = frame.writeStream.option("checkpointLocation", str(tmp_path / "c")).toTable(f"{ns}.events")
            query.awaitTermination()
    finally:
        spark.sql("CALL lake.system.abort_transaction()")
    assert rows(spark, f"SELECT count(*) FROM {ns}.events") == [(0,)]


def test_checkpoint_location_on_a_batch_write_is_refused(spark: SparkSession, ns: str, tmp_path: Path) -> None:
    spark.sql(f"CREATE TABLE {ns}.events (id BIGINT, kind STRING)")
    frame = spark.sql("SELECT 1L AS id, 'a' AS kind")
    with pytest.raises(Exception, match="checkpointLocation is for a streaming write"):
        frame.writeTo(f"{ns}.events").option("checkpointLocation", str(tmp_path / "c")).append()
    assert rows(spark, f"SELECT count(*) FROM {ns}.events") == [(0,)]
