"""The Iceberg REST API with pyiceberg 0.12 as a real client.

The server runs on a local lakehouse; pyiceberg writes data and manifest
files into the warehouse itself (a local directory both can reach) and
commits through the server. A second, embedded catalog handle on the same
store checks what the lakehouse recorded.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import (
    BadRequestError,
    CommitFailedException,
    NamespaceNotEmptyError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.types import DoubleType
from test_observability import metric
from test_security import request

import catalog
from service.testing import ServerProcess


def embedded(server: ServerProcess) -> catalog.Lakehouse:
    return catalog.open(server.store_url, poll_interval_s=0, background_maintenance=False)


EVENTS = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


def test_create_append_scan_evolve_rename_drop(rest: RestCatalog, lake_server: ServerProcess) -> None:
    rest.create_namespace("shop", {"owner": "tests"})
    assert ("shop",) in rest.list_namespaces()
    assert rest.load_namespace_properties("shop")["owner"] == "tests"
    table = rest.create_table("shop.events", schema=EVENTS)
    with pytest.raises(TableAlreadyExistsError):
        rest.create_table("shop.events", schema=EVENTS)
    table.append(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=EVENTS))
    table.append(pa.table({"id": [3], "name": ["c"]}, schema=EVENTS))
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]

    with table.update_schema() as update:
        update.add_column("score", DoubleType())
    evolved = pa.schema([*EVENTS, pa.field("score", pa.float64())])
    table.append(pa.table({"id": [4], "name": ["d"], "score": [0.5]}, schema=evolved))
    reloaded = rest.load_table("shop.events")
    rows = sorted(reloaded.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [r["score"] for r in rows] == [None, None, None, 0.5]
    assert [f.name for f in reloaded.schema().fields] == ["id", "name", "score"]
    assert len(reloaded.history()) == 3  # three appends, one snapshot each

    assert rest.list_tables("shop") == [("shop", "events")]
    rest.rename_table("shop.events", "shop.events_v2")
    assert rest.list_tables("shop") == [("shop", "events_v2")]
    assert rest.table_exists("shop.events_v2") and not rest.table_exists("shop.events")
    assert sorted(rest.load_table("shop.events_v2").scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 4]
    with pytest.raises(NamespaceNotEmptyError):
        rest.drop_namespace("shop")

    with embedded(lake_server) as lake:  # a catalog object of format iceberg, pointing at the metadata
        table_def = lake.load_table("shop.events_v2")
        assert table_def.format == "iceberg" and table_def.metadata_location.endswith(".metadata.json")
        assert table_def.metadata_location == reloaded.metadata_location
        kinds = [op["kind"] for entry in lake.history(limit=None) for op in entry.operations]
        assert "create_table" in kinds and "rename_table" in kinds and "commit_metadata" in kinds

    rest.drop_table("shop.events_v2")
    with pytest.raises(NoSuchTableError):
        rest.load_table("shop.events_v2")
    rest.drop_namespace("shop")


def test_purge_deletes_the_table_files(rest: RestCatalog) -> None:
    rest.create_namespace("purge")
    table = rest.create_table("purge.t", schema=EVENTS)
    table.append(pa.table({"id": [1], "name": ["x"]}, schema=EVENTS))
    location = Path(table.location().removeprefix("file://"))
    assert any(location.rglob("*.parquet"))
    rest.purge_table("purge.t")
    assert not location.exists()


APPENDER = textwrap.dedent("""
    import os, sys, time, random
    import pyarrow as pa
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import CommitFailedException

    uri, worker, appends, sync_dir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    rest = RestCatalog("lakekv", uri=uri)
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
    # Every worker loads the table, then all start together from that same
    # snapshot: only one first append can win, so the race is certain, not timed.
    table = rest.load_table("race.log")
    open(os.path.join(sync_dir, f"ready-{worker}"), "w").close()
    while not os.path.exists(os.path.join(sync_dir, "go")):
        time.sleep(0.01)
    for n in range(appends):
        data = pa.table({"id": [worker * 1000 + n], "name": [f"w{worker}"]}, schema=schema)
        while True:
            try:
                table.append(data)
                break
            except CommitFailedException:  # lost the race: reload, retry
                time.sleep(random.uniform(0, 0.05))
                table = rest.load_table("race.log")
