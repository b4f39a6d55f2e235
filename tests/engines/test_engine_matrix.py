"""One lakehouse, every engine (issue 34, acceptance 1): writers {Spark SQL through the lakekv
plugin, the Python API, pyiceberg, DuckDB over REST, Polars ``write_iceberg``} × readers
{Spark SQL through the plugin, the Python API, pyiceberg, DuckDB (REST ATTACH and
``iceberg_scan`` of the served metadata location), Polars ``scan_iceberg``, a JVM Iceberg
engine (Spark 4.1 + Apache Iceberg's runtime)}, every cell checked row for row against one
model: now, at the older state by snapshot id (lakehouse version for lakekv readers) and by
timestamp; then after ADD/RENAME/DROP COLUMN, after DELETE/UPDATE from Spark and from DuckDB,
and views made three ways.

One table per writer, every reader on it; all share the session's server (conftest.py), the
shared local Spark session of tests/spark (its ``spark`` fixture, with a lakekv catalog
``eng`` in ``uri`` mode against that server) and the one JVM engine.

Which table kind each writer makes: Spark and the Python API make native tables; pyiceberg
and DuckDB create theirs over REST (format ``iceberg``); Polars appends (``write_iceberg``
through pyiceberg) into a native table the Python API made. The plugin and the Python API
read the REST-created ones by planning through pyiceberg (catalog/iceberg_tables.py). DuckDB 1.4 cannot INSERT into a
partitioned Iceberg table ("not supported yet"), so DuckDB's table is the one unpartitioned
table here; every other is partitioned by ``region``.
"""

from __future__ import annotations

import itertools
import json
import re
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pytest
from engine_clients import READERS, SPARK_CATALOG, AsOf, Engines, Rows, engines, expected  # noqa: F401 - a fixture
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DoubleType, LongType, NestedField, StringType
from pyiceberg.view.metadata import SQLViewRepresentation, ViewVersion

from service.testing import ServerProcess
# The shared Spark session of tests/spark (session-scoped; pyspark's getOrCreate makes it one JVM
# however many modules name the fixture).
from tests.spark.conftest import spark  # noqa: F401

pytestmark = pytest.mark.spark

ARROW = pa.schema([("id", pa.int64()), ("region", pa.string()), ("amount", pa.float64()), ("flag", pa.string())])
ICEBERG = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "amount", DoubleType(), required=False),
    NestedField(4, "flag", StringType(), required=False),
)
BY_REGION = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))
COLUMNS_SQL = "id BIGINT, region STRING, amount DOUBLE, flag STRING"
FIRST: Rows = [(1, "eu", 1.5, "a"), (2, "us", 2.0, None), (3, "apac", None, "c")]
SECOND: Rows = [(4, "eu", 4.25, "d"), (5, "us", 5.0, "e")]

WRITERS = ("spark", "python", "pyiceberg", "duckdb", "polars")


def values_sql(rows: Rows) -> str:
    def literal(value: object) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        return repr(value)

    return ", ".join("(" + ", ".join(literal(v) for v in row) + ")" for row in rows)


def arrow(rows: Rows, schema: pa.Schema = ARROW) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, row, strict=True)) for row in rows], schema=schema)


def cells(tables: tuple[str, ...]) -> list[Any]:
    """Every (table, reader) pair."""
    return [pytest.param(table, reader, id=f"{table}-{reader}") for table, reader in itertools.product(tables, READERS)]


# -- writers: each makes ns.t, writes FIRST (remembering that state), then SECOND ------------


@dataclass(frozen=True)
class Written:
    name: str
    first: AsOf  # the state holding FIRST only


def write_spark(engines: Engines, name: str, batches: list[Rows]) -> list[AsOf]:
    ns = name.split(".")[0]
    engines.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {SPARK_CATALOG}.{ns}")
    engines.spark.sql(f"CREATE TABLE {SPARK_CATALOG}.{name} ({COLUMNS_SQL}) PARTITIONED BY (region)")
    states = []
    for rows in batches:
        engines.spark.sql(f"INSERT INTO {SPARK_CATALOG}.{name} VALUES {values_sql(rows)}")
        states.append(engines.as_of_now(name))
    return states


def write_python(
    engines: Engines, name: str, batches: list[Rows], partition_by: tuple[str, ...] = ("region",)
) -> list[AsOf]:
    with engines.lake() as lake:
        lake.create_namespace(name.split(".")[0])
        lake.create_table(name, ARROW, partition_by=list(partition_by))
    states = []
    for rows in batches:
        with engines.lake() as lake:
            lake.load_table(name).append(arrow(rows))
        states.append(engines.as_of_now(name))
    return states


