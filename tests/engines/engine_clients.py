"""Clients of one ``lakekv serve`` for the engine matrix: every reader answers the same
question ("the rows of table ``ns.t``, now or at an older version") as sorted tuples, so
each answer is compared with one expected model (a helper, no tests; its ``engines`` fixture is imported by the test modules).

A point in time is an :class:`AsOf`: the Iceberg snapshot id and timestamp the REST API
serves for it, and the lakehouse version and its commit time, the routes the lakekv plugin
and the Python API time-travel by. Iceberg readers go by snapshot id or by the snapshot's
timestamp; lakekv readers by version or by the commit time. The two times agree for native
tables (a derived snapshot's timestamp is its version's commit time, rounded up to the
millisecond); on a table whose client wrote its Iceberg metadata (pyiceberg, DuckDB) the
snapshot's timestamp is the client's clock when it made the snapshot, before the commit
landed, so there the lakekv readers take the commit time.
"""

from __future__ import annotations

import datetime
import math
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import duckdb
import duckdb_ext
import polars as pl
import pytest
from jvm_iceberg import JvmIcebergEngine
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

import catalog
from catalog.spark.plugin import catalog_conf
from service.testing import ServerProcess

Rows = list[tuple[Any, ...]]
# The lakekv plugin's catalog on the shared Spark session, in uri mode against the server.
SPARK_CATALOG = "eng"


@dataclass(frozen=True)
class AsOf:
    """One older state of a table, named every way an engine can name it."""

    snapshot_id: int
    timestamp_ms: int  # the Iceberg snapshot's
    version: int  # the lakehouse version that made it
    commit_time_s: float  # that version's commit time (the storage's)

    def sql_timestamp(self) -> str:
        """The snapshot's time as a UTC SQL timestamp literal's text (the sessions run in UTC)."""
        return _sql_time(self.timestamp_ms / 1000)

    def sql_commit_time(self) -> str:
        """The lakehouse commit's time, rounded up to the millisecond (the plugin's resolution)."""
        return _sql_time(math.ceil(self.commit_time_s * 1000) / 1000)


