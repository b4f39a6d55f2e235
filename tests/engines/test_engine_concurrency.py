"""Concurrency across engines (issue 34, acceptance 2), on native tables served by the
session's ``lakekv serve``:

* pyiceberg appends, in a second process, race Spark MERGEs (the lakekv plugin on the
  shared Spark session in this process, catalog ``eng`` in ``uri`` mode) on one table;
* a multi-table REST transaction (DuckDB, in a second process: ``BEGIN``, an INSERT into each
  of two tables, ``COMMIT``, one ``/v1/transactions/commit``) races Spark UPDATEs of one of
  its tables.

Every statement marks the rows it writes with its own op label. Walking the lakehouse's
history version by version, each commit must be exactly one logged statement applied (by a
Python model) to the rows of the version before: the outcome is a serial order of whole
statements, each committed exactly once (nothing lost, nothing duplicated), and every
statement the writers report as committed is in it. A lost race must surface as pyiceberg's
``CommitFailedException`` (HTTP 409; DuckDB quotes the server's 409 CommitFailedException)
or the plugin's ``RetryableConflictError``, and the loser redoes the statement; any other
error fails the test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from engine_clients import SPARK_CATALOG, Engines, engines  # noqa: F401 - a fixture
from pyspark.errors import PySparkException

import catalog
from tests.spark.conftest import spark  # noqa: F401 - the shared Spark session
from tests.spark.lake_history import commits_after

pytestmark = pytest.mark.spark

WORKER = Path(__file__).with_name("engine_race_workers.py")
SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("op", pa.string())])
ROUNDS = 4
Row = tuple[int, int, str]
State = Counter[Row]  # the table's rows as a multiset (a key may repeat: see merge)


def seed(engines: Engines, names: list[str], partition_by: list[str]) -> int:
    """Create the tables with rows k = 0..9 (v = 0, op 'seed'); the lakehouse version after."""
    with engines.lake() as lake:
        lake.create_namespace(names[0].split(".")[0])
        for name in names:
            table = lake.create_table(name, SCHEMA, partition_by=partition_by)
            table.append(pa.table({"k": list(range(10)), "v": [0] * 10, "op": ["seed"] * 10}, schema=SCHEMA))
        return lake.version


def rows_at(lake: catalog.Lakehouse, name: str, version: int) -> State:
    with lake.at(version=version) as past:
        data = past.load_table(name).scan().to_arrow()
    return Counter(zip(data.column("k").to_pylist(), data.column("v").to_pylist(), data.column("op").to_pylist(),
                       strict=True))


def start_worker(engines: Engines, *args: str) -> subprocess.Popen[str]:
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), args[0], engines.server.url, str(engines.server.token), *args[1:]],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert worker.stdout is not None
    ready = worker.stdout.readline()
    assert json.loads(ready or "{}") == {"ready": True}, worker.stderr.read() if worker.stderr else ""
    return worker


def finish(worker: subprocess.Popen[str]) -> tuple[list[str], Counter[str]]:
    """The worker's committed op labels and its lost attempts by error type."""
    out, err = worker.communicate(timeout=600)
    assert worker.returncode == 0, err[-4000:]
    entries = [json.loads(line) for line in out.splitlines()]
    return [e["op"] for e in entries if "op" in e], Counter(e["lost"] for e in entries if "lost" in e)


def spark_rounds(engines: Engines, statements: list[tuple[str, str]]) -> tuple[list[str], int]:
    """Run each (op label, SQL) once, redoing a statement that lost with RetryableConflictError."""
    committed, lost = [], 0
    for op, sql in statements:
        while True:
            try:
                engines.spark.sql(sql)
                break
            except PySparkException as exc:
                if "RetryableConflictError" not in str(exc):
                    raise
                lost += 1
        committed.append(op)
    return committed, lost


def replay(
    versions: list[int], read: Callable[[int], tuple[State, ...]], start: tuple[State, ...],
    models: dict[str, Callable[[tuple[State, ...], str], tuple[State, ...]]],
) -> list[str]:
    """The op labels in commit order, checking each version is its one op applied to the one before."""
    state, order = start, []
    for version in versions:
        now = read(version)
        added = {op for before, after in zip(state, now, strict=True) for (_k, _v, op) in (after - before)}
        assert len(added) == 1, f"v{version}: not one whole statement: {sorted(added)}"
        (op,) = added
        assert now == models[op.split("-")[0]](state, op), f"v{version}: {op} applied to the version before differs"
        order.append(op)
        state = now
    return order


# -- pyiceberg appends racing Spark MERGE ------------------------------------------------------

MERGE_KEYS = (1, 4, 7)


def merge_model(state: tuple[State, ...], op: str) -> tuple[State, ...]:
    """``MERGE ... ON t.k = s.k`` with keys 1, 4, 7, 1000 + n (pyiceberg's n-th row, if it has
    landed), 2000 + n: matched rows get v + 10 and the op; unmatched keys are inserted with v 0."""
    (rows,) = state
    n = int(op.split("-")[1])
    keys = {*MERGE_KEYS, 1000 + n, 2000 + n}
    out: State = Counter()
    for (k, v, o), count in rows.items():
        out[(k, v + 10, op) if k in keys else (k, v, o)] += count
    for k in keys - {k for (k, _v, _o) in rows}:
        out[(k, 0, op)] += 1
    return (out,)