def write_pyiceberg(engines: Engines, name: str, batches: list[Rows]) -> list[AsOf]:
    rest = engines.rest()
    rest.create_namespace_if_not_exists(name.split(".")[0])
    table = rest.create_table(name, schema=ICEBERG, partition_spec=BY_REGION)
    states = []
    for rows in batches:
        table.append(arrow(rows))
        states.append(engines.as_of_now(name))
    return states


def write_duckdb(engines: Engines, name: str, batches: list[Rows]) -> list[AsOf]:
    states = []
    with engines.duckdb() as con:
        con.execute(f"CREATE SCHEMA IF NOT EXISTS lake.{name.split('.')[0]}")
        # Unpartitioned: DuckDB 1.4 INSERTs into unpartitioned Iceberg tables only.
        con.execute(f"CREATE TABLE lake.{name} (id BIGINT, region VARCHAR, amount DOUBLE, flag VARCHAR)")
        for rows in batches:
            con.execute(f"INSERT INTO lake.{name} VALUES {values_sql(rows)}")
            states.append(engines.as_of_now(name))
    return states


def write_polars(engines: Engines, name: str, batches: list[Rows]) -> list[AsOf]:
    with engines.lake() as lake:
        lake.create_namespace(name.split(".")[0])
        lake.create_table(name, ARROW, partition_by=["region"])  # native; Polars writes it over REST
    states = []
    for rows in batches:
        frame = pl.from_arrow(arrow(rows))
        assert isinstance(frame, pl.DataFrame)
        frame.write_iceberg(engines.rest().load_table(name), mode="append")
        states.append(engines.as_of_now(name))
    return states


WRITE = {"spark": write_spark, "python": write_python, "pyiceberg": write_pyiceberg,
         "duckdb": write_duckdb, "polars": write_polars}


@pytest.fixture(scope="module")
def written(engines: Engines) -> Iterator[dict[str, Written]]:
    """``written[writer]``: that writer's table, written on first use (one table per writer)."""

    class Tables(dict[str, Written]):
        def __missing__(self, writer: str) -> Written:
            name = f"matrix_{writer}.t"
            first, _second = WRITE[writer](engines, name, [FIRST, SECOND])
            self[writer] = Written(name, first)
            return self[writer]

    yield Tables()


@pytest.mark.parametrize(("writer", "reader"), cells(WRITERS))
def test_every_reader_reads_every_writers_table_now_and_at_the_older_state(
    engines: Engines, written: dict[str, Written], writer: str, reader: str
) -> None:
    table = written[writer]
    read = READERS[reader]
    assert read(engines, table.name, None, "now") == expected(FIRST + SECOND)
    assert read(engines, table.name, table.first, "snapshot") == expected(FIRST)
    assert read(engines, table.name, table.first, "timestamp") == expected(FIRST)


def test_the_older_state_is_one_snapshot_every_iceberg_reader_names_alike(
    engines: Engines, written: dict[str, Written]
) -> None:
    """For a native table the derived snapshot's sequence number is the lakehouse version:
    the snapshot id Iceberg readers travel to and the version lakekv readers travel to are one state."""
    for writer in ("spark", "python", "polars"):
        table = written[writer]
        snapshot = engines.rest().load_table(table.name).snapshot_by_id(table.first.snapshot_id)
        assert snapshot is not None and snapshot.sequence_number == table.first.version, writer


def test_every_writers_table_but_duckdbs_is_partitioned_by_region(engines: Engines, written: dict[str, Written]) -> None:
    for writer in WRITERS:
        spec = engines.rest().load_table(written[writer].name).spec()
        assert [f.name for f in spec.fields] == ([] if writer == "duckdb" else ["region"]), writer


# -- ADD / RENAME / DROP COLUMN ---------------------------------------------------------------

EVOLVED_COLUMNS = ["id", "region", "total", "note"]
# FIRST after: ADD COLUMN note, RENAME amount TO total, DROP COLUMN flag; then one new row.
EVOLVED: Rows = [(i, region, amount, None) for i, region, amount, _flag in FIRST] + [(9, "eu", 9.0, "new")]
EVOLVERS = ("spark", "python", "pyiceberg")


