"""Native lakekv tables over the Iceberg REST API: read and written by real Iceberg clients.

A native table (made with the Python API) is served with the Iceberg
metadata the lakehouse derives for it; pyiceberg, Polars and DuckDB read it
and commit to it through ``lakekv serve``, and every commit is translated
into native catalog operations: the Python API then sees exactly the rows
the Iceberg client wrote. What a native table cannot honour (delete files,
branches, spec evolution...) is refused with a 4xx naming it, and leaves the
table unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import duckdb
import duckdb_ext
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.noop import NoopCatalog
from pyiceberg.exceptions import BadRequestError, CommitFailedException, ValidationException
from pyiceberg.io import load_file_io
from pyiceberg.expressions import EqualTo
from pyiceberg.manifest import DataFile as IcebergDataFile
from pyiceberg.manifest import DataFileContent, FileFormat
from pyiceberg.table import CommitTableRequest, CommitTableResponse, TableIdentifier
from pyiceberg.table import Table as IcebergTable
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, StringType
from http_client import call_json

import catalog
import kvstore
from catalog import Lakehouse
from kvstore.errors import StoreError
from kvstore.objstore.faulty import FaultyStore
from kvstore.objstore.local import LocalStore
from service.errors import ApiError
from service.iceberg import tables
from service.iceberg.warehouse import Warehouse
from service.testing import ServerProcess

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string()), pa.field("amount", pa.float64())])
EXTENSIONS = ("httpfs", "avro", "parquet", "iceberg")


def embedded(server: ServerProcess) -> catalog.Lakehouse:
    return catalog.open(server.store_url, poll_interval_s=0, background_maintenance=False)


def rows(table: Any) -> list[dict[str, Any]]:
    """Every row of a pyarrow-convertible table, in one order (by every column)."""
    return sorted(table.to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))


def native_rows(server: ServerProcess, name: str) -> list[dict[str, Any]]:
    with embedded(server) as lake:
        return rows(lake.load_table(name).scan().to_arrow())


def make_native(server: ServerProcess, name: str, data: dict[str, list[Any]] | None = None,
                partition_by: tuple[str, ...] = ("region",)) -> None:
    """A native partitioned table made with the Python API, with ``data`` appended."""
    with embedded(server) as lake:
        namespace = name.rsplit(".", 1)[0]
        if not lake.namespace_exists(namespace):
            lake.create_namespace(namespace)
        table = lake.create_table(name, schema=SCHEMA, partition_by=list(partition_by))
        if data is not None:
            table.append(pa.table(data, schema=SCHEMA))


def batch(ids: list[int], region: str, amount: float = 1.0) -> pa.Table:
    return pa.table({"id": ids, "region": [region] * len(ids), "amount": [amount] * len(ids)}, schema=SCHEMA)


def test_pyiceberg_reads_a_native_table_row_for_row(rest: RestCatalog, lake_server: ServerProcess) -> None:
    make_native(lake_server, "read.t", {"id": [1, 2, 3, 4], "region": ["eu", "us", "eu", None],
                                        "amount": [1.5, 2.5, None, 4.0]})
    table = rest.load_table("read.t")
    assert table.metadata_location  # a location any engine can read without the server
    assert [f.name for f in table.schema().fields] == ["id", "region", "amount"]
    assert [f.name for f in table.spec().fields] == ["region"]
    assert rows(table.scan().to_arrow()) == native_rows(lake_server, "read.t")
    assert rows(table.scan(row_filter=EqualTo("region", "eu")).to_arrow()) == rows(
        pa.table({"id": [1, 3], "region": ["eu", "eu"], "amount": [1.5, None]}, schema=SCHEMA)
    )
    assert rest.table_exists("read.t")


def test_pyiceberg_append_overwrite_delete_are_native_operations(rest: RestCatalog, lake_server: ServerProcess) -> None:
    make_native(lake_server, "write.t", {"id": [1, 2], "region": ["eu", "us"], "amount": [1.0, 2.0]})
    expected = rows(pa.table({"id": [1, 2], "region": ["eu", "us"], "amount": [1.0, 2.0]}, schema=SCHEMA))

    rest.load_table("write.t").append(batch([3, 4], "eu", 3.0))
    expected = rows(pa.concat_tables([pa.Table.from_pylist(expected, schema=SCHEMA), batch([3, 4], "eu", 3.0)]))
    assert native_rows(lake_server, "write.t") == expected

    # A copy-on-write delete: the file holding id 3 and 4 is rewritten without 3.
    rest.load_table("write.t").delete(EqualTo("id", 3))
    expected = [r for r in expected if r["id"] != 3]
    assert native_rows(lake_server, "write.t") == expected

    rest.load_table("write.t").overwrite(batch([9], "eu", 9.0), overwrite_filter=EqualTo("region", "eu"))
    expected = [r for r in expected if r["region"] != "eu"] + batch([9], "eu", 9.0).to_pylist()
    assert native_rows(lake_server, "write.t") == rows(pa.Table.from_pylist(expected, schema=SCHEMA))

    # A delete of whole files (the 'us' partition): only removals, no file written.
    rest.load_table("write.t").delete(EqualTo("region", "us"))
    expected = [r for r in expected if r["region"] != "us"]
    assert native_rows(lake_server, "write.t") == rows(pa.Table.from_pylist(expected, schema=SCHEMA))

    with embedded(lake_server) as lake:
        kinds = [[op["kind"] for op in entry.operations] for entry in lake.history(limit=4, table="write.t")]
        files = lake.load_table("write.t").files()
    assert kinds == [["overwrite"], ["overwrite"], ["overwrite"], ["append"]]
    assert all(f.crc32c is not None and f.footer_crc32c is not None for f in files)
    # And pyiceberg reads back what the Python API sees.
    assert rows(rest.load_table("write.t").scan().to_arrow()) == native_rows(lake_server, "write.t")


def test_polars_writes_and_scans_a_native_table(
    rest: RestCatalog, lake_server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POLARS_ICEBERG_PLANNER", "pyiceberg")  # the planner that is installed
    make_native(lake_server, "polars.t", {"id": [1], "region": ["eu"], "amount": [1.0]})
    frame = pl.DataFrame({"id": [2, 3], "region": ["us", "eu"], "amount": [2.0, 3.0]})
    frame.write_iceberg(rest.load_table("polars.t"), mode="append")
    assert native_rows(lake_server, "polars.t") == rows(
        pa.table({"id": [1, 2, 3], "region": ["eu", "us", "eu"], "amount": [1.0, 2.0, 3.0]}, schema=SCHEMA)
    )
    assert rows(pl.scan_iceberg(rest.load_table("polars.t")).collect().to_arrow()) == native_rows(lake_server, "polars.t")
    pl.DataFrame({"id": [7], "region": ["us"], "amount": [7.0]}).write_iceberg(rest.load_table("polars.t"), mode="overwrite")
    assert native_rows(lake_server, "polars.t") == rows(pa.table({"id": [7], "region": ["us"], "amount": [7.0]}, schema=SCHEMA))


def duckdb_connect(server: ServerProcess):  # type: ignore[no-untyped-def]
    extension_dir = os.path.join(list(duckdb_ext.__path__)[0], "extensions")
    con = duckdb.connect(config={"extension_directory": extension_dir, "autoinstall_known_extensions": False})
    for name in EXTENSIONS:
        con.execute(f"LOAD {name}")
    con.execute("CREATE SECRET lakekv_token (TYPE iceberg, TOKEN 'unused')")
    con.execute(f"ATTACH 'lakekv' AS lake (TYPE iceberg, ENDPOINT '{server.url}', SECRET lakekv_token)")
    return con


def test_duckdb_selects_and_inserts_into_a_native_table(lake_server: ServerProcess) -> None:
    make_native(lake_server, "duck.parts", {"id": [1, 2, 3], "region": ["eu", "us", "eu"], "amount": [1.0, 2.0, 3.0]})
    # DuckDB 1.4 does not INSERT into partitioned Iceberg tables ("not supported yet"): an unpartitioned one.
    make_native(lake_server, "duck.t", {"id": [1, 2], "region": ["eu", "us"], "amount": [1.0, 2.0]}, partition_by=())
    con = duckdb_connect(lake_server)
    try:
        assert con.execute("SELECT id, amount FROM lake.duck.parts WHERE region = 'eu' ORDER BY id").fetchall() == [
            (1, 1.0), (3, 3.0)
        ]
        assert con.execute("SELECT id, region, amount FROM lake.duck.t ORDER BY id").fetchall() == [
            (1, "eu", 1.0), (2, "us", 2.0)
        ]
        con.execute("INSERT INTO lake.duck.t VALUES (3, 'eu', 3.5)")
        assert con.execute("SELECT count(*), sum(id) FROM lake.duck.t").fetchone() == (3, 6)
    finally:
        con.close()
    assert native_rows(lake_server, "duck.t") == rows(
        pa.table({"id": [1, 2, 3], "region": ["eu", "us", "eu"], "amount": [1.0, 2.0, 3.5]}, schema=SCHEMA)
    )


def test_duckdb_delete_writes_delete_files_and_is_refused(lake_server: ServerProcess) -> None:
    make_native(lake_server, "duckdel.t", {"id": [1, 2], "region": ["eu", "us"], "amount": [1.0, 2.0]}, partition_by=())
    before = native_rows(lake_server, "duckdel.t")
    with embedded(lake_server) as lake:
        version = lake.version
    con = duckdb_connect(lake_server)
    try:
        with pytest.raises(duckdb.Error, match="delete files"):
            con.execute("DELETE FROM lake.duckdel.t WHERE id = 1")
        with pytest.raises(duckdb.Error, match="delete files"):
            con.execute("UPDATE lake.duckdel.t SET amount = 0 WHERE id = 2")
    finally:
        con.close()
    assert native_rows(lake_server, "duckdel.t") == before
    with embedded(lake_server) as lake:
        assert lake.version == version


def test_schema_evolution_through_pyiceberg(rest: RestCatalog, lake_server: ServerProcess) -> None:
    make_native(lake_server, "evolve.t", {"id": [1], "region": ["eu"], "amount": [1.0]})
    table = rest.load_table("evolve.t")
    with table.update_schema() as update:
        update.add_column("qty", LongType())
        update.rename_column("amount", "price")
    with embedded(lake_server) as lake:
        native = lake.load_table("evolve.t")
        assert native.schema.names == ["id", "region", "price", "qty"]
        assert native.schema.field("qty").type == pa.int64()
        assert native.scan().to_arrow().to_pylist() == [{"id": 1, "region": "eu", "price": 1.0, "qty": None}]
    # The client reloads the evolved table and writes with the new schema.
    table = rest.load_table("evolve.t")
    assert [f.name for f in table.schema().fields] == ["id", "region", "price", "qty"]
    table.append(pa.table({"id": [2], "region": ["us"], "price": [2.0], "qty": [7]},
                          schema=table.schema().as_arrow()))
    with embedded(lake_server) as lake:
        got = sorted(lake.load_table("evolve.t").scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert got == [{"id": 1, "region": "eu", "price": 1.0, "qty": None}, {"id": 2, "region": "us", "price": 2.0, "qty": 7}]
    with table.update_schema() as update:
        update.delete_column("qty")
    with embedded(lake_server) as lake:
        assert lake.load_table("evolve.t").schema.names == ["id", "region", "price"]
    # A column and rows using it in ONE commit: one lakehouse version, schema change then append.
    table = rest.load_table("evolve.t")
    with embedded(lake_server) as lake:
        before = lake.version
    with table.transaction() as tx:
        with tx.update_schema() as update:
            update.add_column("note", StringType())
        tx.append(pa.table({"id": [3], "region": ["eu"], "price": [3.0], "note": ["new"]},
                           schema=tx.table_metadata.schema().as_arrow()))
    with embedded(lake_server) as lake:
        assert lake.version == before + 1
        got = sorted(lake.load_table("evolve.t").scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [r["note"] for r in got] == [None, None, "new"]


def test_properties_set_and_removed(rest: RestCatalog, lake_server: ServerProcess) -> None:
    make_native(lake_server, "props.t")
    table = rest.load_table("props.t")
    with table.transaction() as tx:
        tx.set_properties(owner="data-team", tier="gold")
    with rest.load_table("props.t").transaction() as tx:
        tx.remove_properties("tier")
    with embedded(lake_server) as lake:
        properties = lake.load_table("props.t").properties
    assert properties.get("owner") == "data-team" and "tier" not in properties


@pytest.mark.parametrize("requirement", [
    {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": "stale"},
    {"type": "assert-current-schema-id", "current-schema-id": 12345},
    {"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"},
    {"type": "assert-create"},
])
def test_a_failed_requirement_is_409_and_changes_nothing(
    rest: RestCatalog, lake_server: ServerProcess, requirement: dict[str, Any]
) -> None:
    name = f"req.t{requirement['type'].replace('-', '_')}"
    make_native(lake_server, name, {"id": [1], "region": ["eu"], "amount": [1.0]})
    stale = rest.load_table(name).metadata.current_snapshot_id
    with embedded(lake_server) as lake:
        lake.load_table(name).append(batch([2], "us"))  # main moves on
        version = lake.version
    if requirement.get("snapshot-id") == "stale":
        requirement = {**requirement, "snapshot-id": stale}
    # pyiceberg retries a 409 on its own (rebasing its append): the raw request shows the answer.
    status, body = call_json(lake_server, "POST", f"/v1/namespaces/req/tables/{name.split('.')[1]}", {
        "requirements": [requirement], "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
    })
    assert (status, body["error"]["type"]) == (409, "CommitFailedException"), body
    assert [r["id"] for r in native_rows(lake_server, name)] == [1, 2]
    with embedded(lake_server) as lake:
        assert lake.version == version
        assert "k" not in lake.load_table(name).properties


@pytest.mark.parametrize("change,feature", [
    (lambda t: t.manage_snapshots().create_branch(t.current_snapshot().snapshot_id, "dev").commit(), "branch or tag"),
    (lambda t: t.manage_snapshots().create_tag(t.current_snapshot().snapshot_id, "v1").commit(), "branch or tag"),
    (lambda t: t.update_spec().add_identity("id").commit(), "partition spec"),
    (lambda t: t.update_sort_order().asc("id", IdentityTransform()).commit(), "sort order"),
    (lambda t: t.transaction().set_properties({"write.data.path": t.location() + "/elsewhere"}).commit_transaction(),
     "write.data.path"),
])
def test_what_a_native_table_cannot_honour_is_refused_by_name(
    rest: RestCatalog, lake_server: ServerProcess, change: Any, feature: str, request: pytest.FixtureRequest
) -> None:
    name = f"refuse.t{request.node.callspec.indices['change']}"
    make_native(lake_server, name, {"id": [1], "region": ["eu"], "amount": [1.0]})
    with embedded(lake_server) as lake:
        version = lake.version
    with pytest.raises(BadRequestError, match=feature):
        change(rest.load_table(name))
    with embedded(lake_server) as lake:
        assert lake.version == version


def _raw_snapshot(metadata: Any, manifest_list: str) -> list[dict[str, Any]]:
    return [
        {"action": "add-snapshot", "snapshot": {
            "snapshot-id": 4242, "parent-snapshot-id": metadata.current_snapshot_id,
            "sequence-number": metadata.last_sequence_number + 1, "timestamp-ms": 1,
            "manifest-list": manifest_list, "summary": {"operation": "append"}, "schema-id": metadata.current_schema_id,
        }},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 4242},
    ]


@pytest.mark.parametrize("updates,feature", [
    (lambda m: [{"action": "set-location", "location": m.location + "-moved"}], "set-location"),
    (lambda m: [{"action": "remove-snapshots", "snapshot-ids": [m.current_snapshot_id]}], "snapshot expiry"),
    (lambda m: [{"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                 "snapshot-id": m.current_snapshot_id, "max-ref-age-ms": 1000}], "snapshot retention"),
    (lambda m: [{"action": "set-properties", "updates": {"write.py-location-provider.impl": "x.Y"}}],
     "write.py-location-provider.impl"),
    (lambda m: _raw_snapshot(m, "file:///tmp/elsewhere/snap.avro"), "outside the table's location"),
    (lambda m: [{"action": "remove-properties", "removals": [next(k for k in m.properties if k.startswith("lakekv."))]}],
     "changing the property lakekv.derived."),
])
def test_raw_commits_a_native_table_cannot_honour_are_refused(
    rest: RestCatalog, lake_server: ServerProcess, updates: Any, feature: str, request: pytest.FixtureRequest
) -> None:
    name = f"rawrefuse.t{request.node.callspec.indices['updates']}"
    make_native(lake_server, name, {"id": [1], "region": ["eu"], "amount": [1.0]})
    metadata = rest.load_table(name).metadata
    with embedded(lake_server) as lake:
        version = lake.version
    status, body = call_json(lake_server, "POST", f"/v1/namespaces/rawrefuse/tables/{name.split('.')[1]}",
                             {"requirements": [], "updates": updates(metadata)})
    assert status == 400 and feature in body["error"]["message"], body
    with embedded(lake_server) as lake:
        assert lake.version == version


def append_files(table: Any, files: list[tuple[str, int, int]], region: str) -> None:
    """Commit an append of existing data files ``(uri, rows, bytes)`` through pyiceberg, as a client that wrote them."""
    with table.transaction() as tx:
        with tx.update_snapshot().fast_append() as append:
            for uri, count, size in files:
                data_file = IcebergDataFile.from_args(
                    content=DataFileContent.DATA, file_path=uri, file_format=FileFormat.PARQUET,
                    partition=Record(region), record_count=count, file_size_in_bytes=size,
                )
                data_file.spec_id = table.spec().spec_id
                append.append_data_file(data_file)


def test_added_files_are_checked_and_committed_as_copies(rest: RestCatalog, lake_server: ServerProcess) -> None:
    make_native(lake_server, "files.t", {"id": [1, 2], "region": ["eu", "eu"], "amount": [1.0, 2.0]})
    with embedded(lake_server) as lake:
        table = lake.load_table("files.t")
        (old,) = table.files()
        uri = f"{lake.url.rstrip('/')}/{old.path}"
        table.overwrite(batch([3], "eu"))  # removes the old file: it waits for GC
        version, location = lake.version, table.location
        live = [f.path for f in lake.load_table("files.t").files()]
    client = rest.load_table("files.t")
    for rows_said, size_said in ((old.rows + 1, old.size), (old.rows, old.size - 1)):
        with pytest.raises(BadRequestError, match="its manifest entry says"):
            append_files(client, [(uri, rows_said, size_said)], "eu")
    with embedded(lake_server) as lake:
        assert lake.version == version
        assert [f.path for f in lake.load_table("files.t").files()] == live
    # Adding the removed file back commits a copy the lakehouse owns: GC, which
    # will delete the removed file, can never take a live one.
    append_files(rest.load_table("files.t"), [(uri, old.rows, old.size)], "eu")
    assert sorted(r["id"] for r in native_rows(lake_server, "files.t")) == [1, 2, 3]
    with embedded(lake_server) as lake:
        paths = [f.path for f in lake.load_table("files.t").files()]
    assert old.path not in paths and all(p.rsplit("/", 1)[0] == location for p in paths)


def test_a_missing_or_damaged_data_file_is_refused_and_changes_nothing(
    rest: RestCatalog, lake_server: ServerProcess
) -> None:
    make_native(lake_server, "damaged.t", {"id": [1], "region": ["eu"], "amount": [1.0]})
    with embedded(lake_server) as lake:
        location = f"{lake.url.rstrip('/')}/{lake.load_table('damaged.t').location}"
        lake.objects.put(f"{lake.load_table('damaged.t').location}/data/garbage.parquet", b"not parquet at all")
        sink = pa.BufferOutputStream()
        pq.write_table(batch([5], "eu"), sink)  # no field ids: only a name mapping could read it
        unnamed = sink.getvalue().to_pybytes()
        lake.objects.put(f"{lake.load_table('damaged.t').location}/data/unnamed.parquet", unnamed)
        version = lake.version
    with pytest.raises(BadRequestError, match="does not exist"):
        append_files(rest.load_table("damaged.t"), [(f"{location}/data/never-written.parquet", 1, 100)], "eu")
    with pytest.raises(BadRequestError, match="(?i)not a parquet file"):
        append_files(rest.load_table("damaged.t"), [(f"{location}/data/garbage.parquet", 1, 18)], "eu")
    with pytest.raises(BadRequestError, match="has no Parquet field id"):
        append_files(rest.load_table("damaged.t"), [(f"{location}/data/unnamed.parquet", 1, len(unnamed))], "eu")
    with embedded(lake_server) as lake:
        assert lake.version == version
    assert [r["id"] for r in native_rows(lake_server, "damaged.t")] == [1]


def test_type_widening_through_pyiceberg(rest: RestCatalog, lake_server: ServerProcess) -> None:
    with embedded(lake_server) as lake:
        lake.create_namespace("widen")
        lake.create_table("widen.t", schema=pa.schema([pa.field("n", pa.int32())])).append(
            pa.table({"n": pa.array([1, 2], pa.int32())})
        )
    with rest.load_table("widen.t").update_schema() as update:
        update.update_column("n", LongType())
    with embedded(lake_server) as lake:
        table = lake.load_table("widen.t")
        assert table.schema.field("n").type == pa.int64()
        assert sorted(table.scan().to_arrow().column("n").to_pylist()) == [1, 2]


def test_register_does_not_replace_a_native_table(rest: RestCatalog, lake_server: ServerProcess) -> None:
    make_native(lake_server, "reg.native", {"id": [1], "region": ["eu"], "amount": [1.0]})
    iceberg = rest.create_table("reg.ice", schema=SCHEMA)
    status, body = call_json(lake_server, "POST", "/v1/namespaces/reg/register", {
        "name": "native", "metadata-location": iceberg.metadata_location, "overwrite": True,
    })
    assert status == 400 and "replaced by a registered table" in body["error"]["message"], body
    with embedded(lake_server) as lake:
        assert lake.load_table("reg.native").format == "parquet"


def test_duckdb_transaction_over_two_native_tables_is_one_version(lake_server: ServerProcess) -> None:
    make_native(lake_server, "bank.debits", {"id": [0], "region": ["eu"], "amount": [0.0]}, partition_by=())
    make_native(lake_server, "bank.credits", {"id": [0], "region": ["eu"], "amount": [0.0]}, partition_by=())
    with embedded(lake_server) as lake:
        before = lake.version
    con = duckdb_connect(lake_server)
    try:
        con.execute("BEGIN")
        con.execute("INSERT INTO lake.bank.debits VALUES (1, 'eu', 5.0)")
        con.execute("INSERT INTO lake.bank.credits VALUES (1, 'eu', 5.0)")
        con.execute("COMMIT")
    finally:
        con.close()
    with embedded(lake_server) as lake:
        assert lake.version == before + 1, "two tables, one transaction: exactly one new lakehouse version"
        entry = lake.history(limit=1)[0]
        assert sorted((op["object"], op["kind"]) for op in entry.operations) == [
            ("bank.credits", "append"), ("bank.debits", "append")
        ]
        for name in ("bank.debits", "bank.credits"):
            assert sorted(r["id"] for r in lake.load_table(name).scan().to_arrow().to_pylist()) == [0, 1]


def test_a_transaction_with_one_failed_requirement_changes_no_table(
    rest: RestCatalog, lake_server: ServerProcess
) -> None:
    make_native(lake_server, "atomic.a", {"id": [1], "region": ["eu"], "amount": [1.0]})
    make_native(lake_server, "atomic.b", {"id": [1], "region": ["eu"], "amount": [1.0]})
    uuid_a = str(rest.load_table("atomic.a").metadata.table_uuid)
    with embedded(lake_server) as lake:
        version = lake.version

    def change(name: str, uuid: str) -> dict[str, Any]:
        return {
            "identifier": {"namespace": ["atomic"], "name": name},
            "requirements": [{"type": "assert-table-uuid", "uuid": uuid}],
            "updates": [{"action": "set-properties", "updates": {"batch": "1"}}],
        }

    status, body = call_json(lake_server, "POST", "/v1/transactions/commit", {"table-changes": [
        change("a", uuid_a), change("b", "00000000-0000-0000-0000-000000000000"),
    ]})
    assert (status, body["error"]["type"]) == (409, "CommitFailedException"), body
    with embedded(lake_server) as lake:
        assert lake.version == version
        assert "batch" not in lake.load_table("atomic.a").properties
    uuid_b = str(rest.load_table("atomic.b").metadata.table_uuid)
    status, body = call_json(lake_server, "POST", "/v1/transactions/commit", {"table-changes": [
        change("a", uuid_a), change("b", uuid_b),
    ]})
    assert status == 204, body
    with embedded(lake_server) as lake:
        assert lake.version == version + 1
        assert all(lake.load_table(f"atomic.{t}").properties["batch"] == "1" for t in ("a", "b"))


def test_duckdb_transaction_over_a_native_and_an_iceberg_table_is_one_version(lake_server: ServerProcess) -> None:
    make_native(lake_server, "mixed.native", {"id": [0], "region": ["eu"], "amount": [0.0]}, partition_by=())
    con = duckdb_connect(lake_server)
    try:
        con.execute("CREATE TABLE lake.mixed.ice (id BIGINT)")
        with embedded(lake_server) as lake:
            before = lake.version
            pointer = lake.load_table("mixed.ice").metadata_location
        con.execute("BEGIN")
        con.execute("INSERT INTO lake.mixed.native VALUES (1, 'us', 2.0)")
        con.execute("INSERT INTO lake.mixed.ice VALUES (7)")
        con.execute("COMMIT")
        assert con.execute("SELECT * FROM lake.mixed.ice").fetchall() == [(7,)]
    finally:
        con.close()
    with embedded(lake_server) as lake:
        assert lake.version == before + 1
        assert sorted((op["object"], op["kind"]) for op in lake.history(limit=1)[0].operations) == [
            ("mixed.ice", "commit_metadata"), ("mixed.native", "append")
        ]
        assert lake.load_table("mixed.ice").metadata_location != pointer
        assert sorted(r["id"] for r in lake.load_table("mixed.native").scan().to_arrow().to_pylist()) == [0, 1]


# -- concurrency: pyiceberg appends racing Python-API appends and overwrites -----------

ICEBERG_WRITER = textwrap.dedent("""
    import json, sys
    import pyarrow as pa
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import CommitFailedException, ValidationException
    url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rest = RestCatalog("lakekv", uri=url)
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string()), pa.field("amount", pa.float64())])
    for i in range(count):
        rows = pa.table({"id": [1000 + i], "region": ["eu"], "amount": [float(i)]}, schema=schema)
        while True:
            try:
                rest.load_table(name).append(rows)
                break
            except (CommitFailedException, ValidationException):
                continue  # lost to a concurrent commit: nothing of ours landed; reload and redo
        print(json.dumps({"op": "append", "id": 1000 + i}), flush=True)
