"""Compaction, data-file GC (safe by construction), export and history."""

import os
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest

import catalog
from catalog_util import ORDERS, orders
from full_disk_util import writer_killed_mid_write
from kvstore.objstore.local import TEMP_DIR


def _data_paths(lake: catalog.Lakehouse) -> set[str]:
    return {m.path for m in lake.objects.list("data/")}


def _make_old(path: Path, seconds: float = 3600) -> None:
    """Stamp a local file ``seconds`` in the past: what waiting out a grace period would do."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_compaction_keeps_rows_and_partitions(local_lake: catalog.Lakehouse) -> None:
    local_lake.create_namespace("s")
    t = local_lake.create_table("s.o", ORDERS, partition_by=["day"])
    for i in range(6):
        t.append(orders([i], "mon" if i % 2 else "tue"))
    assert len(t.files()) == 6
    report = local_lake.compact_table("s.o", target_file_bytes=1 << 20)
    assert (report.files_removed, report.files_added) == (6, 2)
    files = t.files()
    assert len(files) == 2 and sorted(t.scan().to_arrow().column("id").to_pylist()) == list(range(6))
    assert len(t.files(pc.field("day") == "mon")) == 1  # still one partition per file
    assert local_lake.compact_table("s.o", target_file_bytes=1 << 20).files_removed == 0  # nothing left to do
    with pytest.raises(ValueError, match="target_file_bytes"):
        local_lake.compact_table("s.o", target_file_bytes=0)


def test_gc_never_deletes_what_a_retained_version_reads(tmp_path: Path) -> None:
    lake = catalog.open(str(tmp_path / "l"), poll_interval_s=0, retention_window_s=3600)
    try:
        lake.create_namespace("s")
        t = lake.create_table("s.o", ORDERS)
        v1 = t.append(orders([1, 2]))
        t.overwrite(orders([3]))
        report = lake.gc(grace_s=0)
        assert report.removed_files == [] and report.orphan_files == [] and report.pending == 1
        assert lake.at(version=v1).load_table("s.o").scan().count() == 2  # still readable
    finally:
        lake.close()


def test_gc_deletes_removed_files_past_the_floor_and_orphans_after_grace(tmp_path: Path) -> None:
    lake = catalog.open(str(tmp_path / "l"), poll_interval_s=0, retention_window_s=0)
    try:
        lake.create_namespace("s")
        t = lake.create_table("s.o", ORDERS)
        t.append(orders([1, 2]))
        old_files = _data_paths(lake)
        removed_at = t.overwrite(orders([3]))
        # A zero window still trails the head by twice the storage clock's
        # resolution plus the probe's round trip: wait until the floor has
        # passed the overwrite (a liveness bound, not a timing assertion).
        deadline = time.monotonic() + 30
        while lake.store.retention_floor().version < removed_at:
            assert time.monotonic() < deadline, "the retention floor never reached the overwrite"
            time.sleep(0.05)
        orphan = f"{t.location}/orphan-from-a-dead-writer.parquet"
        lake.objects.put(orphan, b"not committed")
        young = lake.gc(grace_s=3600)  # the grace period protects orphans, not committed removals
        assert set(young.removed_files) == old_files and young.orphan_files == [] and orphan in _data_paths(lake)
        _make_old(tmp_path / "l" / orphan)
        report = lake.gc(grace_s=0.5)
        assert report.removed_files == [] and report.orphan_files == [orphan]
        assert _data_paths(lake) == {f.path for f in t.files()}
        assert t.scan().to_arrow().column("id").to_pylist() == [3]
        assert lake.gc(grace_s=0).removed_files == []  # the gone records were forgotten
        dry = catalog.open(lake.url, poll_interval_s=0)
        dry.objects.put(orphan, b"again")
        _make_old(tmp_path / "l" / orphan)
        assert dry.gc(dry_run=True, grace_s=0.5).orphan_files == [orphan] and orphan in _data_paths(dry)
        dry.close()
    finally:
        lake.close()


def test_purged_drop_frees_files_at_once(tmp_path: Path) -> None:
    lake = catalog.open(str(tmp_path / "l"), poll_interval_s=0)
    try:
        lake.create_namespace("s")
        lake.create_table("s.o", ORDERS).append(orders([1]))
        lake.create_table("s.keep", ORDERS).append(orders([2]))
        kept = _data_paths(lake)
        lake.drop_table("s.o", purge=True)
        report = lake.gc()
        assert len(report.removed_files) == 1 and _data_paths(lake) == kept - set(report.removed_files)
    finally:
        lake.close()


def test_purge_dropped_deletes_only_that_purged_tables_files(tmp_path: Path) -> None:
    from catalog.maintenance import purge_dropped

    lake = catalog.open(str(tmp_path / "l"), poll_interval_s=0)
    try:
        lake.create_namespace("s")
        purged = lake.create_table("s.o", ORDERS)
        purged.append(orders([1]))
        purged.append(orders([2]))
        kept = lake.create_table("s.kept", ORDERS)
        kept.append(orders([3]))
        dropped = lake.create_table("s.dropped", ORDERS)
        dropped.append(orders([4]))
        purged_paths = {f.path for f in purged.files()}
        before = _data_paths(lake)
        lake.drop_table("s.o", purge=True)
        lake.drop_table("s.dropped")  # no purge: its files stay for time travel
        assert purge_dropped(lake.context, dropped.id).removed_files == []
        report = purge_dropped(lake.context, purged.id)
        assert set(report.removed_files) == purged_paths and _data_paths(lake) == before - purged_paths
        assert purge_dropped(lake.context, purged.id).removed_files == []  # the records went with the files
        assert lake.gc().removed_files == [] and lake.verify().ok
    finally:
        lake.close()


def test_export_opens_on_its_own(tmp_path: Path, local_lake: catalog.Lakehouse) -> None:
    local_lake.create_namespace("s")
    t = local_lake.create_table("s.o", ORDERS)
    v = t.append(orders([1, 2]))
    t.append(orders([3]))
    report = local_lake.export(str(tmp_path / "copy"), version=v)
    assert report.version == v and report.data_files == 1
    with catalog.open(str(tmp_path / "copy"), create=False, poll_interval_s=0) as copy:
        assert copy.load_table("s.o").scan().count() == 2
        assert len(list(copy.objects.list("data/"))) == 1


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kvstore.cli import main

    url = str(tmp_path / "l")
    with catalog.open(url, poll_interval_s=0) as lake:
        lake.create_namespace("s")
        t = lake.create_table("s.o", ORDERS)
        t.append(orders([1]))
        t.append(orders([2]))
    assert main(["lake", url, "ls"]) == 0 and capsys.readouterr().out == "namespace\ts\n"
    assert main(["lake", url, "show", "s.o"]) == 0 and "files\t2\nrows\t2" in capsys.readouterr().out
    assert main(["lake", url, "show", "s.nope"]) == 1 and "does not exist" in capsys.readouterr().err
    assert main(["lake", url, "compact", "s.o", "--target-mb", "1"]) == 0
    assert "2 files" in capsys.readouterr().out
    assert main(["lake", url, "create-namespace", "a.b", "--parents"]) == 0
    assert main(["lake", url, "drop", "a", "--cascade"]) == 0 and "dropped namespace a" in capsys.readouterr().out
    assert main(["lake", url, "gc", "--dry-run"]) == 0 and "would delete" in capsys.readouterr().out
    assert main(["lake", url, "export", str(tmp_path / "copy")]) == 0 and '"data_files": 1' in capsys.readouterr().out
    assert main(["lake", str(tmp_path / "missing"), "ls"]) == 2


def test_history_lists_operations_newest_first(lake: catalog.Lakehouse) -> None:
    lake.create_namespace("s")
    t = lake.create_table("s.o", ORDERS)
    lake.create_table("s.other", ORDERS).append(orders([9]))
    v = t.append(orders([1, 2]))
    t.delete(pc.field("id") == 1)
    lake.rename_table("s.o", "s.renamed")
    with lake.transaction() as tx:
        tx.load_table("s.renamed").append(orders([3]))
        tx.load_table("s.other").append(orders([4]))
    entries = lake.history(limit=None)
    assert [e.version for e in entries] == sorted((e.version for e in entries), reverse=True)
    kinds = [[op["kind"] for op in e.operations] for e in entries]
    assert kinds[0] == ["append", "append"] and kinds[1] == ["rename_table"] and kinds[2] == ["delete"]
    delete = entries[2].operations[0]
    assert (delete["rows_removed"], delete["files_removed"], delete["files_added"]) == (1, 1, 1)
    mine = lake.history(limit=None, table="s.renamed")  # by id: survives the rename
    assert [op["kind"] for e in mine for op in e.operations] == ["append", "rename_table", "delete", "append", "create_table"]
    assert any(e.version == v for e in mine)
    assert len(lake.history(limit=2)) == 2 and lake.history(limit=0) == []
    assert all(e.timestamp > 0 for e in entries)
    with pytest.raises(ValueError):
        lake.history(limit=-1)


def test_lake_gc_deletes_temp_files_of_writers_killed_mid_write(local_lake: catalog.Lakehouse, tmp_path: Path) -> None:
    """`lakekv lake URL gc` (lake.gc) frees what a killed writer left in .tmp/, after the grace period only."""
    root = Path(local_lake.objects.root)
    writer_killed_mid_write(root, 20_000)
    [dead] = list((root / TEMP_DIR).iterdir())
    assert local_lake.gc().temp_files == []  # younger than the grace period: kept
    _make_old(dead, 2 * 3600)
    report = local_lake.gc(dry_run=True)
    assert report.temp_files == [f"{TEMP_DIR}/{dead.name}"] and report.bytes_freed >= 20_000 and dead.exists()
    assert local_lake.gc().temp_files == [f"{TEMP_DIR}/{dead.name}"]
    assert not dead.exists()
