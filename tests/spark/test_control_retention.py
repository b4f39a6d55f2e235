"""SQL time travel (``VERSION AS OF`` / ``TIMESTAMP AS OF``) answers from the lakehouse's recorded retention.

The control plane resolves a pinned version through ``lake.at``: below the
data floor a GC recorded (catalog.retention) the answer is
``SnapshotTooOldError``, never a plan of files GC deleted. Root files are
stamped an hour old (``os.utime``) instead of waiting out a window.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa

import catalog
from catalog.spark.control import ControlPlane, data_root
from kvstore.format.root import root_path

LONG = {"name": "id", "type": "long", "nullable": True, "metadata": {}}
STRUCT = {"type": "struct", "fields": [LONG]}


def test_versions_below_the_recorded_floor_are_too_old_for_sql(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    with catalog.open(str(root), poll_interval_s=0, retention_window_s=60) as lake:
        lake.create_namespace("s")
        t = lake.create_table("s.t", pa.schema([("id", pa.int64())]))
        first = t.append(pa.table({"id": [1]}))
        removed = t.overwrite(pa.table({"id": [2]}))
        kept = t.overwrite(pa.table({"id": [3]}))
        now = time.time()
        for version in range(removed + 1):  # a second apart, an hour ago
            then = now - 3600 - (removed - version)
            os.utime(root / root_path(version), (then, then))
        first_time_us = int(now - 3600 - (removed - first)) * 1_000_000 + 500_000  # while ``first`` was the newest
        assert lake.gc().floor_version == removed
    with catalog.open(str(root)) as lake:  # the default options: the plane answers from the lakehouse's record
        plane = ControlPlane(lake, data_root(lake))
        for pinned in ({"version": first}, {"timestamp_us": first_time_us}):
            answer = plane.handle({"op": "load_table", "args": {"name": ["s", "t"], **pinned}})
            assert not answer["ok"] and answer["error"]["type"] == "kvstore.errors.SnapshotTooOldError", answer
        info = plane.handle({"op": "load_table", "args": {"name": ["s", "t"], "version": removed}})
        assert info["ok"], info
        for version in (removed, kept):
            plan = plane.handle(
                {"op": "plan_scan", "args": {"name": ["s", "t"], "id": info["result"]["id"], "version": version, "filters": []}}
            )
            assert plan["ok"] and all((root / f["path"]).is_file() for f in plan["result"]["files"]), plan
