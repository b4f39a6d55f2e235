"""Second-process writers for test_engine_concurrency.py (a helper, no tests).

Usage:
    python engine_race_workers.py pyiceberg-append SERVER_URL TOKEN TABLE ROUNDS
    python engine_race_workers.py duckdb-transaction SERVER_URL TOKEN TABLE_X TABLE_Y ROUNDS

The worker connects, prints ``ready``, waits for a line on stdin (the test's "go", sent
just before its own writes start, so the two really overlap), then runs its rounds. A
round that loses a commit race (pyiceberg's ``CommitFailedException``, DuckDB's error
quoting the server's 409) changed nothing, so the worker reloads and redoes it. Every
committed round is printed as ``{"op": ...}`` (its op label, on its rows), every lost
attempt as ``{"lost": <error type>}``; any other error ends the worker with its traceback.
"""

from __future__ import annotations

import json
import os
import sys

import pyarrow as pa

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("op", pa.string())])


def say(**entry: object) -> None:
    print(json.dumps(entry), flush=True)


def wait_for_go() -> None:
    say(ready=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("no go from the test")


def pyiceberg_append(url: str, token: str, name: str, rounds: int) -> None:
    """Round n appends row (1000 + n, 0, 'a-n') with pyiceberg."""
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import CommitFailedException

    rest = RestCatalog("lakekv", uri=url, token=token)
    rest.load_table(name)
    wait_for_go()
    for n in range(rounds):
        rows = pa.table({"k": [1000 + n], "v": [0], "op": [f"a-{n}"]}, schema=SCHEMA)
        while True:
            try:
                rest.load_table(name).append(rows)
                break
            except CommitFailedException:
                say(lost="CommitFailedException")
        say(op=f"a-{n}")


def duckdb_transaction(url: str, token: str, table_x: str, table_y: str, rounds: int) -> None:
    """Round n inserts row (3000 + n, 0, 'd-n') into both tables in ONE DuckDB transaction
    (one ``/v1/transactions/commit``)."""
    import duckdb
    import duckdb_ext

    extension_dir = os.path.join(list(duckdb_ext.__path__)[0], "extensions")

    def connect() -> duckdb.DuckDBPyConnection:
        con = duckdb.connect(config={"extension_directory": extension_dir, "autoinstall_known_extensions": False})
        for extension in ("httpfs", "avro", "parquet", "iceberg"):
            con.execute(f"LOAD {extension}")
        con.execute(f"CREATE SECRET lakekv_token (TYPE iceberg, TOKEN '{token}')")
        con.execute(f"ATTACH 'lakekv' AS lake (TYPE iceberg, ENDPOINT '{url}', SECRET lakekv_token)")
        return con

    connect().close()
    wait_for_go()
    for n in range(rounds):
        while True:
            con = connect()  # fresh metadata for every attempt
            try:
                con.execute("BEGIN")
                for name in (table_x, table_y):
                    con.execute(f"INSERT INTO lake.{name} VALUES ({3000 + n}, 0, 'd-{n}')")
                con.execute("COMMIT")
                break
            except duckdb.Error as exc:
                # DuckDB quotes the server's answer: a lost race is a 409 CommitFailedException.
                if "CommitFailedException" not in str(exc) or "409" not in str(exc):
                    raise
                say(lost="CommitFailedException")
            finally:
                con.close()
        say(op=f"d-{n}")


def main(argv: list[str]) -> None:
    kind, url, token, *rest = argv
    if kind == "pyiceberg-append":
        pyiceberg_append(url, token, rest[0], int(rest[1]))
    elif kind == "duckdb-transaction":
        duckdb_transaction(url, token, rest[0], rest[1], int(rest[2]))
    else:
        raise SystemExit(f"unknown worker {kind!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
