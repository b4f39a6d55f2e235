"""lake.expire_versions and lake.remove_orphan_files: GC's two halves on request, under GC's safety rules."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

import catalog
from catalog import Lakehouse
from kvstore.errors import SnapshotTooOldError
from kvstore.format.root import root_path

SCHEMA = pa.schema([("id", pa.int64())])


def _versions(lake: Lakehouse, n: int) -> list[int]:
    """``n`` overwrites of ns.t, each removing the previous file: the versions they made."""
    lake.create_namespace("ns")
    t = lake.create_table("ns.t", SCHEMA)
    made = []
    for i in range(n):
        t.overwrite(pa.table({"id": [i]}, schema=SCHEMA))
        made.append(lake.version)
    return made


def test_expire_keeps_the_newest_versions_and_never_passes_the_window(tmp_path: Path) -> None:
    with catalog.open(str(tmp_path / "lake"), poll_interval_s=0, retention_window_s=0.0) as lake:
        made = _versions(lake, 5)
    # Every version an hour old by its root file's time (the storage clock the
    # window is measured on), so the zero window keeps none of them whatever the
    # machine's speed: under load a version committed within twice the clock's
    # resolution of the expiry was not yet "old", and the floor stopped short.
    then = time.time() - 3600
    for version in range(made[-1] + 1):
        os.utime(tmp_path / "lake" / root_path(version), (then, then))
    with catalog.open(str(tmp_path / "lake"), poll_interval_s=0, retention_window_s=0.0) as lake:
        dry = lake.expire_versions(retain_last=2, dry_run=True)
        assert dry.dry_run and len(dry.removed_files) == 3 and lake.retention_floor == 0
        report = lake.expire_versions(retain_last=2)
        assert report.floor_version == made[-2] and len(report.removed_files) == 3
        assert lake.retention_floor == made[-2]
        with pytest.raises(SnapshotTooOldError):
            lake.at(version=made[-3])
        with lake.at(version=made[-2]) as past:
            assert past.load_table("ns.t").scan().to_arrow().column("id").to_pylist() == [3]
        assert [v.version for v in lake.history(limit=None)][-1] == made[-2] and lake.verify().ok
    with catalog.open(str(tmp_path / "kept"), poll_interval_s=0) as kept:  # the default 24 h window
        _versions(kept, 3)
        report = kept.expire_versions(retain_last=1)
        assert report.removed_files == [] and kept.retention_floor == 0  # the window keeps them all


def test_expire_and_orphan_arguments_are_checked_before_anything(local_lake: Lakehouse) -> None:
    _versions(local_lake, 2)
    head = local_lake.version
    with pytest.raises(ValueError, match="retain_last must be at least 1"):
        local_lake.expire_versions(retain_last=0)
    with pytest.raises(TypeError, match="retain_last"):
        local_lake.expire_versions(retain_last="2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="older_than .* is in the future"):
        local_lake.expire_versions(older_than=local_lake.store.storage_now() + 3600)
    with pytest.raises(ValueError, match="older_than must be at least gc_grace_s"):
        local_lake.remove_orphan_files(older_than=local_lake.store.storage_now() - 1)
    assert local_lake.refresh() == head


def test_remove_orphan_files_takes_only_old_unreferenced_files(local_lake: Lakehouse) -> None:
    _versions(local_lake, 2)
    root = Path(local_lake.url.removeprefix("file://"))
    location = root / local_lake.load_table("ns.t").location
    old, young = location / "killed-writer-old.parquet", location / "killed-writer-young.parquet"
    old.write_bytes(b"x" * 10)
    young.write_bytes(b"y" * 10)
    two_hours_ago = os.path.getmtime(old) - 7200
    os.utime(old, (two_hours_ago, two_hours_ago))
    rows = local_lake.load_table("ns.t").scan().to_arrow()
    dry = local_lake.remove_orphan_files(dry_run=True)
    assert [Path(p).name for p in dry.orphan_files] == ["killed-writer-old.parquet"] and old.exists()
    report = local_lake.remove_orphan_files()
    assert [Path(p).name for p in report.orphan_files] == ["killed-writer-old.parquet"]
    assert not old.exists() and young.exists()
    assert report.removed_files == []  # removals are expire_versions' business
    assert local_lake.load_table("ns.t").scan().to_arrow() == rows and local_lake.verify().ok