def evolve(engines: Engines, evolver: str, name: str) -> AsOf:
    """Write FIRST, change the columns, write one more row; the state before the changes."""
    (before,) = WRITE[evolver](engines, name, [FIRST])
    if evolver == "spark":
        for change in ("ADD COLUMN note STRING", "RENAME COLUMN amount TO total", "DROP COLUMN flag"):
            engines.spark.sql(f"ALTER TABLE {SPARK_CATALOG}.{name} {change}")
        engines.spark.sql(f"INSERT INTO {SPARK_CATALOG}.{name} (id, region, total, note) VALUES (9, 'eu', 9.0, 'new')")
    elif evolver == "python":
        with engines.lake() as lake:
            # A handle is pinned to the schema it loaded: one fresh handle per change.
            lake.load_table(name).update_schema().add_column("note", pa.string()).commit()
            lake.load_table(name).update_schema().rename_column("amount", "total").commit()
            lake.load_table(name).update_schema().drop_column("flag").commit()
            lake.load_table(name).append(pa.table(
                {"id": [9], "region": ["eu"], "total": [9.0], "note": ["new"]}, schema=lake.load_table(name).schema))
    else:
        table = engines.rest().load_table(name)
        with table.update_schema() as update:
            update.add_column("note", StringType())
        with table.update_schema() as update:
            update.rename_column("amount", "total")
        with table.update_schema() as update:
            update.delete_column("flag")
        table.append(pa.table({"id": [9], "region": ["eu"], "total": [9.0], "note": ["new"]},
                              schema=table.schema().as_arrow()))
    return before


@pytest.fixture(scope="module")
def evolved(engines: Engines) -> Iterator[dict[str, Written]]:
    class Tables(dict[str, Written]):
        def __missing__(self, evolver: str) -> Written:
            name = f"matrix_evolve_{evolver}.t"
            self[evolver] = Written(name, evolve(engines, evolver, name))
            return self[evolver]

    yield Tables()


@pytest.mark.parametrize(("evolver", "reader"), cells(EVOLVERS))
def test_every_reader_reads_renamed_added_and_dropped_columns_by_field_id(
    engines: Engines, evolved: dict[str, Written], evolver: str, reader: str
) -> None:
    table = evolved[evolver]
    assert READERS[reader](engines, table.name, None, "now") == expected(EVOLVED)
    assert [f.name for f in engines.rest().load_table(table.name).schema().fields] == EVOLVED_COLUMNS
    # Before the changes: the columns of then (amount and flag, no note), by snapshot and by time.
    assert READERS[reader](engines, table.name, table.first, "snapshot") == expected(FIRST)
    assert READERS[reader](engines, table.name, table.first, "timestamp") == expected(FIRST)


# -- DELETE / UPDATE --------------------------------------------------------------------------

AFTER_ROW_CHANGES: Rows = [(1, "eu", 1.5, "a"), (3, "apac", None, "c"), (4, "eu", 40.0, "d"), (5, "us", 5.0, "e")]


@pytest.fixture(scope="module")
def changed(engines: Engines) -> Iterator[dict[str, Written]]:
    """Tables after ``DELETE WHERE id = 2`` and ``UPDATE SET amount = 40 WHERE id = 4``: from
    Spark (native table) and from DuckDB (its own REST-created table; it writes delete files);
    each with its state before the changes."""

    class Tables(dict[str, Written]):
        def __missing__(self, changer: str) -> Written:
            name = f"matrix_rows_{changer}.t"
            if changer == "spark":
                (before,) = write_spark(engines, name, [FIRST + SECOND])
                engines.spark.sql(f"DELETE FROM {SPARK_CATALOG}.{name} WHERE id = 2")
                engines.spark.sql(f"UPDATE {SPARK_CATALOG}.{name} SET amount = 40.0 WHERE id = 4")
            else:
                (before,) = write_duckdb(engines, name, [FIRST + SECOND])
                with engines.duckdb() as con:
                    con.execute(f"DELETE FROM lake.{name} WHERE id = 2")
                    con.execute(f"UPDATE lake.{name} SET amount = 40.0 WHERE id = 4")
            self[changer] = Written(name, before)
            return self[changer]

    yield Tables()


