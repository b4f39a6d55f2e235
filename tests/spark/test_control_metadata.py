"""The control plane's metadata tables (catalog/spark/control_metadata.py), without Spark: answers
checked against the Python API, at the edges Spark tests do not reach (retention, bad requests)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa

import catalog
from catalog.iceberg_derived import snapshot_id
from catalog.spark.control import ControlPlane, data_root
from kvstore.format.root import root_path


def test_partitions_last_updated_stops_at_the_data_floor(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    with catalog.open(str(root), poll_interval_s=0, retention_window_s=60) as lake:
        lake.create_namespace("s")
        t = lake.create_table("s.t", pa.schema([("id", pa.int64()), ("p", pa.string())]), partition_by=["p"])
        t.append(pa.table({"id": [1], "p": ["x"]}))
        floor = t.append(pa.table({"id": [2], "p": ["y"]}))
        now = time.time()
        for version in range(floor + 1):  # a second apart, an hour ago
            then = now - 3600 - (floor - version)
            os.utime(root / root_path(version), (then, then))
        assert lake.gc().floor_version == floor
        last = t.append(pa.table({"id": [3], "p": ["y"]}))
    with catalog.open(str(root)) as lake:
        plane = ControlPlane(lake, data_root(lake))
        answer = plane.handle({"op": "metadata_table", "args": {"name": ["s", "t"], "kind": "partitions"}})
        assert answer["ok"], answer
        rows = {row[0][0]: row for row in answer["result"]["rows"]}
        table = lake.load_table("s.t")
        assert {p: (r[2], r[3]) for p, r in rows.items()} == {"x": (1, 1), "y": (2, 2)}
        assert rows["y"][6] == snapshot_id(table.id, last)
        assert rows["x"][5] is None and rows["x"][6] is None  # changed at the floor or before: unknown
        history = plane.handle({"op": "metadata_table", "args": {"name": ["s", "t"], "kind": "history"}})
        assert [row[4] for row in history["result"]["rows"]] == sorted(h.version for h in lake.history(limit=None, table="s.t"))


def test_bad_metadata_requests_are_refused(tmp_path: Path) -> None:
    with catalog.open(str(tmp_path / "lake")) as lake:
        lake.create_namespace("s")
        lake.create_table("s.t", pa.schema([("id", pa.int64())]))
        plane = ControlPlane(lake, data_root(lake))
        for args, kind in (
            ({"name": ["s", "t"], "kind": "manifests"}, "unknown metadata table 'manifests'"),
            ({"name": "s.t", "kind": "files"}, "argument 'name' must be a list of names"),
            ({"name": ["s", "nope"], "kind": "files"}, "does not exist"),
        ):
            answer = plane.handle({"op": "metadata_table", "args": args})
            assert not answer["ok"] and kind in answer["error"]["message"], answer
