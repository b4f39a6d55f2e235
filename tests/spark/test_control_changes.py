"""The control plane's incremental ops (catalog/spark/control_changes.py), without a JVM."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa

import catalog
from catalog.spark.control import ControlPlane
from kvstore.format.root import root_path

SCHEMA = pa.schema([("id", pa.int64())])


def test_a_stream_offset_past_retention_is_an_error_naming_it_and_the_floor(tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    with catalog.open(url, poll_interval_s=0, retention_window_s=60) as lake:
        lake.create_namespace("ns")
        t = lake.create_table("ns.t", SCHEMA)
        first = t.append(pa.table({"id": [1]}, SCHEMA))
        second = lake.load_table("ns.t").append(pa.table({"id": [2]}, SCHEMA))
        latest = lake.load_table("ns.t").append(pa.table({"id": [3]}, SCHEMA))
    then = time.time() - 3600  # versions up to the second an hour old, past the 60 s window
    for v in range(second + 1):
        os.utime(tmp_path / "lake" / root_path(v), (then, then))
    with catalog.open(url, poll_interval_s=0) as lake:
        floor = lake.gc().floor_version
        assert floor > first
        plane = ControlPlane(lake, None)
        for op, args, named in [
            ("plan_appended", {"name": ["ns", "t"], "start": first, "end": latest}, first),
            ("table_versions", {"name": ["ns", "t"], "after": first - 1}, first - 1),
        ]:
            answer = plane.handle({"op": op, "args": args})
            assert not answer["ok"]
            assert answer["error"]["type"] == "kvstore.errors.SnapshotTooOldError"
            assert f"version {named} is past retention" in answer["error"]["message"]
            assert f"below {floor}" in answer["error"]["message"]


def test_plans_name_the_versions_they_read_and_refuse_another_table(tmp_path: Path) -> None:
    with catalog.open(str(tmp_path / "lake"), poll_interval_s=0) as lake:
        lake.create_namespace("ns")
        t = lake.create_table("ns.t", SCHEMA)
        start = lake.version
        v1 = t.append(pa.table({"id": [1]}, SCHEMA))
        v2 = lake.load_table("ns.t").append(pa.table({"id": [2]}, SCHEMA))
        plane = ControlPlane(lake, None)
        plan = plane.handle({"op": "plan_appended", "args": {"name": ["ns", "t"], "id": t.id, "start": start, "end": v2}})
        assert plan["ok"] and plan["result"]["versions"] == [v1, v2]
        assert sum(f["rows"] for f in plan["result"]["files"]) == 2
        whole = plane.handle({"op": "plan_appended", "args": {"name": ["ns", "t"], "start": -1, "end": v1}})
        assert whole["result"]["versions"] == [v1] and sum(f["rows"] for f in whole["result"]["files"]) == 1
        versions = plane.handle({"op": "table_versions", "args": {"name": ["ns", "t"], "after": v1}})
        assert versions["result"] == {"latest": v2, "versions": [v2]}
        other = plane.handle({"op": "plan_appended", "args": {"name": ["ns", "t"], "id": "nope", "start": start, "end": v2}})
        assert other["error"]["kind"] == "no_such_table"
        bad = plane.handle({"op": "plan_appended", "args": {"name": ["ns", "t"], "start": "1", "end": v2}})
        assert bad["error"]["kind"] == "bad_request" and "'start' must be an int" in bad["error"]["message"]