def _sql_time(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


@dataclass(frozen=True)
class Engines:
    """Every client of the session's server."""

    server: ServerProcess
    spark: SparkSession
    jvm: JvmIcebergEngine

    def rest(self) -> RestCatalog:
        return RestCatalog("lakekv", uri=self.server.url, token=self.server.token)

    def lake(self) -> catalog.Lakehouse:
        return catalog.open(self.server.store_url, poll_interval_s=0, background_maintenance=False)

    @contextmanager
    def duckdb(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """DuckDB with the offline extension set (the ``duckdb-ext-*`` wheels) and ``lake`` attached."""
        extension_dir = os.path.join(list(duckdb_ext.__path__)[0], "extensions")
        con = duckdb.connect(config={"extension_directory": extension_dir, "autoinstall_known_extensions": False})
        try:
            for name in ("httpfs", "avro", "parquet", "iceberg"):
                con.execute(f"LOAD {name}")
            con.execute("SET TimeZone = 'UTC'")
            con.execute(f"CREATE SECRET lakekv_token (TYPE iceberg, TOKEN '{self.server.token}')")
            con.execute(f"ATTACH 'lakekv' AS lake (TYPE iceberg, ENDPOINT '{self.server.url}', SECRET lakekv_token)")
            yield con
        finally:
            con.close()

    def spark_sql(self, sql: str) -> Rows:
        return [tuple(row) for row in self.spark.sql(sql).collect()]

    def jvm_sql(self, sql: str | list[str]) -> Rows:
        return self.jvm.run_sql(self.server.url, sql, token=self.server.token)

    def as_of_now(self, name: str) -> AsOf:
        """The table's current snapshot over REST and the lakehouse version of its last change."""
        snapshot = self.rest().load_table(name).current_snapshot()
        assert snapshot is not None, f"{name} has no snapshot"
        with self.lake() as lake:
            last = lake.history(limit=1, table=name)[0]
        return AsOf(snapshot.snapshot_id, snapshot.timestamp_ms, last.version, last.timestamp)


@pytest.fixture(scope="module")
def engines(spark: SparkSession, lake_server: ServerProcess, jvm_iceberg: JvmIcebergEngine) -> Engines:
    """Every client; the test module must also import tests/spark's ``spark`` fixture.

    The lakekv plugin's catalog ``eng`` on the shared Spark session is set for the
    session's server in ``uri`` mode (its catalog requests go to the server, and it reads
    and writes the Parquet files itself: the server's directory is on this machine).
    """
    conf = catalog_conf(SPARK_CATALOG, lake_server.store_url, uri=lake_server.url, token=lake_server.token,
                        python=sys.executable)
    for key, value in conf.items():
        spark.conf.set(key, value)
    return Engines(lake_server, spark, jvm_iceberg)


def _sorted(rows: Rows) -> Rows:
    return sorted(rows, key=lambda row: tuple((value is None, value) for value in row))


def read_spark(engines: Engines, name: str, at: AsOf | None, by: str) -> Rows:
    clause = "" if at is None else (
        f" VERSION AS OF {at.version}" if by == "snapshot" else f" TIMESTAMP AS OF '{at.sql_commit_time()}'")
    return _sorted(engines.spark_sql(f"SELECT * FROM {SPARK_CATALOG}.{name}{clause}"))


def read_python(engines: Engines, name: str, at: AsOf | None, by: str) -> Rows:
    with engines.lake() as lake:
        source: Any = lake
        if at is not None:
            source = lake.at(version=at.version) if by == "snapshot" else lake.at(timestamp=at.commit_time_s)
        table = source.load_table(name).scan().to_arrow()
    return _sorted([tuple(row.values()) for row in table.to_pylist()])


def read_pyiceberg(engines: Engines, name: str, at: AsOf | None, by: str) -> Rows:
    table = engines.rest().load_table(name)
    snapshot_id = None
    if at is not None:
        if by == "snapshot":
            snapshot_id = at.snapshot_id
        else:
            found = table.snapshot_as_of_timestamp(at.timestamp_ms)
            assert found is not None, f"no snapshot of {name} at {at.timestamp_ms}"
            snapshot_id = found.snapshot_id
    arrow = table.scan(snapshot_id=snapshot_id).to_arrow()
    return _sorted([tuple(row.values()) for row in arrow.to_pylist()])


def read_duckdb_rest(engines: Engines, name: str, at: AsOf | None, by: str) -> Rows:
    clause = "" if at is None else (
        f" AT (VERSION => {at.snapshot_id})" if by == "snapshot" else f" AT (TIMESTAMP => TIMESTAMP '{at.sql_timestamp()}')")
    with engines.duckdb() as con:
        return _sorted(con.execute(f"SELECT * FROM lake.{name}{clause}").fetchall())


def read_duckdb_scan(engines: Engines, name: str, at: AsOf | None, by: str) -> Rows:
    """``iceberg_scan`` of the metadata location REST serves: no catalog in the read."""
    location = engines.rest().load_table(name).metadata_location
    option = "" if at is None else (
        f", snapshot_from_id => {at.snapshot_id}" if by == "snapshot"
        else f", snapshot_from_timestamp => TIMESTAMP '{at.sql_timestamp()}'")
    with engines.duckdb() as con:
        return _sorted(con.execute(f"SELECT * FROM iceberg_scan('{location}'{option})").fetchall())


@contextmanager
def _pyiceberg_planner() -> Iterator[None]:
    # Polars' own planner (the polars_iceberg package) is not installed: plan with pyiceberg.
    before = os.environ.get("POLARS_ICEBERG_PLANNER")
    os.environ["POLARS_ICEBERG_PLANNER"] = "pyiceberg"
    try:
        yield
    finally:
        if before is None:
            del os.environ["POLARS_ICEBERG_PLANNER"]
        else:
            os.environ["POLARS_ICEBERG_PLANNER"] = before


def read_polars(engines: Engines, name: str, at: AsOf | None, by: str) -> Rows:
    table = engines.rest().load_table(name)
    snapshot_id = None
    if at is not None:
        if by == "snapshot":
            snapshot_id = at.snapshot_id
        else:  # Polars takes a snapshot id only: the timestamp resolved by pyiceberg's table
            found = table.snapshot_as_of_timestamp(at.timestamp_ms)
            assert found is not None, f"no snapshot of {name} at {at.timestamp_ms}"
            snapshot_id = found.snapshot_id
    with _pyiceberg_planner():
        frame = pl.scan_iceberg(table, snapshot_id=snapshot_id).collect()
    return _sorted(frame.rows())


def read_jvm(engines: Engines, name: str, at: AsOf | None, by: str) -> Rows:
    clause = "" if at is None else (
        f" VERSION AS OF {at.snapshot_id}" if by == "snapshot" else f" TIMESTAMP AS OF '{at.sql_timestamp()}'")
    return _sorted(engines.jvm_sql(f"SELECT * FROM {name}{clause}"))


Reader = Callable[[Engines, str, "AsOf | None", str], Rows]
READERS: dict[str, Reader] = {
    "spark": read_spark,
    "python": read_python,
    "pyiceberg": read_pyiceberg,
    "duckdb_rest": read_duckdb_rest,
    "duckdb_scan": read_duckdb_scan,
    "polars": read_polars,
    "jvm_iceberg": read_jvm,
}
# Readers that go through lakekv's own table handles (the plugin and the Python API).
LAKEKV_READERS = frozenset({"spark", "python"})


def expected(rows: Rows) -> Rows:
    return _sorted(rows)