""")


def test_four_processes_append_concurrently_none_lost(
    rest: RestCatalog, lake_server: ServerProcess, tmp_path: Path
) -> None:
    rest.create_namespace("race")
    rest.create_table("race.log", schema=EVENTS)
    workers, appends = 4, 6
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", APPENDER, lake_server.url, str(w), str(appends), str(tmp_path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for w in range(workers)
    ]
    deadline = time.monotonic() + 300
    while len(list(tmp_path.glob("ready-*"))) < workers:
        assert time.monotonic() < deadline and all(p.poll() is None for p in processes), "a worker did not start"
        time.sleep(0.05)
    conflicts_before = metric(request(lake_server, "GET", "/metrics")[2].decode(), "lakekv_conflicts_total", api="iceberg")
    (tmp_path / "go").touch()
    for process in processes:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err[-3000:]
    conflicts = metric(request(lake_server, "GET", "/metrics")[2].decode(), "lakekv_conflicts_total", api="iceberg")
    table = rest.load_table("race.log")
    ids = sorted(table.scan().to_arrow().column("id").to_pylist())
    assert ids == sorted(w * 1000 + n for w in range(workers) for n in range(appends))
    assert len(table.snapshots()) == workers * appends  # every append is in the snapshot log
    # All first appends started from one snapshot: at most one could win, the
    # others got 409 (pyiceberg retries some itself, so count at the server).
    assert conflicts - conflicts_before >= workers - 1


def _commit(server: ServerProcess, path: str, payload: dict) -> tuple[int, dict]:
    status, _, raw = request(server, "POST", path, json.dumps(payload).encode(), {"Content-Type": "application/json"})
    return status, (json.loads(raw) if raw else {})


def test_failed_requirement_is_409_and_unknown_update_is_400(rest: RestCatalog, lake_server: ServerProcess) -> None:
    rest.create_namespace("rules")
    table = rest.create_table("rules.t", schema=EVENTS)
    path = "/v1/namespaces/rules/tables/t"
    identifier = {"namespace": ["rules"], "name": "t"}
    stale = {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 12345}
    status, body = _commit(lake_server, path, {"identifier": identifier, "requirements": [stale], "updates": []})
    assert status == 409 and body["error"]["type"] == "CommitFailedException"
    wrong_uuid = {"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}
    status, body = _commit(lake_server, path, {"identifier": identifier, "requirements": [wrong_uuid], "updates": []})
    assert status == 409
    status, body = _commit(lake_server, path, {"identifier": identifier, "updates": [{"action": "frobnicate"}]})
    assert status == 400 and body["error"]["type"] == "BadRequestException"
    status, body = _commit(lake_server, path, {"identifier": identifier, "requirements": [{"type": "assert-nothing"}]})
    assert status == 400
    outside = {"action": "set-location", "location": "/etc"}
    status, body = _commit(lake_server, path, {"identifier": identifier, "updates": [outside]})
    assert status == 400 and "outside the warehouse" in body["error"]["message"]
    ok = {"action": "set-properties", "updates": {"k": "v"}}
    uuid_ok = {"type": "assert-table-uuid", "uuid": str(table.metadata.table_uuid)}
    status, body = _commit(lake_server, path, {"identifier": identifier, "requirements": [uuid_ok], "updates": [ok]})
    assert status == 200 and body["metadata"]["properties"]["k"] == "v"


def test_locations_outside_the_warehouse_are_refused(rest: RestCatalog, lake_server: ServerProcess, tmp_path) -> None:
    rest.create_namespace("fence")
    with pytest.raises(BadRequestError, match="outside the warehouse"):
        rest.create_table("fence.t", schema=EVENTS, location=str(tmp_path / "elsewhere"))
    with pytest.raises(BadRequestError, match="outside the warehouse"):
        rest.create_table("fence.t", schema=EVENTS, location=lake_server.store_url + "/iceberg/../../escape")
    status, body = _commit(
        lake_server, "/v1/namespaces/fence/register",
        {"name": "r", "metadata-location": "/etc/passwd", "overwrite": False},
    )
    assert status == 400 and "outside the warehouse" in body["error"]["message"]
    for bad in ("a.b", "x/y", "", "\x01"):
        status, body = _commit(lake_server, "/v1/namespaces", {"namespace": [bad]})
        assert status == 400, bad


def test_native_tables_are_listed_and_served(rest: RestCatalog, lake_server: ServerProcess) -> None:
    with embedded(lake_server) as lake:
        lake.create_namespace("mixed")
        lake.create_table("mixed.native", pa.schema([pa.field("x", pa.int64())]))
    # Another process wrote it: the server's handle sees it within its poll interval.
    deadline = time.monotonic() + 30
    while not rest.namespace_exists("mixed") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ("mixed", "native") in rest.list_tables("mixed")
    # Served with its derived Iceberg metadata (tests/service/test_iceberg_native_rest.py: reads and writes).
    assert [f.name for f in rest.load_table("mixed.native").schema().fields] == ["x"]


def test_multi_table_commit_is_one_lakehouse_version(rest: RestCatalog, lake_server: ServerProcess) -> None:
    rest.create_namespace("multi")
    tables = {name: rest.create_table(f"multi.{name}", schema=EVENTS) for name in ("a", "b")}
    changes = [
        {
            "identifier": {"namespace": ["multi"], "name": name},
            "requirements": [{"type": "assert-table-uuid", "uuid": str(t.metadata.table_uuid)}],
            "updates": [{"action": "set-properties", "updates": {"batch": "1"}}],
        }
        for name, t in tables.items()
    ]
    with embedded(lake_server) as lake:
        before = lake.refresh()
    status, _ = _commit(lake_server, "/v1/transactions/commit", {"table-changes": changes})
    assert status == 204
    with embedded(lake_server) as lake:
        assert lake.version == before + 1  # both tables in ONE version
        entry = lake.history(limit=1)[0]
        assert entry.version == before + 1
        assert sorted(op["object"] for op in entry.operations) == ["multi.a", "multi.b"]
    assert rest.load_table("multi.a").properties["batch"] == rest.load_table("multi.b").properties["batch"] == "1"
    # One failing requirement fails the whole transaction: neither table changes.
    changes[0]["updates"] = [{"action": "set-properties", "updates": {"batch": "2"}}]
    changes[1]["requirements"] = [{"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}]
    changes[1]["updates"] = [{"action": "set-properties", "updates": {"batch": "2"}}]
    status, body = _commit(lake_server, "/v1/transactions/commit", {"table-changes": changes})
    assert status == 409 and body["error"]["type"] == "CommitFailedException"
    assert rest.load_table("multi.a").properties["batch"] == "1"


def test_views_create_load_replace_list_drop(rest: RestCatalog, lake_server: ServerProcess) -> None:
    rest.create_namespace("v")
    view_version = {
        "version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {},
        "representations": [{"type": "sql", "sql": "SELECT 1 AS x", "dialect": "spark"}],
        "default-namespace": ["v"],
    }
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "x", "type": "int", "required": False}]}
    status, body = _commit(lake_server, "/v1/namespaces/v/views", {
        "name": "one", "schema": schema, "view-version": view_version, "properties": {},
    })
    assert status == 200, body
    assert rest.list_views("v") == [("v", "one")] and rest.view_exists("v.one")
    new_version = dict(view_version, representations=[{"type": "sql", "sql": "SELECT 2 AS x", "dialect": "spark"}])
    status, body = _commit(lake_server, "/v1/namespaces/v/views/one", {
        "requirements": [{"type": "assert-view-uuid", "uuid": body["metadata"]["view-uuid"]}],
        "updates": [
            {"action": "add-view-version", "view-version": new_version},
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    })
    assert status == 200 and body["metadata"]["current-version-id"] == 2
    with embedded(lake_server) as lake:
        assert lake.load_view("v.one").sql == "SELECT 2 AS x"
    status, _ = _commit(lake_server, "/v1/views/rename", {
        "source": {"namespace": ["v"], "name": "one"}, "destination": {"namespace": ["v"], "name": "two"},
    })
    assert status == 204 and rest.list_views("v") == [("v", "two")]
    status, _, raw = request(lake_server, "GET", "/v1/namespaces/v/views/two")
    assert status == 200 and json.loads(raw)["metadata"]["current-version-id"] == 2
    status, body = _commit(lake_server, "/v1/namespaces/v/views/two", {"updates": [{"action": "drop-everything"}]})
    assert status == 400 and "unknown view update" in body["error"]["message"]
    rest.drop_view("v.two")
    assert not rest.view_exists("v.two")
