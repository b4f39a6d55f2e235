"""The maintenance procedures, ``CALL lake.system.<name>(...)``, through spark.sql and bin/spark-sql.

Every answer is checked against the Python API on the same lakehouse
(``lake.history()``, ``table.files()``, ``lake.at(...)``, ``lake.verify()``).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

import catalog
from tests.spark.spark_shell import run_spark_sql
from tests.spark.test_catalog_plugin import lake_url_of, rows, short

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string())])


def call(spark: SparkSession, sql: str) -> dict[str, object]:
    (row,) = spark.sql(sql).collect()
    return row.asDict()


def ids(spark: SparkSession, table: str, version: int | None = None) -> list[int]:
    at = "" if version is None else f" VERSION AS OF {version}"
    return sorted(r[0] for r in rows(spark, f"SELECT id FROM {table}{at}"))


def python_ids(lake: catalog.Lakehouse, name: str, version: int | None = None) -> list[int]:
    if version is None:
        lake.refresh()
        return sorted(lake.load_table(name).scan().to_arrow().column("id").to_pylist())
    with lake.at(version=version) as past:
        return sorted(past.load_table(name).scan().to_arrow().column("id").to_pylist())


def test_rewrite_and_rollback_answer_as_the_python_api(spark: SparkSession, ns: str) -> None:
    table, name = f"{ns}.t", f"{short(ns)}.t"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, day STRING) PARTITIONED BY (day)")
    for i in range(4):
        spark.sql(f"INSERT INTO {table} VALUES ({i}, 'a'), ({10 + i}, 'b')")
    with catalog.open(lake_url_of(spark)) as lake:
        before = lake.load_table(name).files()
        good = lake.version
        answer = call(spark, f"CALL lake.system.rewrite_data_files(table => '{table}', where => 'day = ''a''')")
        lake.refresh()
        after = lake.load_table(name).files()
        assert answer["version"] == lake.version == lake.history(limit=1, table=name)[0].version
        assert answer["rewritten_data_files_count"] == 4 and answer["added_data_files_count"] == 1
        assert len(after) == len(before) - 4 + 1
        assert answer["rewritten_bytes_count"] == sum(f.size for f in before if f not in after)
        assert ids(spark, table) == python_ids(lake, name) == python_ids(lake, name, good)

        sort = call(spark, f"CALL lake.system.rewrite_data_files(table => '{short(ns)}.t', strategy => 'sort', "
                           "sort_order => 'id DESC', target_file_size_bytes => 1048576)")
        assert sort["version"] == lake.refresh() and ids(spark, table) == python_ids(lake, name, good)

        spark.sql(f"DELETE FROM {table} WHERE id < 12")
        bad = lake.refresh()
        rolled = call(spark, f"CALL lake.system.rollback_to_version(table => '{table}', version => {good})")
        assert rolled["previous_version"] == bad and rolled["target_version"] == good
        assert rolled["version"] == lake.refresh() == bad + 1
        assert ids(spark, table) == python_ids(lake, name) == python_ids(lake, name, good)
        assert ids(spark, table, bad) == python_ids(lake, name, bad) == [12, 13]  # history kept

        at = lake.history(limit=None, table=name)
        # Commit times are finer than Spark's microseconds: round up, or the instant falls before the commit.
        when_us = math.ceil(next(e.timestamp for e in at if e.version == bad) * 1_000_000) + 1
        by_time = call(spark, f"CALL lake.system.rollback_to_timestamp(table => '{table}', "
                              f"timestamp => timestamp_micros({when_us}))")
        assert by_time["target_version"] == bad and ids(spark, table) == [12, 13] == python_ids(lake, name)


def test_add_files_verify_expire_and_orphans_answer_as_the_python_api(spark: SparkSession, ns: str) -> None:
    table, name = f"{ns}.t", f"{short(ns)}.t"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, day STRING) PARTITIONED BY (day)")
    root = Path(lake_url_of(spark))
    landing = f"landing_{short(ns)}"
    for day, values in (("x", [1, 2]), ("y", [3])):
        (root / landing / f"day={day}").mkdir(parents=True)
        pq.write_table(pa.table({"id": values}), root / landing / f"day={day}" / "part-0.parquet")
    added = call(spark, f"CALL lake.system.add_files(table => '{table}', source => '{landing}')")
    with catalog.open(str(root)) as lake:
        files = lake.load_table(name).files()
        assert added["version"] == lake.version and added["added_files_count"] == len(files) == 2
        assert added["added_rows_count"] == 3 and added["added_bytes_count"] == sum(f.size for f in files)
        assert rows(spark, f"SELECT id, day FROM {table} ORDER BY id") == [(1, "x"), (2, "x"), (3, "y")]
        assert rows(spark, f"SELECT count(*) FROM {table} WHERE day = 'y'") == [(1,)]

        verified = call(spark, f"CALL lake.system.verify(table => '{table}')")
        report = lake.verify(name)
        assert verified["ok"] is report.ok is True and verified["problems"] == []
        assert verified["head_version"] == report.head_version and verified["files_checked"] == report.files_checked == 2

        # The shared lakehouse keeps the default 24 h window: expiry may delete nothing younger.
        expired = call(spark, "CALL lake.system.expire_versions(retain_last => 1, dry_run => true)")
        assert expired["dry_run"] and expired["floor_version"] == lake.expire_versions(dry_run=True).floor_version
        assert expired["deleted_data_files_count"] == 0

        orphan = root / lake.load_table(name).location / "from-a-killed-writer.parquet"
        orphan.parent.mkdir(parents=True, exist_ok=True)
        orphan.write_bytes(b"not referenced")
        old = orphan.stat().st_mtime - 7200
        os.utime(orphan, (old, old))
        dry = call(spark, "CALL lake.system.remove_orphan_files(dry_run => true)")
        assert sorted(dry["files"]) == sorted(lake.remove_orphan_files(dry_run=True).orphan_files)
        assert any(p.endswith("from-a-killed-writer.parquet") for p in dry["files"]) and orphan.exists()
        done = call(spark, "CALL lake.system.remove_orphan_files()")
        assert not done["dry_run"] and not orphan.exists() and done["deleted_orphan_files_count"] >= 1
        assert rows(spark, f"SELECT count(*) FROM {table}") == [(3,)]


BAD_CALLS = [
    ("CALL lake.system.rewrite_data_files(tabel => 'T')", "UNRECOGNIZED_PARAMETER_NAME.*tabel"),
    ("CALL lake.system.rewrite_data_files()", "REQUIRED_PARAMETER_NOT_FOUND.*table"),
    ("CALL lake.system.rollback_to_version(table => 'T')", "REQUIRED_PARAMETER_NOT_FOUND.*version"),
    ("CALL lake.system.rollback_to_version(table => 'T', version => 'x')", "argument version must be BIGINT, not STRING"),
    ("CALL lake.system.expire_versions(retain_last => 'all')", "argument retain_last must be INT, not STRING"),
    ("CALL lake.system.rollback_to_version(table => 'T', version => NULL)", "argument version must not be NULL"),
    ("CALL lake.system.rewrite_data_files(table => 'T', strategy => 'zorder')", "strategy must be one of binpack, sort"),
    ("CALL lake.system.rewrite_data_files(table => 'T', target_file_size_bytes => 10)", "target_file_size_bytes must be"),
    ("CALL lake.system.rewrite_data_files(table => 'T', strategy => 'sort', sort_order => 'nope')", "sort_order names column 'nope'"),
    ("CALL lake.system.rewrite_data_files(table => 'T', where => 'nope = 1')", "where 'nope = 1'"),
    ("CALL lake.system.rewrite_data_files(table => 'nons')", "table 'nons' needs a namespace"),
    ("CALL lake.system.expire_versions(retain_last => 0)", "retain_last must be at least 1"),
    ("CALL lake.system.remove_orphan_files(older_than => current_timestamp())", "older_than must be at least gc_grace_s"),
    ("CALL lake.system.add_files(table => 'T', source => '/elsewhere')", "not inside the lakehouse's storage"),
    ("CALL lake.system.verify(table => 'T_nope')", "t_nope' does not exist"),
]


def test_bad_arguments_are_named_and_change_nothing(spark: SparkSession, ns: str) -> None:
    table = f"{ns}.t"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, day STRING)")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a')")
    spark.sql(f"INSERT INTO {table} VALUES (2, 'a')")
    with catalog.open(lake_url_of(spark)) as lake:
        head = lake.refresh()
        for sql, match in BAD_CALLS:
            with pytest.raises(PySparkException, match=match):
                spark.sql(sql.replace("'T", f"'{table}")).collect()
            assert lake.refresh() == head, sql
    assert ids(spark, table) == [1, 2]
    spark.sql("CALL lake.system.begin_transaction()")
    try:
        with pytest.raises(PySparkException, match="cannot run inside this session's transaction"):
            spark.sql(f"CALL lake.system.rewrite_data_files(table => '{table}')").collect()
    finally:
        spark.sql("CALL lake.system.abort_transaction()")


def test_rewrite_runs_while_another_process_keeps_appending(spark: SparkSession, ns: str, tmp_path: Path) -> None:
    """Nothing lost, and the appender never stops committing: an append never conflicts with a compaction."""
    table, name = f"{ns}.t", f"{short(ns)}.t"
    spark.sql(f"CREATE TABLE {table} (id BIGINT, day STRING) PARTITIONED BY (day)")
    for i in range(6):
        spark.sql(f"INSERT INTO {table} VALUES ({i}, 'a'), ({100 + i}, 'b')")
    stop = tmp_path / "stop"
    code = textwrap.dedent(
        f"""
        import pathlib, sys, pyarrow as pa, catalog
        schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
        with catalog.open({lake_url_of(spark)!r}) as lake:
            t = lake.load_table({name!r})
            i = 1000
            while not pathlib.Path({str(stop)!r}).exists() or i < 1005:
                t.append(pa.table({{"id": [i], "day": ["a" if i % 2 else "b"]}}, schema=schema))
                print(i, flush=True)
                i += 1
        """
    )
    appender = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert appender.stdout is not None
        first = appender.stdout.readline()  # the appender is committing
        assert first.strip() == "1000"
        answers = [call(spark, f"CALL lake.system.rewrite_data_files(table => '{table}')") for _ in range(2)]
        stop.touch()
        out, _ = appender.communicate(timeout=120)
    finally:
        stop.touch()
        if appender.poll() is None:
            appender.kill()
    assert appender.returncode == 0
    appended = [1000] + [int(line) for line in out.split()]
    assert answers[0]["rewritten_data_files_count"] >= 12
    with catalog.open(lake_url_of(spark)) as lake:
        expected = sorted(list(range(6)) + [100 + i for i in range(6)] + appended)
        got_python, got_spark = python_ids(lake, name), ids(spark, table)
        history = [(e.version, [op.get("kind") for op in e.operations]) for e in lake.history(limit=None, table=name)]
        assert got_python == expected, (sorted(set(expected) - set(got_python)), sorted(set(got_python) - set(expected)), history)
        assert got_spark == expected, (sorted(set(expected) - set(got_spark)), sorted(set(got_spark) - set(expected)))
        kinds = [op["kind"] for e in lake.history(limit=None, table=name) for op in e.operations]
        assert kinds.count("compact") >= 1 and kinds.count("append") >= 6 + len(appended)


def test_spark_sql_shell_runs_the_procedures(tmp_path: Path) -> None:
    """bin/spark-sql with only the jar and the catalog options; one invocation runs every procedure."""
    url = tmp_path / "lake"
    with catalog.open(str(url)) as lake:
        lake.create_namespace("ops")
        t = lake.create_table("ops.t", SCHEMA, partition_by=["day"])
        for i in range(3):
            t.append(pa.table({"id": [i, 10 + i], "day": ["a", "b"]}, schema=SCHEMA))
        good = lake.version
        t.delete(pc.field("id") < 10)  # removes partition a's three files whole
        bad = lake.version
        (url / "landing").mkdir()
        pq.write_table(pa.table({"id": [50], "day": ["c"]}), url / "landing" / "x.parquet")
    # Imported files (no Parquet field ids) are read through the plugin's Python source.
    lines = run_spark_sql(
        tmp_path,
        str(url),
        [
            f"CALL lake.system.rollback_to_version(table => 'ops.t', version => {good})",
            "CALL lake.system.rewrite_data_files(table => 'ops.t')",
            "CALL lake.system.add_files(table => 'lake.ops.t', source => 'landing')",
            "CALL lake.system.verify(table => 'ops.t')",
            "CALL lake.system.expire_versions(retain_last => 1)",
            "CALL lake.system.remove_orphan_files(dry_run => true)",
            "SELECT 'rows', count(*), sum(id) FROM lake.ops.t",
        ],
        conf=("spark.sql.python.filterPushdown.enabled=true",),
    )
    with catalog.open(str(url)) as lake:
        history = {e.version: [op["kind"] for op in e.operations] for e in lake.history(limit=None)}
        rollback, compact, imported = bad + 1, bad + 2, bad + 3
        assert lines[0] == [str(bad), str(good), str(rollback), "3", "0", "false"]  # a's 3 files copied back
        assert history[rollback] == ["update_schema", "overwrite"] or "overwrite" in history[rollback]
        assert lines[1][:2] == ["6", "2"] and lines[1][-2:] == [str(compact), "1"]  # 2 partitions, first attempt
        assert history[compact] == ["compact"] and history[imported] == ["append"]
        size = (url / "landing" / "x.parquet").stat().st_size
        assert lines[2] == ["1", "1", str(size), str(imported)]
        report = lake.verify()
        assert lines[3] == ["true", "true", str(report.floor_version), str(imported), str(report.files_checked), "[]"]
        assert lines[4][:3] == ["0", "0", "0"]  # the default 24 h window keeps every version
        assert lines[5][-2:] == ["true", "[]"]
        data = lake.load_table("ops.t").scan().to_arrow()
        assert ["rows", str(data.num_rows), str(sum(data.column("id").to_pylist()))] == lines[6]
        assert sorted(data.column("id").to_pylist()) == [0, 1, 2, 10, 11, 12, 50]
