"""Incremental reads, the changelog procedure and streams of catalog tables, checked against a model and the Python API."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import catalog
from catalog import changes
from tests.spark.test_catalog_plugin import lake_url_of, rows, short
from tests.spark.test_spark_concurrency import QUICK_JVM

pytestmark = pytest.mark.spark

STREAM_APP = Path(__file__).with_name("stream_app.py")


def test_incremental_read_is_the_rows_appended_between_two_versions(spark: SparkSession, ns: str) -> None:
    t = f"{ns}.t"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING)")
    with catalog.open(lake_url_of(spark)) as lake:
        v0 = lake.refresh()
        spark.sql(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')")
        v1 = lake.refresh()
        spark.sql(f"INSERT INTO {t} VALUES (3, 'c')")
        lake.compact_table(f"{short(ns)}.t")  # changes no row: adds nothing to the range
        v2 = lake.refresh()
        spark.sql(f"DELETE FROM {t} WHERE id = 3")
        v3 = lake.refresh()
        spark.sql(f"INSERT INTO {t} VALUES (4, 'd')")

        def read(start: int, end: int | None = None) -> list[tuple[object, ...]]:
            reader = spark.read.option("start-version", start)
            if end is not None:
                reader = reader.option("end-version", end)
            return sorted(tuple(r) for r in reader.table(t).collect())

        def python(start: int, end: int) -> list[tuple[object, ...]]:
            return sorted(zip(*changes.appended(lake, f"{short(ns)}.t", start, end).to_pydict().values()))

        assert read(v0, v2) == python(v0, v2) == [(1, "a"), (2, "b"), (3, "c")]
        assert read(v1, v2) == python(v1, v2) == [(3, "c")]
        assert read(v3) == python(v3, lake.refresh()) == [(4, "d")]  # end-version: the version the read loaded
        filtered = spark.read.option("start-version", v0).option("end-version", v2).table(t).where("id > 1")
        assert sorted(tuple(r) for r in filtered.collect()) == [(2, "b"), (3, "c")]

        # A range over the DELETE: refused, naming the version (Iceberg refuses overwrites too).
        with pytest.raises(Exception, match=f"lakehouse version {v3} \\(delete\\) deleted rows"):
            read(v0)

    for options, message in [
        ({"end-version": "3"}, "option end-version needs start-version"),
        ({"start-version": "5", "end-version": "3"}, "is after end-version"),
        ({"start-version": "x"}, "must be a lakehouse version"),
        ({"start-version": "1", "streaming-skip-delete-versions": "true"}, "are for a stream"),
        ({"start-version": "1", "nope": "1"}, "take no read options, got nope"),
    ]:
        with pytest.raises(Exception, match=message):
            spark.read.options(**options).table(t).collect()


def test_table_changes_procedure_is_the_python_changelog(spark: SparkSession, ns: str) -> None:
    t = f"{ns}.t"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING, amount DECIMAL(10,2), at TIMESTAMP)")
    with catalog.open(lake_url_of(spark)) as lake:
        v0 = lake.refresh()
        spark.sql(f"INSERT INTO {t} VALUES (1, 'a', 1.50, TIMESTAMP'2024-01-01 00:00:00.123456'), (2, 'b', 2.00, NULL)")
        spark.sql(f"UPDATE {t} SET v = 'B' WHERE id = 2")
        end = lake.refresh()
        got = spark.sql(f"CALL lake.system.table_changes('{t}', {v0}, {end}, array('id'))")
        assert got.columns == ["id", "v", "amount", "at", "_change_type", "_commit_version", "_commit_timestamp"]
        expected = lake.changes(f"{short(ns)}.t", v0, end, identifier_columns=["id"]).to_pylist()
    spark_rows = [r.asDict() for r in got.collect()]
    # Spark shows timestamps in the session's time zone, without one: compare as instants.
    def instant(row: dict) -> tuple:
        return tuple(
            value.timestamp() if hasattr(value, "timestamp") else value for value in row.values()
        )
    assert sorted(map(instant, spark_rows)) == sorted(map(instant, expected))
    assert Counter(r["_change_type"] for r in spark_rows) == {"insert": 2, "update_preimage": 1, "update_postimage": 1}
    # Named arguments, the catalog's name in the table's, and the latest version by default.
    named = spark.sql(f"CALL lake.system.table_changes(table => '{t}', start_version => {v0})")
    assert sorted(r['_change_type'] for r in named.collect()) == ["delete", "insert", "insert", "insert"]
    with pytest.raises(Exception, match="start version .* is after end version"):
        spark.sql(f"CALL lake.system.table_changes('{t}', {end}, {v0})").collect()


# -- the changelog and the stream over a random sequence of DML, the stream killed twice --


def _dml(
    rng: random.Random, kind: str, model: dict[int, str], fresh: list[int], step: int
) -> tuple[str, list[tuple[int, str]]]:
    """Statement ``kind`` on random rows of table ``{t}``, applied to the model; also the rows it appends (an INSERT's)."""
    kind = kind if model else "INSERT"
    some = rng.sample(sorted(model), min(len(model), rng.randint(1, 2))) if model else []
    if kind == "INSERT":
        new = [fresh.pop() for _ in range(rng.randint(1, 2))]
        model.update({i: f"i{i}" for i in new})
        return "INSERT INTO {t} VALUES " + ", ".join(f"({i}, 'i{i}')" for i in new), [(i, f"i{i}") for i in new]
    ids = ", ".join(map(str, some))
    if kind == "UPDATE":
        model.update({i: f"{model[i]}u{step}" for i in some})
        return f"UPDATE {{t}} SET v = concat(v, 'u{step}') WHERE id IN ({ids})", []
    if kind == "DELETE":
        for i in some:
            del model[i]
        return f"DELETE FROM {{t}} WHERE id IN ({ids})", []
    new = fresh.pop()
    source = " UNION ALL ".join(f"SELECT {i} AS id, 'm{step}' AS v" for i in [*some, new])
    model.update({i: f"{model[i]}m{step}" for i in some})
    model[new] = f"m{step}"
    sql = (f"MERGE INTO {{t}} t USING ({source}) s ON t.id = s.id "
           "WHEN MATCHED THEN UPDATE SET v = concat(t.v, s.v) WHEN NOT MATCHED THEN INSERT *")
    return sql, []


def _expected_changes(states: list[tuple[int, dict[int, str]]]) -> Counter:
    out: Counter = Counter()
    for (_, before), (version, after) in zip(states, states[1:]):
        for i in before.keys() | after.keys():
            old, new = before.get(i), after.get(i)
            if old == new:
                continue
            if old is not None and new is not None:
                out[(i, old, "update_preimage", version)] += 1
                out[(i, new, "update_postimage", version)] += 1
                continue
            if old is not None:
                out[(i, old, "delete", version)] += 1
            if new is not None:
                out[(i, new, "insert", version)] += 1
    return out


def _stream_process(url: str, source: str, sink: str, checkpoint: Path, log: Path) -> subprocess.Popen[str]:
    """The stream in another process: its JVM starts now, its query when it reads a line (see stream_app.py)."""
    with log.open("w") as err:  # a file, not a pipe: nobody reads it while the process waits
        return subprocess.Popen(
            [sys.executable, str(STREAM_APP), url, source, sink, str(checkpoint), "1"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, text=True,
            env=dict(os.environ, PYSPARK_SUBMIT_ARGS=QUICK_JVM),
        )


def _run_until_killed(proc: subprocess.Popen[str], log: Path) -> None:
    """Start the process's query and wait for it to be killed (SIGKILL) after its first micro-batch."""
    proc.communicate("go\n", timeout=600)
    assert proc.returncode == -9, f"the stream process was not killed:\n{log.read_text()[-3000:]}"


@pytest.mark.slow  # two more Spark applications (the killed streams): their JVMs' start is most of its time
def test_changelog_and_stream_over_random_dml_report_every_change_once(
    spark: SparkSession, ns: str, tmp_path: Path
) -> None:
    t, sink = f"{ns}.t", f"{ns}.sink"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING)")
    spark.sql(f"CREATE TABLE {sink} (id BIGINT, v STRING)")
    rng = random.Random(37)
    # Six statements, two per segment: every kind, in a random order after the first INSERT.
    order = ["INSERT", *rng.sample(["INSERT", "UPDATE", "DELETE", "MERGE"], 4), rng.choice(["UPDATE", "MERGE"])]
    fresh = list(range(1000, 0, -1))
    model: dict[int, str] = {}
    checkpoint = tmp_path / "checkpoint"
    url = lake_url_of(spark)
    # Both JVMs start while the table is prepared; each runs the stream when told to.
    logs = [tmp_path / f"stream-{i}.log" for i in range(2)]
    processes = [_stream_process(url, t, sink, checkpoint, log) for log in logs]
    streamed: list[tuple[int, str]] = []  # what the stream must deliver, in any order, each once
    try:
        with catalog.open(url) as lake:
            states = [(lake.refresh(), {})]
            for segment in range(3):
                for step in range(2):
                    sql, appended = _dml(rng, order[2 * segment + step], model, fresh, 10 * segment + step)
                    spark.sql(sql.format(t=t))
                    states.append((lake.refresh(), dict(model)))
                    if segment > 0:
                        streamed.extend(appended)
                if segment == 0:
                    # The stream's first micro-batch is the whole table at the version it starts at.
                    streamed.extend(model.items())
                if segment < 2:
                    _run_until_killed(processes[segment], logs[segment])  # killed (SIGKILL) and restarted twice
                if segment == 1:
                    # As if killed after the sink committed its batch but before Spark logged that:
                    # the restart runs the batch again, and the sink must not take it twice.
                    logged = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
                    logged[-1].unlink()
                    (logged[-1].parent / f".{logged[-1].name}.crc").unlink(missing_ok=True)
            query = (
                spark.readStream.option("streaming-skip-delete-versions", "true")
                .option("streaming-skip-overwrite-versions", "true")
                .table(t)
                .writeStream.option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True)
                .toTable(sink)
            )
            query.awaitTermination()
            assert query.exception() is None
            assert sorted(rows(spark, f"SELECT id, v FROM {sink}")) == sorted(streamed)

            start, end = states[0][0], states[-1][0]
            expected = _expected_changes(states)
            got = Counter(
                (r.id, r.v, r['_change_type'], r['_commit_version'])
                for r in spark.sql(f"CALL lake.system.table_changes('{t}', {start}, {end}, array('id'))").collect()
            )
            assert got == expected
            python = lake.changes(f"{short(ns)}.t", start, end, identifier_columns=["id"])
            assert Counter(zip(*(python.column(c).to_pylist() for c in ("id", "v", "_change_type", "_commit_version")))) == expected
    finally:
        for proc in processes:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def test_a_stream_refuses_a_version_that_deleted_rows_and_batch_options(
    spark: SparkSession, ns: str, tmp_path: Path
) -> None:
    t = f"{ns}.t"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING)")
    with catalog.open(lake_url_of(spark)) as lake:
        start = lake.refresh()
        spark.sql(f"INSERT INTO {t} VALUES (1, 'a')")
        spark.sql(f"DELETE FROM {t} WHERE id = 1")
        deleted = lake.refresh()

    def stream(**options: str) -> None:
        query = (
            spark.readStream.options(**options).table(t).writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "c" / str(len(options))))
            .trigger(availableNow=True).start()
        )
        query.awaitTermination()

    with pytest.raises(Exception, match=f"lakehouse version {deleted} \\(delete\\) deleted rows"):
        stream(**{"start-version": str(start)})
    with pytest.raises(Exception, match="option end-version is for a batch read"):
        stream(**{"start-version": str(start), "end-version": str(deleted)})


def test_a_stream_takes_one_version_per_micro_batch_unless_told_more(spark: SparkSession, ns: str, tmp_path: Path) -> None:
    t = f"{ns}.t"
    spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING)")
    with catalog.open(lake_url_of(spark)) as lake:
        start = lake.refresh()
    for i in range(3):
        spark.sql(f"INSERT INTO {t} VALUES ({i}, 'x')")

    def batches(name: str, **options: str) -> list[int]:
        query = (
            spark.readStream.option("start-version", start).options(**options).table(t).writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / name)).trigger(availableNow=True).start()
        )
        query.awaitTermination()
        return [p["numInputRows"] for p in query.recentProgress]

    assert batches("one") == [1, 1, 1]
    assert batches("two", **{"streaming-max-versions-per-micro-batch": "2"}) == [2, 1]
    with pytest.raises(Exception, match="must be a positive number of versions"):
        batches("zero", **{"streaming-max-versions-per-micro-batch": "0"})
