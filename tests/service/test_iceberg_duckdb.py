"""The Iceberg REST API with DuckDB 1.4.4 as a real client, offline.

The iceberg extension (and avro, parquet, httpfs, which it needs) comes from
the ``duckdb-ext-*`` PyPI packages: nothing is downloaded at run time
(``autoinstall_known_extensions`` is off). DuckDB writes data files into the
warehouse itself and commits through the server; a multi-statement
transaction goes to ``/v1/transactions/commit`` and must become ONE
lakehouse version.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import duckdb
import duckdb_ext
import pytest

import catalog
from service.testing import ServerProcess

EXTENSIONS = ("httpfs", "avro", "parquet", "iceberg")
TOKEN = "duckdb-test-token-0123456789"


@pytest.fixture(scope="module")
def lake_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("duck-server")
    process = ServerProcess(str(root / "lake"), root / "server.log", token=TOKEN).start()
    try:
        yield process
    finally:
        process.stop()


def connect(server: ServerProcess):  # type: ignore[no-untyped-def]
    extension_dir = os.path.join(list(duckdb_ext.__path__)[0], "extensions")
    con = duckdb.connect(config={"extension_directory": extension_dir, "autoinstall_known_extensions": False})
    for name in EXTENSIONS:
        con.execute(f"LOAD {name}")
    con.execute(f"CREATE SECRET lakekv_token (TYPE iceberg, TOKEN '{server.token}')")
    con.execute(f"ATTACH 'lakekv' AS lake (TYPE iceberg, ENDPOINT '{server.url}', SECRET lakekv_token)")
    return con


def embedded(server: ServerProcess) -> catalog.Lakehouse:
    return catalog.open(server.store_url, poll_interval_s=0, background_maintenance=False)


def test_create_insert_select(lake_server: ServerProcess) -> None:
    con = connect(lake_server)
    con.execute("CREATE SCHEMA lake.shop")
    con.execute("CREATE TABLE lake.shop.orders (id BIGINT, amount DOUBLE, note VARCHAR)")
    con.execute("INSERT INTO lake.shop.orders VALUES (1, 9.5, 'a'), (2, 3.25, NULL)")
    con.execute("INSERT INTO lake.shop.orders SELECT i, i * 1.5, 'gen' FROM range(3, 103) t(i)")
    assert con.execute("SELECT count(*), sum(id) FROM lake.shop.orders").fetchone() == (102, sum(range(1, 103)))
    assert con.execute("SELECT amount, note FROM lake.shop.orders WHERE id = 2").fetchone() == (3.25, None)
    con.close()
    with embedded(lake_server) as lake:  # DuckDB's tables are catalog objects of format iceberg
        assert lake.load_table("shop.orders").format == "iceberg"


def test_begin_commit_into_two_tables_is_one_lakehouse_version(lake_server: ServerProcess) -> None:
    con = connect(lake_server)
    con.execute("CREATE SCHEMA lake.bank")
    con.execute("CREATE TABLE lake.bank.debits (id BIGINT, cents BIGINT)")
    con.execute("CREATE TABLE lake.bank.credits (id BIGINT, cents BIGINT)")
    with embedded(lake_server) as lake:
        before = lake.version
        pointers = {t: lake.load_table(f"bank.{t}").metadata_location for t in ("debits", "credits")}
    con.execute("BEGIN")
    con.execute("INSERT INTO lake.bank.debits VALUES (1, 500)")
    con.execute("INSERT INTO lake.bank.credits VALUES (1, 500)")
    con.execute("COMMIT")
    with embedded(lake_server) as lake:
        assert lake.version == before + 1, "two tables, one transaction: exactly one new lakehouse version"
        for table, old in pointers.items():
            assert lake.load_table(f"bank.{table}").metadata_location != old
        entry = lake.history(limit=1)[0]
        assert entry.version == before + 1
        assert sorted(op["object"] for op in entry.operations) == ["bank.credits", "bank.debits"]
    assert con.execute("SELECT * FROM lake.bank.debits").fetchall() == [(1, 500)]
    assert con.execute("SELECT * FROM lake.bank.credits").fetchall() == [(1, 500)]
    con.close()


def test_rolled_back_transaction_changes_nothing(lake_server: ServerProcess) -> None:
    con = connect(lake_server)
    con.execute("CREATE SCHEMA lake.rb")
    con.execute("CREATE TABLE lake.rb.t (id BIGINT)")
    with embedded(lake_server) as lake:
        before = lake.version
    con.execute("BEGIN")
    con.execute("INSERT INTO lake.rb.t VALUES (1)")
    con.execute("ROLLBACK")
    assert con.execute("SELECT count(*) FROM lake.rb.t").fetchone() == (0,)
    with embedded(lake_server) as lake:
        assert lake.version == before
    con.close()


def test_create_table_as_select(lake_server: ServerProcess) -> None:
    # DuckDB stages the create, writes data files under the new location, then
    # commits: the staged create must leave the location ready for them.
    con = connect(lake_server)
    con.execute("CREATE SCHEMA lake.ctas")
    con.execute("CREATE TABLE lake.ctas.squares AS SELECT i AS n, i * i AS sq FROM range(1, 11) t(i)")
    assert con.execute("SELECT count(*), sum(sq) FROM lake.ctas.squares").fetchone() == (10, 385)
    con.close()
