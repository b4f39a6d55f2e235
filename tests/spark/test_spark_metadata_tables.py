"""Operating tables from Spark SQL: metadata tables, SHOW PARTITIONS, time travel after a rename,
SHOW CREATE TABLE round trips and the write order property, each checked against the Python API."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

import catalog
from catalog.datafiles import DataFile
from catalog.iceberg_derived import snapshot_id


@pytest.fixture
def lake(lake_catalog: str) -> Iterator[catalog.Lakehouse]:
    handle = catalog.open(lake_catalog, background=False)
    try:
        yield handle
    finally:
        handle.close()


def short(ns: str) -> str:
    return ns.split(".", 1)[1]


def test_metadata_tables_match_the_python_api(spark: SparkSession, ns: str, lake: catalog.Lakehouse) -> None:
    spark.sql(f"CREATE TABLE {ns}.ev (id BIGINT, day STRING) PARTITIONED BY (day)")
    spark.sql(f"INSERT INTO {ns}.ev VALUES (1, 'd1'), (2, 'd2')")
    spark.sql(f"INSERT INTO {ns}.ev VALUES (3, 'd1')")
    spark.sql(f"DELETE FROM {ns}.ev WHERE day = 'd2'")
    name = f"{short(ns)}.ev"
    table = lake.load_table(name)
    history = list(reversed(lake.history(limit=None, table=name)))  # oldest first

    rows = spark.sql(f"SELECT * FROM {ns}.ev.history ORDER BY version").collect()
    assert [(r.version, r.operation) for r in rows] == [(h.version, h.operations[0]["kind"]) for h in history]
    assert [r.operation for r in rows] == ["create_table", "append", "append", "delete"]
    assert [r.snapshot_id for r in rows] == [snapshot_id(table.id, h.version) for h in history]
    assert [r.parent_id for r in rows] == [None] + [r.snapshot_id for r in rows[:-1]]
    assert rows[1].summary["added-records"] == "2" and rows[3].summary["deleted-records"] == "1"
    snapshots = spark.sql(f"SELECT version, snapshot_id, operation FROM {ns}.ev.snapshots ORDER BY version").collect()
    assert [tuple(s) for s in snapshots] == [(r.version, r.snapshot_id, r.operation) for r in rows]

    def files_of(sql: str) -> set[tuple[str, int, int, str]]:
        return {(r.file_path.rsplit("/", 1)[1], r.record_count, r.file_size_in_bytes, r.partition.day) for r in spark.sql(sql).collect()}

    def python_files(t: catalog.Table) -> set[tuple[str, int, int, str]]:
        return {(f.path.rsplit("/", 1)[1], f.rows, f.size, f.partition["2"]) for f in t.scan().files()}

    assert files_of(f"SELECT * FROM {ns}.ev.files") == python_files(table)
    metrics = spark.sql(f"SELECT readable_metrics.id AS m, null_value_counts FROM {ns}.ev.files").collect()
    bounds = sorted((m.m.lower_bound, m.m.upper_bound, m.null_value_counts[1]) for m in metrics)
    assert bounds == sorted((f.stats["1"][0], f.stats["1"][1], f.stats["1"][2]) for f in table.scan().files())
    # Time travel: the files of the version after the first insert, as lake.at(...) has them.
    first_insert = history[1].version
    with lake.at(version=first_insert) as past:
        assert files_of(f"SELECT * FROM {ns}.ev.files VERSION AS OF {first_insert}") == python_files(past.load_table(name))
    assert [r.version for r in spark.sql(f"SELECT version FROM {ns}.ev.history VERSION AS OF {first_insert}").collect()] == [
        h.version for h in history[:2]
    ]

    partitions = spark.sql(f"SELECT * FROM {ns}.ev.partitions").collect()
    assert [(p.partition.day, p.record_count, p.file_count) for p in partitions] == [("d1", 2, 2)]
    # d1 last changed at the second insert (the delete touched only d2).
    assert partitions[0].last_updated_snapshot_id == snapshot_id(table.id, history[2].version)
    assert partitions[0].total_data_file_size_in_bytes == sum(f.size for f in table.scan().files())

    everything = spark.sql("SELECT version, operation, object FROM lake.system.history").collect()
    expected = [(h.version, op["kind"], op.get("object")) for h in lake.history(limit=None) for op in h.operations]
    assert [tuple(r) for r in everything][: len(expected)] == expected[: len(everything)]
    assert (history[3].version, "delete", name) in {tuple(r) for r in everything}


def test_metadata_table_names_yield_to_real_tables(spark: SparkSession, ns: str, lake_catalog: str) -> None:
    """A table or namespace of the same name wins: `lake.system.history` is a user table while one exists."""
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT)")
    with pytest.raises(PySparkException, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql(f"SELECT * FROM {ns}.t.manifests").collect()  # not a metadata table of lakekv's
    spark.sql("CREATE NAMESPACE lake.system")
    try:
        spark.sql("CREATE TABLE lake.system.history (note STRING)")
        spark.sql("INSERT INTO lake.system.history VALUES ('mine')")
        assert spark.sql("SELECT * FROM lake.system.history").collect() == [("mine",)]
        # The user namespace's own tables still have metadata tables.
        assert spark.sql("SELECT count(*) FROM lake.system.history.files").collect() == [(1,)]
    finally:
        spark.sql("DROP NAMESPACE lake.system CASCADE")
    assert "version" in spark.sql("SELECT * FROM lake.system.history").columns


def test_show_partitions_lists_and_refuses_changes(spark: SparkSession, ns: str, lake: catalog.Lakehouse) -> None:
    spark.sql(f"CREATE TABLE {ns}.p (id BIGINT, day STRING, region STRING) PARTITIONED BY (day, region)")
    spark.sql(f"INSERT INTO {ns}.p VALUES (1, 'd1', 'eu'), (2, 'd1', 'us'), (3, 'd2', 'eu')")
    listed = [r[0] for r in spark.sql(f"SHOW PARTITIONS {ns}.p").collect()]
    table = lake.load_table(f"{short(ns)}.p")
    expected = sorted({f"day={f.partition['2']}/region={f.partition['3']}" for f in table.scan().files()})
    assert sorted(listed) == expected == ["day=d1/region=eu", "day=d1/region=us", "day=d2/region=eu"]
    assert [r[0] for r in spark.sql(f"SHOW PARTITIONS {ns}.p PARTITION (day = 'd1')").collect()] == [
        "day=d1/region=eu",
        "day=d1/region=us",
    ]
    for statement in (f"ALTER TABLE {ns}.p ADD PARTITION (day = 'd9', region = 'eu')", f"ALTER TABLE {ns}.p DROP PARTITION (day = 'd1', region = 'eu')"):
        with pytest.raises(PySparkException, match="partitions are read-only"):
            spark.sql(statement)
    assert sorted(r[0] for r in spark.sql(f"SHOW PARTITIONS {ns}.p").collect()) == expected  # nothing changed
    spark.sql(f"CREATE TABLE {ns}.flat (id BIGINT)")
    with pytest.raises(PySparkException, match="not partitioned|NOT_PARTITIONED|partition"):
        spark.sql(f"SHOW PARTITIONS {ns}.flat").collect()


def test_time_travel_by_the_new_name_after_a_rename(spark: SparkSession, ns: str, lake: catalog.Lakehouse) -> None:
    spark.sql(f"CREATE TABLE {ns}.ev (id BIGINT)")
    spark.sql(f"INSERT INTO {ns}.ev VALUES (1), (2)")
    lake.refresh()
    before = lake.history(limit=1)[0].version
    spark.sql(f"INSERT INTO {ns}.ev VALUES (3)")
    spark.sql(f"ALTER TABLE {ns}.ev RENAME TO {short(ns)}.ev2")
    got = sorted(r.id for r in spark.sql(f"SELECT id FROM {ns}.ev2 VERSION AS OF {before}").collect())
    with lake.at(version=before) as past:
        same = past.load_table_by_id(lake.load_table(f"{short(ns)}.ev2").id)
        assert same.name == f"{short(ns)}.ev"  # the name it had then
        assert got == sorted(same.scan().to_arrow().column("id").to_pylist()) == [1, 2]
        files = spark.sql(f"SELECT file_path FROM {ns}.ev2.files VERSION AS OF {before}").collect()
        assert sorted(r.file_path.rsplit("/", 1)[1] for r in files) == sorted(f.path.rsplit("/", 1)[1] for f in same.scan().files())
    # A name no table has now still reads its past; one that names another table now follows that table.
    assert spark.sql(f"SELECT count(*) FROM {ns}.ev VERSION AS OF {before}").collect() == [(2,)]
    spark.sql(f"CREATE TABLE {ns}.ev (other STRING)")
    with pytest.raises(PySparkException, match="NotAtVersionError"):
        spark.sql(f"SELECT * FROM {ns}.ev VERSION AS OF {before}").collect()


def test_show_create_table_runs_as_written(spark: SparkSession, ns: str, lake: catalog.Lakehouse) -> None:
    spark.sql(
        f"CREATE TABLE {ns}.src (id BIGINT NOT NULL, day STRING, amount DECIMAL(10, 2)) PARTITIONED BY (day) "
        "TBLPROPERTIES ('owner.team' = 'sales', 'write.ordered-by' = 'id')"
    )
    statement = spark.sql(f"SHOW CREATE TABLE {ns}.src").collect()[0][0]
    assert "LOCATION" not in statement
    spark.sql(statement.replace(f"{ns}.src", f"{ns}.copy"))
    src, copy = lake.load_table(f"{short(ns)}.src"), lake.load_table(f"{short(ns)}.copy")
    assert copy.schema.equals(src.schema) and copy.partition_by == src.partition_by == ["day"]
    assert copy.properties == src.properties and copy.id != src.id
    assert "Location" in {r[0] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {ns}.copy").collect()}


def _ranges(files: list[DataFile]) -> list[tuple[int, int]]:
    return sorted((f.stats["1"][0], f.stats["1"][1]) for f in files)


def test_write_ordered_by_sorts_and_ranges_the_files(spark: SparkSession, ns: str, lake: catalog.Lakehouse, lake_catalog: str) -> None:
    data = spark.range(0, 4000).selectExpr("(id * 7919) % 4000 AS k", "id % 3 AS v").repartition(4)
    # Four write tasks: adaptive execution would merge so small a write's ranges into one.
    settings = {"spark.sql.adaptive.coalescePartitions.enabled": "false", "spark.sql.shuffle.partitions": "4"}
    saved = {key: spark.conf.get(key) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        for t, props in (("ordered", "TBLPROPERTIES ('write.ordered-by' = 'k')"), ("plain", "")):
            spark.sql(f"CREATE TABLE {ns}.{t} (k BIGINT, v BIGINT) {props}")
            data.writeTo(f"{ns}.{t}").append()
    finally:
        for key, value in saved.items():
            spark.conf.set(key, value)
    ordered, plain = lake.load_table(f"{short(ns)}.ordered"), lake.load_table(f"{short(ns)}.plain")
    assert ordered.scan().count() == plain.scan().count() == 4000
    ranges = _ranges(ordered.scan().files())
    assert len(ranges) > 1 and all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))  # disjoint key ranges
    for f in ordered.scan().files():  # each file sorted by k
        keys = pq.read_table(f"{lake_catalog}/{f.path}").column("k").to_pylist()
        assert keys == sorted(keys)
    one = pc.field("k") == 1234
    assert len(ordered.scan(filter=one).files()) == 1 < len(plain.scan(filter=one).files())
    assert spark.sql(f"SELECT v FROM {ns}.ordered WHERE k = 1234").collect() == spark.sql(f"SELECT v FROM {ns}.plain WHERE k = 1234").collect()
    # A bad order is refused when it is set, and changes nothing.
    with pytest.raises(Exception, match="no column 'nope'"):  # Spark's UNSUPPORTED_TABLE_CHANGE, carrying ours
        spark.sql(f"ALTER TABLE {ns}.plain SET TBLPROPERTIES ('write.ordered-by' = 'nope')")
    assert "write.ordered-by" not in lake.load_table(f"{short(ns)}.plain").properties
    # A write that cannot honour it (the Python source: nanosecond timestamps) is refused, not unordered.
    nanos = lake.create_table(f"{short(ns)}.nanos", pa.schema([("k", pa.int64()), ("t", pa.timestamp("ns"))]), properties={"write.ordered-by": "k"})
    with pytest.raises(PySparkException, match="honoured by Spark's own Parquet writer only"):
        spark.sql(f"INSERT INTO {ns}.nanos VALUES (1, TIMESTAMP_NTZ '2026-11-27 08:00:00')")
    assert nanos.scan().count() == 0
