"""The lakehouse's retention is recorded in it (issue 35, "Time travel lists versions it cannot read").

Ages are made by stamping root files in the past (``os.utime``, what
waiting out a window would do), so no test waits for a window to pass.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import catalog
from catalog import keys
from kvstore.errors import SnapshotTooOldError
from kvstore.format.root import root_path
from kvstore.store import open_embedded
from lake_peer import LOCAL, SCHEMA, rows
from lake_workers import run_processes
from retention_soak import run_soak, table_rows

pytestmark = pytest.mark.timeout(600)

T = "db.t"


def _age_roots(root: Path, upto: int, seconds: float) -> None:
    """Stamp the root files of versions ``0..upto`` ``seconds`` in the past."""
    then = time.time() - seconds
    for version in range(upto + 1):
        os.utime(root / root_path(version), (then, then))


def _overwritten(url: str, root: Path, window_s: float) -> tuple[dict[int, list[tuple[int, str]]], int]:
    """A table appended once and overwritten three times; the first three versions made an hour old.

    Returns each write's version with the rows it left, and the newest aged version.
    """
    versions: dict[int, list[tuple[int, str]]] = {}
    with catalog.open(url, **LOCAL, retention_window_s=window_s) as lake:
        lake.create_namespace("db")
        t = lake.create_table(T, SCHEMA)
        versions[t.append(rows([1, 2], "a"))] = [(1, "a"), (2, "a")]
        for n in range(3):
            versions[t.overwrite(rows([10 + n], f"o{n}"))] = [(10 + n, f"o{n}")]
    aged = sorted(versions)[2]  # the second overwrite
    _age_roots(root, aged, 3600)
    return versions, aged


def default_reader(url: str, start: Any, stop: Any) -> dict[str, Any]:
    """Another process, opened with the default retention: what it lists, reads and verifies."""
    start.wait(60)
    out: dict[str, Any] = {"read": {}, "too_old": [], "errors": []}
    with catalog.open(url, poll_interval_s=0) as lake:
        out["listed"] = [e.version for e in lake.history(limit=None)]
        for version in [*out["listed"], 1]:
            try:
                with lake.at(version=version) as past:
                    out["read"][version] = table_rows(past, T) if past.table_exists(T) else None
            except SnapshotTooOldError:
                out["too_old"].append(version)
            except Exception as exc:  # noqa: BLE001 - reported to the test, which fails on it
                out["errors"].append(f"version {version}: {type(exc).__name__}: {exc}")
        report = lake.verify()
        out["verify"] = (report.ok, report.floor_version, [str(p) for p in report.problems])
    return out


def test_a_default_process_reads_every_version_it_lists_after_a_short_window_gc(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    versions, aged = _overwritten(str(root), root, window_s=60)
    with catalog.open(str(root), **LOCAL, retention_window_s=60) as lake:
        report = lake.gc()
    assert report.floor_version == aged and len(report.removed_files) == 2  # the append's and the first overwrite's
    (seen,) = run_processes([(default_reader, (str(root),))])
    assert seen["errors"] == []
    assert min(seen["listed"]) == aged  # nothing below the data floor is listed
    for version, expected in versions.items():
        if version >= aged:
            assert seen["read"][version] == expected
        else:
            assert version not in seen["listed"] and version not in seen["read"]
    assert 1 in seen["too_old"]
    assert seen["verify"] == (True, aged, [])
    with catalog.open(str(root), **LOCAL) as lake:
        assert lake.retention_floor == aged


def test_gc_keeps_what_the_recorded_window_keeps_whatever_its_own_engine_window(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    url = str(root)
    versions, aged = _overwritten(url, root, window_s=60)
    short = catalog.open(url, **LOCAL, retention_window_s=60)  # an engine window of 60 s
    try:
        with catalog.open(url, **LOCAL) as other:
            assert other.retention_window_s == 60  # it follows the recorded window
            assert other.store.options.retention_window_s == 60  # its engine too
            assert other.set_retention(2 * 3600) is not None  # two hours, for everyone
            assert other.set_retention(2 * 3600) is None  # already recorded
        report = short.gc()  # its engine keeps 60 s; the lakehouse keeps two hours
        assert report.removed_files == [] and report.pending == 3
        for version, expected in versions.items():
            with short.at(version=version) as past:
                assert table_rows(past, T) == expected
        assert short.retention_floor == 0
    finally:
        short.close()


def test_the_window_is_recorded_by_an_explicit_option_and_by_set_retention(tmp_path: Path) -> None:
    url = str(tmp_path / "lake")
    with catalog.open(url, **LOCAL) as lake:
        assert lake.retention_window_s == 24 * 3600  # never set: the engine's default
        first = lake.version
    with catalog.open(url, **LOCAL, retention_window_s=5) as lake:
        assert lake.retention_window_s == 5
        assert lake.history(limit=1)[0].operations == [
            {"kind": "set_retention", "object": None, "window_s": 5.0, "was_s": 24 * 3600.0}
        ]
        recorded = lake.version
    with catalog.open(url, **LOCAL) as lake:  # the default option follows the record and writes nothing
        assert lake.version == recorded > first
        assert (lake.retention_window_s, lake.store.options.retention_window_s) == (5, 5)
    with catalog.Lakehouse(open_embedded(url, **LOCAL, retention_window_s=7)) as lake:
        assert lake.retention_window_s == 7  # a store opened with a window of its own records it
    with catalog.Lakehouse(open_embedded(url, **LOCAL)) as lake:
        assert lake.retention_window_s == 7  # the default engine window records nothing
        for wrong_type in ("1h", float("inf"), float("nan")):  # not a finite number (catalog.arguments)
            with pytest.raises(TypeError, match="window_s"):
                lake.set_retention(wrong_type)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="window_s"):
            lake.set_retention(-1)
    with pytest.raises(ValueError, match="window_s"):
        catalog.open(url, **LOCAL, retention_window_s=-1)


def test_a_file_gc_took_while_a_past_version_was_read_is_snapshot_too_old(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    url = str(root)
    versions, aged = _overwritten(url, root, window_s=60)
    oldest = min(versions)
    reader = catalog.open(url, **LOCAL)
    try:
        past = reader.at(version=oldest)  # opened before the GC: the floor was 0 then
        with catalog.open(url, **LOCAL) as collector:
            assert collector.gc().floor_version == aged
        with past, pytest.raises(SnapshotTooOldError, match=f"version {oldest} is past retention"):
            past.load_table(T).scan().to_arrow()
        with pytest.raises(SnapshotTooOldError):
            reader.at(version=oldest)
        with pytest.raises(SnapshotTooOldError):
            reader.export(str(tmp_path / "copy"), version=oldest)  # never a copy with holes
        with reader.at(version=aged) as kept:
            assert table_rows(kept, T) == versions[aged]
    finally:
        reader.close()


def test_appends_overwrites_compaction_gc_and_time_travel_in_processes(tmp_path: Path) -> None:
    """Acceptance 3, short, reading 20 of the versions history() lists afterwards (each a full read of
    every table: thousands may be listed on a busy machine); the whole run, reading them all, is
    ``tests/catalog/retention_soak.py --duration-s 300``."""
    stats = run_soak(tmp_path, duration_s=20, check_at_most=20)
    assert stats["data_files_deleted"] > 0 and stats["reads_after"] > 0
    assert stats["reads_during"] + stats["too_old_during"] > 0


def test_the_first_gc_records_a_floor_where_a_gc_from_before_floors_deleted_files(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    with catalog.open(str(root), **LOCAL, retention_window_s=60) as lake:
        lake.create_namespace("db")
        t = lake.create_table(T, SCHEMA)
        appended = t.append(rows([1], "a"))
        (old_file,) = t.files()
        first_overwrite = t.overwrite(rows([2], "b"))
        t.overwrite(rows([3], "c"))
        # What a GC from before this change left: the file deleted, its removal record forgotten.
        (root / old_file.path).unlink()
        lake.store.delete(keys.table_gone_file(t.id, old_file.id))
    _age_roots(root, first_overwrite, 3600)
    with catalog.open(str(root), **LOCAL) as lake:
        report = lake.gc()
        assert report.removed_files == [] and report.floor_version == first_overwrite
        assert lake.retention_floor == first_overwrite  # recorded although it deleted nothing
        with pytest.raises(SnapshotTooOldError):
            lake.at(version=appended)
        assert appended not in [e.version for e in lake.history(limit=None)]