""")

NATIVE_WRITER = textwrap.dedent("""
    import json, sys
    import pyarrow as pa
    import pyarrow.compute as pc
    import catalog
    from catalog.errors import RetryableConflictError
    url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string()), pa.field("amount", pa.float64())])
    lake = catalog.open(url, poll_interval_s=0, background_maintenance=False)
    for j in range(count):
        while True:
            try:
                lake.refresh()
                table = lake.load_table(name)
                if j % 2:
                    # Replace every 'eu' row, the iceberg writer's ones included.
                    table.overwrite(pa.table({"id": [2000 + j], "region": ["eu"], "amount": [0.0]}, schema=schema),
                                    filter=pc.field("region") == "eu")
                    print(json.dumps({"op": "overwrite", "id": 2000 + j}), flush=True)
                else:
                    table.append(pa.table({"id": [2000 + j], "region": ["us"], "amount": [0.0]}, schema=schema))
                    print(json.dumps({"op": "append", "id": 2000 + j}), flush=True)
                break
            except RetryableConflictError:
                continue
    lake.close()
""")


ROUNDS = 12  # operations per writer


def _explain(before: set[int], after: set[int], pending: dict[int, str], regions: dict[int, str]) -> int:
    """The one logged operation that turns ``before`` into ``after`` (its id), or fail."""
    for op_id, op in pending.items():
        if op == "append" and after == before | {op_id}:
            return op_id
        if op == "overwrite" and after == {i for i in before if regions[i] != "eu"} | {op_id}:
            return op_id
    raise AssertionError(f"no single logged operation turns {sorted(before)} into {sorted(after)}")


def test_pyiceberg_appends_race_python_api_writes(lake_server: ServerProcess, tmp_path: Path) -> None:
    name = "race.t"
    make_native(lake_server, name)
    with embedded(lake_server) as lake:
        start = lake.version
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writers = [
        subprocess.Popen([sys.executable, "-c", ICEBERG_WRITER, lake_server.url, name, str(ROUNDS)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env),
        subprocess.Popen([sys.executable, "-c", NATIVE_WRITER, lake_server.store_url, name, str(ROUNDS)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env),
    ]
    logged: dict[int, str] = {}
    for writer in writers:
        out, err = writer.communicate(timeout=600)
        assert writer.returncode == 0, err.decode()[-3000:]
        for line in out.decode().splitlines():
            entry = json.loads(line)
            logged[entry["id"]] = entry["op"]
    assert len(logged) == 2 * ROUNDS
    regions = {i: ("us" if 2000 <= i and (i - 2000) % 2 == 0 else "eu") for i in logged}
    # Replay the table's versions: each must be exactly one logged operation applied
    # to the one before (a serial order), and every logged operation must appear once.
    pending = dict(logged)
    state: set[int] = set()
    with embedded(lake_server) as lake:
        versions = sorted(e.version for e in lake.history(limit=None, table=name) if e.version > start)
        for version in versions:
            after_rows = lake.at(version=version).load_table(name).scan().to_arrow().column("id").to_pylist()
            assert len(after_rows) == len(set(after_rows)), f"duplicated rows at version {version}"
            after = set(after_rows)
            pending.pop(_explain(state, after, pending, regions))
            state = after
        assert state == set(lake.load_table(name).scan().to_arrow().column("id").to_pylist())
    assert not pending, f"logged as committed but never seen: {pending}"


DUCKDB_WRITER = textwrap.dedent("""
    import json, os, sys
    import duckdb, duckdb_ext
    url, count = sys.argv[1], int(sys.argv[2])
    extension_dir = os.path.join(list(duckdb_ext.__path__)[0], "extensions")

    def connect():
        con = duckdb.connect(config={"extension_directory": extension_dir, "autoinstall_known_extensions": False})
        for name in ("httpfs", "avro", "parquet", "iceberg"):
            con.execute(f"LOAD {name}")
        con.execute("CREATE SECRET lakekv_token (TYPE iceberg, TOKEN 'unused')")
        con.execute(f"ATTACH 'lakekv' AS lake (TYPE iceberg, ENDPOINT '{url}', SECRET lakekv_token)")
        return con

    for i in range(count):
        while True:
            con = connect()  # fresh metadata for every attempt
            try:
                con.execute("BEGIN")
                con.execute(f"INSERT INTO lake.duckrace.x VALUES ({3000 + i}, 'eu', 0.0)")
                con.execute(f"INSERT INTO lake.duckrace.y VALUES ({3000 + i}, 'eu', 0.0)")
                con.execute("COMMIT")
                break
            except duckdb.Error as exc:
                if "CommitFailedException" not in str(exc) and "409" not in str(exc):
                    raise
            finally:
                con.close()
        print(json.dumps({"op": "both", "id": 3000 + i}), flush=True)