def append_model(state: tuple[State, ...], op: str) -> tuple[State, ...]:
    (rows,) = state
    return (rows + Counter({(1000 + int(op.split("-")[1]), 0, op): 1}),)


def test_pyiceberg_appends_race_spark_merges_and_serialize(engines: Engines) -> None:
    name = "race_merge.t"
    start = seed(engines, [name], partition_by=[])
    table = f"{SPARK_CATALOG}.{name}"
    merges = []
    for n in range(ROUNDS):
        keys = ", ".join(f"({k})" for k in (*MERGE_KEYS, 1000 + n, 2000 + n))
        merges.append((f"m-{n}", (
            f"MERGE INTO {table} t USING (SELECT CAST(col1 AS BIGINT) AS k FROM VALUES {keys}) s ON t.k = s.k "
            f"WHEN MATCHED THEN UPDATE SET v = t.v + 10, op = 'm-{n}' "
            f"WHEN NOT MATCHED THEN INSERT (k, v, op) VALUES (s.k, 0, 'm-{n}')")))

    # Spark plans against the table once before the race, so its first MERGE starts at once;
    # the appender has more rounds than Spark, so the two overlap (and it ends, so a MERGE
    # that keeps losing to appends wins in the end).
    assert engines.spark_sql(f"SELECT count(*) FROM {table}") == [(10,)]
    worker = start_worker(engines, "pyiceberg-append", name, str(3 * ROUNDS))
    assert worker.stdin is not None
    worker.stdin.write("go\n")
    worker.stdin.flush()
    merged, spark_lost = spark_rounds(engines, merges)
    appended, pyiceberg_lost = finish(worker)

    with engines.lake() as lake:
        versions = [h.version for h in commits_after(lake, start)]
        order = replay(versions, lambda v: (rows_at(lake, name, v),), (rows_at(lake, name, start),),
                       {"m": merge_model, "a": append_model})
        assert (rows_at(lake, name, lake.version),) == (rows_at(lake, name, versions[-1]),)
    assert sorted(order) == sorted(merged + appended), f"each statement committed exactly once: {order}"
    assert set(pyiceberg_lost) <= {"CommitFailedException"}
    print("serial order:", order, "lost: pyiceberg", dict(pyiceberg_lost), "spark", spark_lost)


# -- a multi-table REST transaction racing Spark UPDATE ----------------------------------------


def transaction_model(state: tuple[State, ...], op: str) -> tuple[State, ...]:
    row = (3000 + int(op.split("-")[1]), 0, op)
    return tuple(rows + Counter({row: 1}) for rows in state)


def update_model(state: tuple[State, ...], op: str) -> tuple[State, ...]:
    """``UPDATE x SET v = v + 1`` on every row of x (DuckDB's rows included, if they landed)."""
    x, y = state
    updated: State = Counter()
    for (k, v, _o), count in x.items():
        updated[(k, v + 1, op)] += count
    return (updated, y)


def test_a_multi_table_rest_transaction_races_spark_updates_of_one_of_its_tables(engines: Engines) -> None:
    x, y = "race_tx.x", "race_tx.y"
    start = seed(engines, [x, y], partition_by=[])  # DuckDB 1.4 INSERTs into unpartitioned tables only
    updates = [(f"u-{n}", f"UPDATE {SPARK_CATALOG}.{x} SET v = v + 1, op = 'u-{n}'") for n in range(ROUNDS)]

    assert engines.spark_sql(f"SELECT count(*) FROM {SPARK_CATALOG}.{x}") == [(10,)]
    worker = start_worker(engines, "duckdb-transaction", x, y, str(2 * ROUNDS))
    assert worker.stdin is not None
    worker.stdin.write("go\n")
    worker.stdin.flush()
    updated, spark_lost = spark_rounds(engines, updates)
    transactions, duckdb_lost = finish(worker)

    with engines.lake() as lake:
        versions = [h.version for h in commits_after(lake, start)]
        order = replay(versions, lambda v: (rows_at(lake, x, v), rows_at(lake, y, v)),
                       (rows_at(lake, x, start), rows_at(lake, y, start)),
                       {"d": transaction_model, "u": update_model})
        assert (rows_at(lake, x, lake.version), rows_at(lake, y, lake.version)) == (
            rows_at(lake, x, versions[-1]), rows_at(lake, y, versions[-1]))
    # Each DuckDB transaction is ONE version holding its row in both tables (checked by the model).
    assert sorted(order) == sorted(updated + transactions), f"each statement committed exactly once: {order}"
    assert set(duckdb_lost) <= {"CommitFailedException"}
    print("serial order:", order, "lost: duckdb", dict(duckdb_lost), "spark", spark_lost)
