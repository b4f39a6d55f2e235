"""lake.rollback_table: a NEW commit restoring a table's rows and schema of an earlier version."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import catalog
import kvstore
from catalog import Lakehouse
from kvstore.errors import StoreError
from kvstore.objstore.faulty import FaultyStore
from kvstore.objstore.local import LocalStore

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string())])


def _rows(lake: Lakehouse, name: str = "ns.t") -> list[tuple[object, ...]]:
    data = lake.load_table(name).scan().to_arrow()
    return sorted(zip(*(data.column(c).to_pylist() for c in data.column_names)))


def _table(lake: Lakehouse) -> catalog.Table:
    lake.create_namespace("ns")
    t = lake.create_table("ns.t", SCHEMA, partition_by=["day"])
    t.append(pa.table({"id": [1, 2], "day": ["a", "b"]}, schema=SCHEMA))
    t.append(pa.table({"id": [3], "day": ["a"]}, schema=SCHEMA))
    return t


def test_rollback_is_a_new_version_with_the_old_rows_and_history_kept(local_lake: Lakehouse) -> None:
    t = _table(local_lake)
    good = local_lake.version
    expected = _rows(local_lake)
    t.delete(pc.field("id") <= 2)
    t.append(pa.table({"id": [9], "day": ["c"]}, schema=SCHEMA))
    bad = local_lake.version
    bad_rows = _rows(local_lake)

    report = local_lake.rollback_table("ns.t", version=good)

    assert report.version == bad + 1 and report.target_version == good
    assert _rows(local_lake) == expected
    # History is kept: the bad version still reads as it was, and the rollback is one more entry.
    with local_lake.at(version=bad) as past:
        data = past.load_table("ns.t").scan().to_arrow()
        assert sorted(zip(data.column("id").to_pylist(), data.column("day").to_pylist())) == bad_rows
    assert local_lake.history(limit=1)[0].version == report.version
    # The copies it restored are checked, whole, by verify; gc keeps every file a retained version reads.
    assert local_lake.verify().ok
    local_lake.gc(grace_s=0)
    assert _rows(local_lake) == expected and local_lake.verify().ok
    # Rolling back the rollback restores the bad state.
    local_lake.rollback_table("ns.t", version=bad)
    assert _rows(local_lake) == bad_rows


def test_rollback_by_timestamp_and_of_a_schema_change(local_lake: Lakehouse) -> None:
    t = _table(local_lake)
    when = local_lake.history(limit=1)[0].timestamp
    expected = _rows(local_lake)
    t.update_schema().add_column("extra", pa.int32()).rename_column("day", "d").set_comment("id", "the id").commit()
    local_lake.load_table("ns.t").append(pa.table({"id": [7], "d": ["z"], "extra": [1]}))

    report = local_lake.rollback_table("ns.t", timestamp=when)

    assert report.schema_changed
    table = local_lake.load_table("ns.t")
    assert table.schema.names == ["id", "day"] and (table.schema.field("id").metadata or {}).get(b"comment") is None
    assert _rows(local_lake) == expected


def test_nothing_to_undo_commits_nothing(local_lake: Lakehouse) -> None:
    _table(local_lake)
    before = local_lake.version
    assert local_lake.rollback_table("ns.t", version=before).version is None
    assert local_lake.refresh() == before


def test_refusals_name_the_problem_and_change_nothing(local_lake: Lakehouse) -> None:
    t = _table(local_lake)
    start = local_lake.version
    t.update_schema().add_column("gone", pa.int64()).commit()
    with_gone = local_lake.version
    local_lake.load_table("ns.t").update_schema().drop_column("gone").commit()
    head = local_lake.version
    with pytest.raises(ValueError, match="column 'gone' was dropped since"):
        local_lake.rollback_table("ns.t", version=with_gone)
    with pytest.raises(ValueError, match="exactly one of version and timestamp"):
        local_lake.rollback_table("ns.t")
    with pytest.raises(ValueError, match="exactly one of version and timestamp"):
        local_lake.rollback_table("ns.t", version=start, timestamp=1.0)
    with pytest.raises(TypeError, match="version"):
        local_lake.rollback_table("ns.t", version="3")  # type: ignore[arg-type]
    with pytest.raises(catalog.NoSuchTableError):
        local_lake.rollback_table("ns.nope", version=start)
    local_lake.drop_table("ns.t")
    local_lake.create_table("ns.t", SCHEMA)
    with pytest.raises(ValueError, match="another table then"):
        local_lake.rollback_table("ns.t", version=start)
    assert local_lake.refresh() == head + 2


def test_a_failed_copy_or_commit_leaves_the_table_as_it_was(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    faulty = FaultyStore(LocalStore(root, fsync=False), seed=0)
    lake = Lakehouse(kvstore.open(faulty, fsync=False, max_commit_attempts=2, backoff_min_s=0.0001, backoff_max_s=0.001))
    try:
        t = _table(lake)
        good = lake.version
        t.delete(pc.field("id") == 1)  # removes a file: the rollback must copy it back
        bad_rows = _rows(lake)
        head = lake.version
        location = lake.load_table("ns.t").location
        faulty.fail_next("put", path_prefix=location)
        with pytest.raises(StoreError):
            lake.rollback_table("ns.t", version=good)
        assert lake.refresh() == head and _rows(lake) == bad_rows
        # A crash at the commit's PUT: a new handle finds the table as it was, and the rollback then works.
        faulty.fail_next("put_if_absent", path_prefix="_", crash=True)
        with pytest.raises(StoreError):
            lake.rollback_table("ns.t", version=good)
    finally:
        lake.close()
    with Lakehouse(kvstore.open(LocalStore(root, fsync=False), fsync=False)) as reopened:
        assert reopened.version == head and _rows(reopened) == bad_rows
        reopened.rollback_table("ns.t", version=good)
        assert [r[0] for r in _rows(reopened)] == [1, 2, 3]
        assert reopened.verify().ok
