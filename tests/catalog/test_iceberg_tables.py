"""Iceberg tables (created over the REST API by pyiceberg and DuckDB) through the Python API.

``lakekv serve`` runs on a local lakehouse; pyiceberg and DuckDB create and
write tables through it, and an embedded handle on the same store reads and
writes them with ``Table.scan``/``append``/``overwrite``/``delete`` (through
pyiceberg, catalog/iceberg_tables.py). Every answer is checked row for row
against what the Iceberg clients read.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import duckdb
import duckdb_ext
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.catalog.rest import RestCatalog

import catalog
from catalog import ReadOnlyError
from catalog.iceberg_tables import iceberg_filter
from catalog.schema import field_id
from service.testing import ServerProcess

TOKEN = "iceberg-tables-token-0123456789"
EVENTS = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("iceberg-tables")
    process = ServerProcess(str(root / "lake"), root / "server.log", token=TOKEN).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def rest(server: ServerProcess) -> RestCatalog:
    return RestCatalog("lakekv", uri=server.url, token=TOKEN)


@pytest.fixture
def lake(server: ServerProcess) -> Iterator[catalog.Lakehouse]:
    handle = catalog.open(server.store_url, poll_interval_s=0, background_maintenance=False)
    try:
        yield handle
    finally:
        handle.close()


@pytest.fixture
def ns(request: pytest.FixtureRequest, rest: RestCatalog) -> str:
    name = request.node.name.replace("[", "_").replace("]", "").replace("-", "_")[:60]
    rest.create_namespace(name)
    return name


def duck(server: ServerProcess) -> duckdb.DuckDBPyConnection:
    extension_dir = os.path.join(list(duckdb_ext.__path__)[0], "extensions")
    con = duckdb.connect(config={"extension_directory": extension_dir, "autoinstall_known_extensions": False})
    for name in ("httpfs", "avro", "parquet", "iceberg"):
        con.execute(f"LOAD {name}")
    con.execute(f"CREATE SECRET lakekv_token (TYPE iceberg, TOKEN '{TOKEN}')")
    con.execute(f"ATTACH 'lakekv' AS ice (TYPE iceberg, ENDPOINT '{server.url}', SECRET lakekv_token)")
    return con


def events(rest: RestCatalog, ns: str, name: str = "events") -> str:
    table = rest.create_table(f"{ns}.{name}", schema=EVENTS)
    table.append(pa.table({"id": [1, 2, 3], "name": ["a", "b", None]}, schema=EVENTS))
    table.append(pa.table({"id": [4, 5], "name": ["d", "e"]}, schema=EVENTS))
    return f"{ns}.{name}"


def rows(data: pa.Table) -> list[tuple]:
    return sorted((tuple(r.values()) for r in data.to_pylist()), key=lambda r: [(v is None, v) for v in r])


def test_pyiceberg_table_scans_row_for_row(lake: catalog.Lakehouse, rest: RestCatalog, ns: str) -> None:
    name = events(rest, ns)
    table = lake.load_table(name)
    assert table.format == "iceberg"
    assert [(f.name, f.type, field_id(f)) for f in table.schema] == [("id", pa.int64(), 1), ("name", pa.string(), 2)]
    assert rows(table.scan().to_arrow()) == rows(rest.load_table(name).scan().to_arrow())
    assert table.scan().to_arrow().schema == table.schema
    assert rows(table.scan(pc.field("id") >= 3, columns=["name"]).to_arrow()) == [("d",), ("e",), (None,)]
    assert rows(table.scan(pc.field("name").is_null()).to_arrow()) == [(3, None)]
    # A filter with no Iceberg form still filters exactly (applied to the rows read).
    assert rows(table.scan((pc.field("id") * 2) == pc.scalar(8)).to_arrow()) == [(4, "d")]
    assert table.scan(pc.field("id") > 1, limit=2).to_arrow().num_rows == 2
    assert table.scan().count() == 5
    # The plan prunes by the manifests' statistics: the second append's file only.
    assert [f.rows for f in table.files(pc.field("id") >= 4)] == [2]
    assert sorted(f.rows for f in table.files()) == [2, 3]


def test_duckdb_table_with_position_deletes_scans_row_for_row(
    lake: catalog.Lakehouse, rest: RestCatalog, server: ServerProcess, ns: str
) -> None:
    con = duck(server)
    con.execute(f"CREATE TABLE ice.{ns}.orders (id BIGINT, amount DOUBLE, note VARCHAR)")
    con.execute(f"INSERT INTO ice.{ns}.orders SELECT i, i * 1.5, 'n' || i FROM range(1, 201) t(i)")
    con.execute(f"DELETE FROM ice.{ns}.orders WHERE id % 5 = 0")
    expected = sorted(con.execute(f"SELECT id, amount, note FROM ice.{ns}.orders").fetchall())
    con.close()
    tasks = list(rest.load_table(f"{ns}.orders").scan().plan_files())
    assert any(task.delete_files for task in tasks), "DuckDB's DELETE left position delete files"
    table = lake.load_table(f"{ns}.orders")
    assert rows(table.scan().to_arrow()) == expected
    assert len(expected) == 160 == table.scan().count()
    assert rows(table.scan(pc.field("id") <= 6, columns=["id"]).to_arrow()) == [(1,), (2,), (3,), (4,), (6,)]


def test_append_overwrite_delete_read_back_by_pyiceberg_and_duckdb(
    lake: catalog.Lakehouse, rest: RestCatalog, server: ServerProcess, ns: str
) -> None:
    name = events(rest, ns)
    before = lake.refresh()
    assert lake.load_table(name).append(pa.table({"id": [6], "name": ["f"]})) == before + 1
    assert lake.load_table(name).delete(pc.field("id") == 2) == before + 2
    assert lake.load_table(name).overwrite(pa.table({"id": [9], "name": ["z"]}), pc.field("id") >= 4) == before + 3
    expected = [(1, "a"), (3, None), (9, "z")]
    assert rows(rest.load_table(name).scan().to_arrow()) == expected
    con = duck(server)
    assert sorted(con.execute(f"SELECT id, name FROM ice.{name}").fetchall()) == expected
    con.close()
    assert rows(lake.load_table(name).scan().to_arrow()) == expected
    # Each commit is one lakehouse version and one Iceberg snapshot on top of the clients' own.
    history = [entry.operations[0]["kind"] for entry in lake.history(limit=3, table=name)]
    assert history == ["commit_metadata"] * 3
    assert len(rest.load_table(name).history()) == 2 + 4  # an overwrite by filter is a delete and an append


def test_a_write_refused_changes_nothing(lake: catalog.Lakehouse, rest: RestCatalog, ns: str) -> None:
    name = events(rest, ns)
    table = lake.load_table(name)
    version, pointer = lake.version, table.metadata_location
    with pytest.raises(ValueError, match="no exact Iceberg form"):
        table.delete((pc.field("id") * 2) == pc.scalar(4))
    with pytest.raises(ValueError, match="do not match the filter"):
        table.overwrite(pa.table({"id": [1], "name": ["x"]}), pc.field("id") > 3)
    with pytest.raises(ValueError, match="native parquet tables"):
        table.update_schema()
    with pytest.raises(ValueError):
        table.append(pa.table({"id": ["not an int"], "name": ["x"]}))
    with pytest.raises(ReadOnlyError):
        lake.at(version=version).load_table(name).append(pa.table({"id": [7], "name": ["g"]}))
    lake.refresh()
    assert (lake.version, lake.load_table(name).metadata_location) == (version, pointer)
    assert lake.load_table(name).scan().count() == 5


def test_time_travel_reads_the_pointer_as_it_was(lake: catalog.Lakehouse, rest: RestCatalog, ns: str) -> None:
    name = events(rest, ns)
    first = lake.refresh()
    rest.load_table(name).append(pa.table({"id": [6], "name": ["f"]}, schema=EVENTS))
    lake.load_table(name).delete(pc.field("id") <= 2)
    assert rows(lake.at(version=first).load_table(name).scan().to_arrow()) == [
        (1, "a"), (2, "b"), (3, None), (4, "d"), (5, "e")
    ]
    assert lake.at(version=first + 1).load_table(name).scan().count() == 6
    assert rows(lake.load_table(name).scan(columns=["id"]).to_arrow()) == [(3,), (4,), (5,), (6,)]


def test_a_handle_loaded_before_a_client_commit_appends_on_top_of_it(
    lake: catalog.Lakehouse, rest: RestCatalog, ns: str
) -> None:
    # The handle's pointer is stale when it commits: the swap loses, and the append is redone on the winner's state.
    name = events(rest, ns)
    stale = lake.load_table(name)
    rest.load_table(name).append(pa.table({"id": [100], "name": ["client"]}, schema=EVENTS))
    stale.append(pa.table({"id": [200], "name": ["api"]}))
    ids = sorted(rest.load_table(name).scan().to_arrow().column("id").to_pylist())
    assert ids == [1, 2, 3, 4, 5, 100, 200]


def test_a_handle_deletes_and_overwrites_rows_committed_after_it_was_loaded(
    lake: catalog.Lakehouse, rest: RestCatalog, ns: str
) -> None:
    # A write starts from the table's current pointer, not the handle's: a delete planned on the
    # loaded metadata would find nothing to delete, commit nothing, and lose no race (a silent no-op).
    name = events(rest, ns)
    table = lake.load_table(name)
    table.append(pa.table({"id": [6], "name": ["own"]}))
    table.delete(pc.field("id") == 6)
    rest.load_table(name).append(pa.table({"id": [100], "name": ["client"]}, schema=EVENTS))
    table.delete(pc.field("id") == 100)
    table.overwrite(pa.table({"id": [7], "name": ["new"]}), pc.field("id") >= 5)
    assert rows(lake.load_table(name).scan(columns=["id"]).to_arrow()) == [(1,), (2,), (3,), (4,), (7,)]


def test_appends_in_a_transaction_are_one_version(lake: catalog.Lakehouse, rest: RestCatalog, ns: str) -> None:
    a, b = events(rest, ns, "a"), events(rest, ns, "b")
    before = lake.refresh()
    with lake.transaction() as tx:
        tx.load_table(a).append(pa.table({"id": [10], "name": ["x"]}))
        tx.load_table(b).append(pa.table({"id": [20], "name": ["y"]}))
    assert lake.version == before + 1
    assert lake.load_table(a).scan().count() == lake.load_table(b).scan().count() == 6
    assert 20 in rest.load_table(b).scan().to_arrow().column("id").to_pylist()


def test_registered_table_is_read_only(lake: catalog.Lakehouse, rest: RestCatalog, ns: str) -> None:
    name = events(rest, ns, "source")
    metadata_location = rest.load_table(name).metadata_location
    rest.drop_table(name)  # as if another catalog owned it
    rest.register_table(f"{ns}.mirror", metadata_location)
    mirror = lake.load_table(f"{ns}.mirror")
    assert mirror.scan().count() == 5
    for write in (
        lambda: mirror.append(pa.table({"id": [9], "name": ["z"]})),
        lambda: mirror.delete(pc.field("id") == 1),
        lambda: mirror.overwrite(pa.table({"id": [9], "name": ["z"]})),
    ):
        with pytest.raises(ValueError, match=rf"{ns}.mirror.*registered from another catalog"):
            write()
    assert lake.load_table(f"{ns}.mirror").metadata_location == metadata_location


def test_filters_translate_exactly_or_not_at_all() -> None:
    exact = iceberg_filter((pc.field("a") > 1) & ~(pc.field("b") == "x"), exact=True)
    assert str(exact) == str(iceberg_filter((pc.field("a") > 1) & ~(pc.field("b") == "x"), exact=False))
    unknown = (pc.field("a") * 2) > 1
    assert iceberg_filter(unknown & (pc.field("b") == "x"), exact=True) is None
    # For planning, an AND keeps its known half; an OR or a NOT around an unknown part plans everything.
    assert "EqualTo" in str(iceberg_filter(unknown & (pc.field("b") == "x"), exact=False))
    assert iceberg_filter(unknown | (pc.field("b") == "x"), exact=False) is None
    assert iceberg_filter(~(unknown & (pc.field("b") == "x")), exact=False) is None


RACER = textwrap.dedent(
    """
    import sys
    import pyarrow as pa
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import CommitFailedException

    url, token, name, first, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    rest = RestCatalog("lakekv", uri=url, token=token)
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
    print("ready", flush=True)
    for i in range(first, first + count):
        while True:
            try:
                rest.load_table(name).append(pa.table({"id": [i], "name": ["client"]}, schema=schema))
                break
            except CommitFailedException:
                continue  # lost to the other writer: reload and append again
    print("done", flush=True)
    """
)


def test_pyiceberg_appends_racing_python_api_appends_lose_nothing(
    lake: catalog.Lakehouse, rest: RestCatalog, server: ServerProcess, ns: str
) -> None:
    name = f"{ns}.raced"
    rest.create_table(name, schema=EVENTS)
    racer = subprocess.Popen(
        [sys.executable, "-c", RACER, server.url, TOKEN, name, "1000", "25"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    try:
        assert racer.stdout is not None and racer.stdout.readline().strip() == "ready"
        for i in range(25):
            lake.load_table(name).append(pa.table({"id": [i], "name": ["api"]}))
        assert racer.stdout.readline().strip() == "done"
    finally:
        assert racer.wait() == 0
    expected = list(range(25)) + list(range(1000, 1025))
    assert sorted(lake.load_table(name).scan(columns=["id"]).to_arrow().column("id").to_pylist()) == expected
    assert sorted(rest.load_table(name).scan().to_arrow().column("id").to_pylist()) == expected


def test_a_commit_that_cannot_land_leaves_no_metadata_file(lake: catalog.Lakehouse, rest: RestCatalog, ns: str) -> None:
    # The fault: the table is dropped between the handle's load and its commit, so the pointer swap fails.
    name = events(rest, ns)
    stale = lake.load_table(name)
    metadata_dir = Path(stale.location.removeprefix("file://")) / "metadata"
    before = sorted(p.name for p in metadata_dir.glob("*.metadata.json"))
    lake.drop_table(name)
    with pytest.raises((catalog.errors.NoSuchTableError, catalog.errors.IncompatibleConflictError)):
        stale.append(pa.table({"id": [7], "name": ["g"]}))
    assert sorted(p.name for p in metadata_dir.glob("*.metadata.json")) == before
    assert not lake.table_exists(name)


def test_a_durable_transaction_stages_an_append_until_its_commit(
    lake: catalog.Lakehouse, rest: RestCatalog, ns: str
) -> None:
    name = events(rest, ns)
    tx = lake.begin_durable()
    assert tx.load_table(name).append(pa.table({"id": [6], "name": ["f"]})) is None  # staged
    assert tx.load_table(name).scan().count() == 6
    lake.refresh()
    assert lake.load_table(name).scan().count() == 5 == len(rest.load_table(name).scan().to_arrow())
    tx.commit()
    lake.refresh()
    assert lake.load_table(name).scan().count() == 6 == len(rest.load_table(name).scan().to_arrow())


def test_date_literals_translate_and_timestamps_do_not() -> None:
    import datetime as dt

    assert "DateLiteral(19724)" in str(iceberg_filter(pc.field("day") == pc.scalar(dt.date(2024, 1, 2)), exact=True))
    assert iceberg_filter(pc.field("at") == pc.scalar(dt.datetime(2024, 1, 2)), exact=True) is None


def test_a_write_computed_from_an_iceberg_table_conflicts_with_a_commit_to_it_since(
    lake: catalog.Lakehouse, rest: RestCatalog, ns: str
) -> None:
    name = events(rest, ns)
    read_at = lake.refresh()
    rest.create_table(f"{ns}.copy", schema=EVENTS)
    unchanged = lake.begin_durable()
    unchanged.require_unchanged(name, read_at)
    unchanged.load_table(f"{ns}.copy").append(pa.table({"id": [1], "name": ["a"]}))
    unchanged.commit()  # nothing committed to the table read since: the write lands
    changed = lake.begin_durable()
    changed.require_unchanged(name, lake.refresh())
    changed.load_table(f"{ns}.copy").append(pa.table({"id": [2], "name": ["b"]}))
    rest.load_table(name).append(pa.table({"id": [6], "name": ["f"]}, schema=EVENTS))  # moves the pointer
    with pytest.raises(catalog.errors.RetryableConflictError, match="got a commit since it was read"):
        changed.commit()
    lake.refresh()
    assert lake.load_table(f"{ns}.copy").scan(columns=["id"]).to_arrow().column("id").to_pylist() == [1]
