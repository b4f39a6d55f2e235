"""Durable transactions from Spark SQL: ``spark.sql.catalog.lake.transaction``, ``CALL lake.system.*_transaction``,
the ``lakekv lake URL begin/commit`` CLI, and several applications staging into one transaction.

Each test's statements run once inside a transaction and once, as the oracle,
in a plain namespace with no transaction: every read inside the transaction
and the committed result must equal what the plain run gives, row by row.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

import catalog
from tests.spark.catalog_apps import run_writer_apps
from tests.spark.lake_history import commits_after
from tests.spark.test_catalog_plugin import lake_url_of, rows, short

pytestmark = pytest.mark.spark

KEY = "spark.sql.catalog.lake.transaction"

SETUP = [
    "CREATE TABLE {ns}.a (id BIGINT, v INT, p STRING) PARTITIONED BY (p)",
    "INSERT INTO {ns}.a VALUES (1, 10, 'x'), (2, 20, 'x'), (3, 30, 'y'), (4, 40, 'y'), (5, 50, 'z')",
]
# Every kind of write the plugin makes, each reading what the ones before it wrote.
WRITES = [
    "CREATE TABLE {ns}.b AS SELECT id, v FROM {ns}.a WHERE p <> 'z'",
    "INSERT INTO {ns}.a VALUES (6, 60, 'z'), (7, 70, 'w')",
    "UPDATE {ns}.a SET v = v + 1 WHERE id % 2 = 0",
    "DELETE FROM {ns}.a WHERE p = 'x'",  # whole files
    "DELETE FROM {ns}.a WHERE id + 1 = 5",  # no exact form: Spark's rewrite
    "MERGE INTO {ns}.b t USING {ns}.a s ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, s.v) "
    "WHEN NOT MATCHED BY SOURCE THEN DELETE",
    "INSERT OVERWRITE {ns}.a PARTITION (p = 'z') SELECT id * 10, v FROM {ns}.b WHERE id > 5",
    "ALTER TABLE {ns}.b ADD COLUMN w INT",
    "INSERT INTO {ns}.b SELECT 100, count(*), 1 FROM {ns}.a",
    "CREATE VIEW {ns}.big AS SELECT id FROM {ns}.b WHERE v > 30",
]
READS = {
    "a": "SELECT id, v, p FROM {ns}.a ORDER BY id",
    "b": "SELECT id, v, w FROM {ns}.b ORDER BY id",
    "big": "SELECT id FROM {ns}.big ORDER BY id",
}


@pytest.fixture
def plain(spark: SparkSession, ns: str) -> Iterator[str]:
    """A second namespace where the same statements run with no transaction (the oracle)."""
    name = ns + "_plain"
    spark.sql(f"CREATE NAMESPACE {name}")
    yield name


@pytest.fixture(autouse=True)
def leaves_no_transaction(spark: SparkSession) -> Iterator[None]:
    yield
    spark.conf.unset(KEY)


def run(spark: SparkSession, statements: list[str], ns: str) -> None:
    for statement in statements:
        spark.sql(statement.format(ns=ns))


def read_all(spark: SparkSession, ns: str) -> dict[str, list[tuple[object, ...]]]:
    return {name: rows(spark, sql.format(ns=ns)) for name, sql in READS.items()}


def last_commit(url: str) -> int:
    with catalog.open(url) as lake:
        return max(h.version for h in lake.history(limit=None))


def test_every_write_of_the_session_stages_into_its_transaction_and_commits_as_one_version(
    spark: SparkSession, ns: str, plain: str
) -> None:
    run(spark, SETUP + WRITES, plain)
    expected = read_all(spark, plain)
    run(spark, SETUP, ns)
    url = lake_url_of(spark)
    before = last_commit(url)
    with catalog.open(url) as lake:
        a_before = lake.load_table(f"{short(ns)}.a").scan().to_arrow().sort_by("id").to_pylist()

    [(txid,)] = rows(spark, "CALL lake.system.begin_transaction(title => 'spark test')")
    assert spark.conf.get(KEY) == txid
    run(spark, WRITES, ns)
    assert read_all(spark, ns) == expected  # the session reads what its transaction staged
    with catalog.open(url) as lake:  # nobody else does
        assert commits_after(lake, before) == []
        assert lake.load_table(f"{short(ns)}.a").scan().to_arrow().sort_by("id").to_pylist() == a_before
        assert not lake.table_exists(f"{short(ns)}.b") and not lake.view_exists(f"{short(ns)}.big")

    [(committed, version)] = rows(spark, "CALL lake.system.commit_transaction()")
    assert committed == txid and spark.conf.get(KEY, None) is None
    with catalog.open(url) as lake:
        assert [h.version for h in commits_after(lake, before)] == [version]  # everything in one version
    assert read_all(spark, ns) == expected


def test_set_and_reset_join_and_leave_a_transaction_begun_elsewhere(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT)")
    url = lake_url_of(spark)
    with catalog.open(url) as lake:
        txn = lake.begin_durable(timeout=600, title="from python")
    spark.sql(f"SET {KEY}={txn.id}")
    spark.sql(f"INSERT INTO {ns}.t VALUES (1)")
    spark.sql(f"RESET {KEY}")
    spark.sql(f"INSERT INTO {ns}.t VALUES (2)")  # outside: visible at once
    assert rows(spark, f"SELECT id FROM {ns}.t ORDER BY id") == [(2,)]
    spark.conf.set(KEY, txn.id)
    assert rows(spark, f"SELECT id FROM {ns}.t ORDER BY id") == [(1,), (2,)]
    spark.conf.unset(KEY)
    with catalog.open(url) as lake:
        lake.attach(txn.id).commit()
    assert rows(spark, f"SELECT id FROM {ns}.t ORDER BY id") == [(1,), (2,)]


def test_an_aborted_transaction_changes_nothing_and_gc_removes_its_files(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT)")
    spark.sql(f"INSERT INTO {ns}.t VALUES (1)")
    url = lake_url_of(spark)
    before = last_commit(url)
    with catalog.open(url) as lake:
        stored_before = {m.path for m in lake.objects.list("data/")}
    [(txid,)] = rows(spark, "CALL lake.system.begin_transaction()")
    spark.sql(f"INSERT INTO {ns}.t SELECT id FROM range(10, 20)")
    spark.sql(f"CREATE TABLE {ns}.u AS SELECT * FROM {ns}.t")
    assert rows(spark, f"SELECT count(*) FROM {ns}.u") == [(11,)]
    assert rows(spark, "CALL lake.system.abort_transaction()") == [(txid,)]
    assert spark.conf.get(KEY, None) is None
    assert rows(spark, f"SELECT id FROM {ns}.t") == [(1,)]
    assert rows(spark, f"SHOW TABLES IN {ns}") == [(short(ns), "t", False)]
    with catalog.open(url) as lake:
        assert commits_after(lake, before) == []
        staged = {m.path for m in lake.objects.list("data/")} - stored_before
        assert staged, "the transaction's writes wrote files"
        lake.gc(grace_s=0)
        assert not staged & {m.path for m in lake.objects.list("data/")}


def test_refusals_name_what_is_wrong_and_change_nothing(spark: SparkSession, ns: str) -> None:
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT)")
    spark.sql(f"INSERT INTO {ns}.t VALUES (1)")
    url = lake_url_of(spark)
    with pytest.raises(Exception, match="works in no transaction"):
        spark.sql("CALL lake.system.commit_transaction()").collect()
    with pytest.raises(Exception, match="FAILED_TO_LOAD_ROUTINE.*`nope`"):
        spark.sql("CALL lake.system.nope()").collect()
    with pytest.raises(Exception, match="timeout_s must be a positive"):
        spark.sql("CALL lake.system.begin_transaction(timeout_s => -1)").collect()
    assert spark.conf.get(KEY, None) is None

    [(txid,)] = rows(spark, "CALL lake.system.begin_transaction()")
    with pytest.raises(Exception, match=f"already works in transaction {txid}"):
        spark.sql("CALL lake.system.begin_transaction()").collect()
    version = last_commit(url)
    spark.sql(f"INSERT INTO {ns}.t VALUES (2)")
    # Time travel reads the version named, inside a transaction too.
    assert rows(spark, f"SELECT id FROM {ns}.t VERSION AS OF {version}") == [(1,)]
    with pytest.raises((PySparkException, Py4JJavaError), match="PURGE inside durable transaction"):
        spark.sql(f"DROP TABLE {ns}.t PURGE")
    assert rows(spark, f"SELECT id FROM {ns}.t ORDER BY id") == [(1,), (2,)]
    spark.sql("CALL lake.system.abort_transaction()")

    spark.conf.set(KEY, "0" * 32)
    with pytest.raises(Exception, match="0{32}"):
        spark.sql(f"SELECT * FROM {ns}.t").collect()
    spark.conf.set(KEY, "not a transaction id")
    with pytest.raises(Exception, match="32 lowercase hex"):
        spark.sql(f"INSERT INTO {ns}.t VALUES (3)")
    spark.conf.unset(KEY)
    assert rows(spark, f"SELECT id FROM {ns}.t ORDER BY id") == [(1,)]


def test_the_python_data_path_reads_and_stages_in_the_transaction(spark: SparkSession, ns: str) -> None:
    # Nanosecond timestamps (written by Python) are read and written by the Python source, not Spark's Parquet code.
    url = lake_url_of(spark)
    schema = pa.schema([("id", pa.int64()), ("at", pa.timestamp("ns"))])
    with catalog.open(url) as lake:
        lake.create_table(f"{short(ns)}.t", schema).append(pa.table({"id": [1], "at": [0]}, schema=schema))
        before = max(h.version for h in lake.history(limit=None))
    spark.sql("CALL lake.system.begin_transaction()")
    spark.sql(f"INSERT INTO {ns}.t SELECT 2, TIMESTAMP '2026-01-01 00:00:00'")
    assert rows(spark, f"SELECT id FROM {ns}.t ORDER BY id") == [(1,), (2,)]
    with catalog.open(url) as lake:
        assert lake.load_table(f"{short(ns)}.t").scan().to_arrow().column("id").to_pylist() == [1]
    [(_, version)] = rows(spark, "CALL lake.system.commit_transaction()")
    with catalog.open(url) as lake:
        assert [h.version for h in commits_after(lake, before)] == [version]
        assert sorted(lake.load_table(f"{short(ns)}.t").scan().to_arrow().column("id").to_pylist()) == [1, 2]


@pytest.mark.slow
@pytest.mark.timeout(1800)  # three JVM starts on a shared 2-core machine
def test_several_applications_stage_into_one_transaction_that_commits_as_one_version(tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    with catalog.open(url) as lake:
        lake.create_namespace("c")
        for name in ("t", "u"):
            lake.create_table(f"c.{name}", pa.schema([("k", pa.int64()), ("app", pa.string())]))
        before = max(h.version for h in lake.history(limit=None))
    lakekv = [sys.executable, "-m", "kvstore.cli", "lake", url]
    txid = subprocess.run([*lakekv, "begin", "--title", "two apps", "--timeout", "1200"],
                          check=True, capture_output=True, text=True).stdout.strip()

    def writes(app: str, first: int) -> list[str]:
        return [
            f"SET {KEY}={txid}",
            f"INSERT INTO lake.c.t SELECT id, '{app}' FROM range({first}, {first + 50})",
            f"INSERT INTO lake.c.u VALUES ({first}, '{app}')",
            f"UPDATE lake.c.t SET k = -k WHERE app = '{app}' AND k % 10 = 0",  # reads the transaction's own rows
        ]

    run_writer_apps(tmp_path, url, {"one": writes("one", 0), "two": writes("two", 100)})
    with catalog.open(url) as lake:  # staged, not visible
        assert commits_after(lake, before) == []
        assert lake.load_table("c.t").scan().to_arrow().num_rows == 0

    out = subprocess.run([*lakekv, "commit", txid], check=True, capture_output=True, text=True).stdout
    version = int(out.split()[-1])
    with catalog.open(url) as lake:
        assert [h.version for h in commits_after(lake, before)] == [version]
        t = lake.load_table("c.t").scan().to_arrow()
        u = lake.load_table("c.u").scan().to_arrow()
    expected_t = sorted((-k if k % 10 == 0 else k, app) for app, first in (("one", 0), ("two", 100)) for k in range(first, first + 50))
    assert sorted(zip(t.column("k").to_pylist(), t.column("app").to_pylist())) == expected_t
    assert sorted(zip(u.column("k").to_pylist(), u.column("app").to_pylist())) == [(0, "one"), (100, "two")]


def test_the_documented_sql_transaction_runs(spark: SparkSession, ns: str) -> None:
    """docs/spark.md › Transactions across statements: its SQL, on tables of this test's namespace."""
    import re

    doc = (Path(__file__).resolve().parents[2] / "docs" / "spark.md").read_text()
    section = doc.split("### Transactions across statements", 1)[1]
    block = re.search(r"```sql\n(.*?)```", section, flags=re.DOTALL)
    assert block is not None
    statements = [s.strip() for s in re.sub(r"--[^\n]*", "", block.group(1)).split(";")]
    spark.sql(f"CREATE TABLE {ns}.orders (day DATE, amount DOUBLE)")
    spark.sql(f"CREATE TABLE {ns}.customers (id BIGINT, name STRING)")
    spark.sql(f"INSERT INTO {ns}.customers VALUES (1, 'a'), (2, 'b')")
    spark.sql("SELECT DATE'2026-11-01' AS day, 2.5 AS amount UNION ALL SELECT DATE'2026-11-01', 1.5") \
        .createOrReplaceTempView("staging_orders")
    spark.sql("SELECT CAST(2 AS BIGINT) AS id, 'B' AS name UNION ALL SELECT 3, 'c'").createOrReplaceTempView("updates")
    results = [rows(spark, s.replace("lake.sales.", f"{ns}.")) for s in statements if s]
    assert results[0][0][0] == results[-1][0][0]  # begin and commit name the same transaction
    assert spark.conf.get(KEY, None) is None
    assert rows(spark, f"SELECT id, name FROM {ns}.customers ORDER BY id") == [(1, "a"), (2, "B"), (3, "c")]
    assert rows(spark, f"SELECT CAST(day AS STRING), amount FROM {ns}.daily") == [("2026-11-01", 4.0)]