@pytest.mark.parametrize(("changer", "reader"), cells(("spark", "duckdb")))
def test_every_reader_reads_rows_deleted_and_updated_by_spark_and_by_duckdb(
    engines: Engines, changed: dict[str, Written], changer: str, reader: str
) -> None:
    table = changed[changer]
    assert READERS[reader](engines, table.name, None, "now") == expected(AFTER_ROW_CHANGES)
    # The state before, by snapshot id (lakehouse version for lakekv readers): the delete (files, for
    # DuckDB's merge-on-read) must not reach back to it. By timestamp: the cells above, for time.
    assert READERS[reader](engines, table.name, table.first, "snapshot") == expected(FIRST + SECOND)


def test_duckdb_delete_and_update_on_a_native_table_are_refused_and_change_nothing(engines: Engines) -> None:
    """DuckDB writes merge-on-read delete files; a native table refuses their commit with a 400
    naming the feature (service/iceberg/native.py), and the lakehouse stays as it was."""
    name = "matrix_refused.t"
    # Unpartitioned: on a partitioned table DuckDB 1.4 stops before any commit ("Delete from a
    # partitioned table is not supported yet").
    write_python(engines, name, [FIRST + SECOND], partition_by=())
    with engines.lake() as lake:
        version = lake.version
    refusal = {"error": {
        "message": f"table {name} is a native lakekv table, which does not support delete files (position or "
                   "equality deletes): honouring them would need every read path (the Python scan, the Spark plugin, "
                   "the derived Iceberg metadata) to apply them; rewrite the affected data files instead (copy-on-write)",
        "type": "BadRequestException", "code": 400,
    }}
    with engines.duckdb() as con:
        for statement in (f"DELETE FROM lake.{name} WHERE id = 2", f"UPDATE lake.{name} SET amount = 0 WHERE id = 4"):
            with pytest.raises(duckdb.Error, match=re.escape("/v1/transactions/commit' returned a non-200 status "
                                                             "code (BadRequest_400)")) as caught:
                con.execute(statement)
            # DuckDB quotes the server's answer whole: exactly the refusal, nothing else.
            assert json.loads(str(caught.value).split(", body: ", 1)[1]) == refusal
    with engines.lake() as lake:
        assert lake.version == version
    for reader in ("python", "pyiceberg", "duckdb_rest"):
        assert READERS[reader](engines, name, None, "now") == expected(FIRST + SECOND), reader


# -- views made three ways ----------------------------------------------------------------------


def rest_get(server: ServerProcess, path: str) -> dict[str, Any]:
    request = urllib.request.Request(server.url + path, headers={"Authorization": f"Bearer {server.token}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return dict(json.load(response))


def test_views_made_by_spark_python_and_rest_are_read_by_spark_and_loaded_over_rest(engines: Engines) -> None:
    ns = "matrix_views"
    write_python(engines, f"{ns}.t", [FIRST + SECOND])
    engines.spark.sql(f"CREATE VIEW {SPARK_CATALOG}.{ns}.by_spark AS "
                      f"SELECT id FROM {SPARK_CATALOG}.{ns}.t WHERE region = 'eu'")
    with engines.lake() as lake:
        lake.create_view(f"{ns}.by_python", "SELECT id, flag FROM t WHERE region = 'us'")
    engines.rest().create_view(
        f"{ns}.by_rest",
        schema=pa.schema([pa.field("id", pa.int64())]),
        view_version=ViewVersion(
            schema_id=0,
            representations=[SQLViewRepresentation(type="sql", sql="SELECT id FROM t WHERE amount IS NULL",
                                                   dialect="spark")],
            default_namespace=[ns],
        ),
    )
    answers = {
        "by_spark": ([(1,), (4,)], ["id"]),
        "by_python": ([(2, None), (5, "e")], []),  # made with no schema: none over REST either
        "by_rest": ([(3,)], ["id"]),
    }
    for view, (rows, columns) in answers.items():
        assert expected(engines.spark_sql(f"SELECT * FROM {SPARK_CATALOG}.{ns}.{view}")) == expected(rows), view
        loaded = engines.rest().load_view(f"{ns}.{view}")
        raw = rest_get(engines.server, f"/v1/namespaces/{ns}/views/{view}")
        assert raw["metadata-location"].endswith(".metadata.json"), view
        assert loaded.metadata.model_dump(mode="json", by_alias=True, exclude_none=True) == raw["metadata"], view
        current = next(v for v in loaded.metadata.versions if v.version_id == loaded.metadata.current_version_id)
        schema = next(s for s in loaded.metadata.schemas if s.schema_id == current.schema_id)
        assert [f.name for f in schema.fields] == columns, view
