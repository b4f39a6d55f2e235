"""catalog/timetravel.py: ``lake.at(...).load_table_by_id`` follows a table through renames; ``lake.at()``
is one view of now that a load and its plan share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import catalog
import kvstore
from catalog.errors import NoSuchTableError
from catalog.lakehouse import Lakehouse
from kvstore.objstore import MemoryStore
from kvstore.objstore.counting import CountingStore


def test_load_table_by_id_reads_the_past_of_a_renamed_table(tmp_path: Path) -> None:
    with catalog.open(str(tmp_path / "lake"), background=False) as lake:
        lake.create_namespace("ns")
        lake.create_namespace("other")
        t = lake.create_table("ns.ev", pa.schema([("id", pa.int64())]))
        before = t.append(pa.table({"id": [1, 2]}))
        t.append(pa.table({"id": [3]}))
        lake.rename_table("ns.ev", "other.ev2")
        lake.create_table("ns.ev", pa.schema([("x", pa.string())]))  # the old name, another table now
        table_id = lake.load_table("other.ev2").id
        with lake.at(version=before) as past:
            same = past.load_table_by_id(table_id)
            assert same.name == "ns.ev" and same.id == table_id
            assert sorted(same.scan().to_arrow().column("id").to_pylist()) == [1, 2]
            with pytest.raises(NoSuchTableError, match="no table with id"):
                past.load_table_by_id(lake.load_table("ns.ev").id)  # created after that version
            with pytest.raises(TypeError):
                past.load_table_by_id(42)  # type: ignore[arg-type]


def _root_requests(counting: CountingStore) -> list[str]:
    """The reads of root files (``_<version>.ipc``) since the last reset: each is one freshness probe
    (the hint writer may touch ``_latest_hint`` meanwhile: not counted)."""
    return [op for op, path in counting.paths if path.startswith("_") and path.endswith(".ipc")]


def test_a_view_of_now_loads_and_plans_a_table_with_one_freshness_probe_and_sees_every_finished_commit() -> None:
    # An object store without a beacon (S3, memory, a wrapper) answers each
    # linearizable read with a probe for the next root file: a GET round trip
    # on S3. lake.load_table(t).files(f) is two reads, so two probes; a view of
    # now shares one between the load and the plan, and still sees every
    # commit that finished before it, another handle's included.
    counting = CountingStore(MemoryStore(), record_paths=True)
    no_follower: dict[str, Any] = {"poll_interval_s": 1000.0, "background_maintenance": False}
    with kvstore.open(counting, **no_follower) as reader_store, kvstore.open(counting, **no_follower) as writer_store:
        reader, writer = Lakehouse(reader_store), Lakehouse(writer_store)
        writer.create_namespace("ns")
        table = writer.create_table("ns.t", pa.schema([("id", pa.int64()), ("part", pa.int32())]), partition_by=["part"])
        table.append(pa.table({"id": pa.array([1], pa.int64()), "part": pa.array([1], pa.int32())}))
        one_partition = pc.field("part") == 1
        reader.refresh()  # caught up: each probe below finds nothing newer, one GET (a 404)

        counting.reset()
        assert len(reader.load_table("ns.t").files(one_partition)) == 1
        assert _root_requests(counting) == ["get", "get"]  # the load's probe, then the plan's

        table.append(pa.table({"id": pa.array([2], pa.int64()), "part": pa.array([1], pa.int32())}))
        reader.refresh()
        table.append(pa.table({"id": pa.array([3], pa.int64()), "part": pa.array([2], pa.int32())}))
        counting.reset()
        with reader.at() as now:
            assert now.version == writer.version  # the writer's commit finished before: seen
            assert len(now.load_table("ns.t").files(one_partition)) == 2
            assert len(now.load_table("ns.t").files_table()) == 3
        # The probe found the writer's version (its GET, and catching up reads it), then
        # nothing newer (one 404); both loads and plans shared it.
        assert _root_requests(counting) == ["get", "get", "get"]
        counting.reset()
        with reader.at() as now:
            assert len(now.load_table("ns.t").files(one_partition)) == 2
        assert _root_requests(counting) == ["get"]  # nothing new: one probe for a load and its plan

        with pytest.raises(TypeError, match="exactly one"):
            reader.at(version=1, timestamp=1.0)