""")


def test_duckdb_transactions_over_two_tables_race_python_api_writes(lake_server: ServerProcess) -> None:
    make_native(lake_server, "duckrace.x", partition_by=())
    make_native(lake_server, "duckrace.y", partition_by=())
    with embedded(lake_server) as lake:
        start = lake.version
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    rounds = ROUNDS // 2
    writers = [
        subprocess.Popen([sys.executable, "-c", DUCKDB_WRITER, lake_server.url, str(rounds)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env),
        subprocess.Popen([sys.executable, "-c", NATIVE_WRITER, lake_server.store_url, "duckrace.x", str(rounds)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env),
    ]
    logged: dict[int, str] = {}
    for writer in writers:
        out, err = writer.communicate(timeout=600)
        assert writer.returncode == 0, err.decode()[-3000:]
        for line in out.decode().splitlines():
            entry = json.loads(line)
            logged[entry["id"]] = entry["op"]
    assert len(logged) == 2 * rounds
    eu = {i for i in logged if i >= 3000 or (i - 2000) % 2}
    # Replay every version that touched either table: each is one logged operation (a
    # DuckDB transaction adds its row to BOTH tables in one version), each appears once.
    pending, x, y = dict(logged), set(), set()
    with embedded(lake_server) as lake:
        versions = sorted({e.version for t in ("duckrace.x", "duckrace.y")
                           for e in lake.history(limit=None, table=t) if e.version > start})
        for version in versions:
            past = lake.at(version=version)
            new_x = set(past.load_table("duckrace.x").scan().to_arrow().column("id").to_pylist())
            new_y = set(past.load_table("duckrace.y").scan().to_arrow().column("id").to_pylist())
            done = next((i for i, op in pending.items() if (
                (op == "both" and (new_x, new_y) == (x | {i}, y | {i}))
                or (op == "append" and (new_x, new_y) == (x | {i}, y))
                or (op == "overwrite" and (new_x, new_y) == ({j for j in x if j not in eu} | {i}, y))
            )), None)
            assert done is not None, f"version {version}: no single logged operation explains it"
            pending.pop(done)
            x, y = new_x, new_y
    assert not pending, f"logged as committed but never seen: {pending}"


# -- faults: the server's object store fails under a native REST commit ---------------


class InProcessCatalog(NoopCatalog):
    """pyiceberg's catalog interface straight onto the service's commit code (no HTTP), so the
    lakehouse under it can be opened through a FaultyStore."""

    def __init__(self, lake: catalog.Lakehouse, warehouse: Warehouse) -> None:
        super().__init__("in-process")
        self.lake, self.warehouse = lake, warehouse

    def load_table(self, identifier: Any) -> IcebergTable:
        name = ".".join(identifier) if isinstance(identifier, tuple) else str(identifier)
        current = tables.load_current(self.lake, self.warehouse, name)
        return IcebergTable(tuple(name.split(".")), current.metadata, current.metadata_location,
                            load_file_io(location=current.metadata_location), self)

    def commit_table(self, table: IcebergTable, requirements: Any, updates: Any) -> CommitTableResponse:
        request = CommitTableRequest(identifier=TableIdentifier(namespace=[table.name()[0]], name=table.name()[1]),
                                     requirements=requirements, updates=updates)
        try:
            current = tables.commit_table(self.lake, self.warehouse, ".".join(table.name()), request)
        except ApiError as exc:
            if exc.status == 409:
                raise CommitFailedException(exc.message) from exc
            raise
        return CommitTableResponse(metadata=current.metadata, metadata_location=current.metadata_location)


@pytest.mark.parametrize("seed", range(4))
def test_store_faults_under_rest_commits_apply_wholly_or_not_at_all(tmp_path: Path, seed: int) -> None:
    root = tmp_path / "lake"
    options: dict[str, Any] = {"fsync": False, "max_commit_attempts": 3, "backoff_min_s": 0.0001,
                               "backoff_max_s": 0.001, "background_threads": False}
    with Lakehouse(kvstore.open(LocalStore(root), **options)) as setup:
        setup.create_namespace("f")
        setup.create_table("f.t", schema=SCHEMA, partition_by=["region"]).append(batch([0], "eu"))
    faulty = FaultyStore(LocalStore(root, fsync=False), seed=seed)
    warehouse = Warehouse.for_lakehouse(str(root), None)
    with Lakehouse(kvstore.open(faulty, **options)) as lake, Lakehouse(kvstore.open(LocalStore(root), **options)) as clean:
        client = InProcessCatalog(lake, warehouse)
        expected, outcomes = {0}, []
        for step in range(1, 10):
            table = client.load_table("f.t")
            new = {10 * step, 10 * step + 1}
            victim = max(expected)
            after = expected - {victim} if step % 3 == 0 else expected | new
            faulty.error_rate = faulty.after_rate = 0.01  # faults in the commit only (the load is not under test)
            try:
                if step % 3 == 0:  # a copy-on-write delete: a native rewrite
                    table.delete(EqualTo("id", victim))
                else:
                    table.append(batch(sorted(new), "eu" if step % 2 else "us"))
                failed = False
            except (StoreError, CommitFailedException, ValidationException):
                failed = True  # an injected fault, reported as such
            finally:
                faulty.error_rate = faulty.after_rate = 0.0
            outcomes.append(failed)
            clean.refresh()
            ids = clean.load_table("f.t").scan().to_arrow().column("id").to_pylist()
            assert len(ids) == len(set(ids)), f"seed {seed} step {step}: duplicated rows"
            if failed:
                assert set(ids) in (expected, after), f"seed {seed} step {step}: a torn commit"
            else:
                assert set(ids) == after, f"seed {seed} step {step}: reported success, not applied"
            expected = set(ids)
        report = clean.verify()
        assert report.ok, report  # every committed entry names a whole, intact file
    assert any(outcomes), f"seed {seed}: no fault hit a commit"
