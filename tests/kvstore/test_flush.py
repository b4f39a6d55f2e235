"""Flush: unflushed versions -> one L0 SST, committed as a tree-only version."""

from __future__ import annotations

import time

import pytest

import kvstore
from kvstore.errors import CommitNotLandedError, NotWrittenError
from kvstore.format.rows import PUT
from kvstore.format.sst import SSTReader
from kvstore.format.tree import decode_tree
from kvstore.memtable import Memtable
from kvstore.objstore.counting import CountingStore
from kvstore.objstore.memory import MemoryStore
from kvstore.reader import get_row, get_row_traced
from maintenance_util import QUIET, sst_paths, wait_for


def test_without_upto_builds_a_new_memtable_and_leaves_the_old_one() -> None:
    memtable = Memtable()
    memtable.apply([(b"a", 1, PUT, b"1", None), (b"b", 1, PUT, b"1", None)])
    memtable.apply([(b"a", 2, PUT, b"2", None)])
    memtable.apply([(b"c", 3, PUT, b"3", None), (b"a", 4, PUT, b"4", None)])
    newer = memtable.without_upto(2)
    assert [row[:2] for row in newer.iter_rows()] == [(b"a", 4), (b"c", 3)]
    assert newer.row_count == 2 and len(newer) == 2
    assert memtable.row_count == 5 and memtable.get(b"b", 10) is not None
    newer.check_invariants()
    memtable.check_invariants()
    assert len(memtable.without_upto(0)) == 3 and len(memtable.without_upto(4)) == 0


def test_flush_moves_rows_into_l0_and_empties_the_memtable() -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        for i in range(20):
            db.put(b"k%02d" % i, b"v%d" % i)
        db.delete(b"k03")
        result = db.flush()
        assert result is not None and result.flushed_upto == 21 and result.sst is not None
        assert result.sst.row_count == 21  # the tombstone is kept: L0 is never the last run
        stats = db.stats()
        assert stats["flushed_upto"] == 21 and stats["flushed_seq"] == 21
        assert stats["memtable_keys"] == 0 and stats["l0_files"] == 1
        assert db.get(b"k05") == b"v5" and db.get(b"k03") is None
        assert len(list(db.scan())) == 19
        assert db.flush() is None  # only the flush's own tree-only version is unflushed


def test_open_after_flush_reads_only_later_versions() -> None:
    inner = MemoryStore()
    with kvstore.open(inner, **QUIET) as db:
        for i in range(30):
            db.put(b"k%02d" % i, b"v")
        db.flush()
        db.put(b"late", b"1")
        head = db.version
    counting = CountingStore(inner, record_paths=True)
    with kvstore.open(counting, **QUIET) as db:
        # Serializable reads: a linearizable one would also probe for the next root.
        assert db.get(b"k07", "serializable") == b"v" and db.get(b"late", "serializable") == b"1"
    roots_read = [path for op, path in counting.paths if op == "get" and path.startswith("_") and path.endswith(".ipc")]
    assert len(roots_read) == 2  # the flush version (its own) and the head: head - flushed_upto
    assert head == 32


def test_snapshot_taken_before_a_flush_keeps_reading_its_layers() -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        db.put(b"k", b"1")
        with db.snapshot() as snap:
            db.put(b"k", b"2")
            db.flush()
            db.put(b"k", b"3")
            assert snap.get(b"k") == b"1"
            assert db.get(b"k") == b"3"  # put() returned: its own handle reads it
            assert list(snap.scan()) == [(b"k", b"1")]
        assert db.get(b"k") == b"3"


def test_another_handle_drops_flushed_rows_when_it_applies_the_flush() -> None:
    inner = MemoryStore()
    with kvstore.open(inner, **QUIET) as a, kvstore.open(inner, **QUIET) as b:
        for i in range(10):
            a.put(b"k%d" % i, b"v")
        b.refresh()
        assert b.stats()["memtable_keys"] == 10
        a.flush()
        a.put(b"after", b"1")
        b.refresh()
        stats, (_, revision) = b.stats(), b.get_with_revision(b"after")
        # One row left unflushed, and it is b"after"'s: the memtable holds exactly the rows above flushed_seq.
        assert stats["memtable_rows"] == 1 and revision > stats["flushed_seq"]
        assert b.get(b"k4") == b"v" and b.get(b"after") == b"1"


def test_versions_without_rows_are_flushed_only_past_the_version_threshold() -> None:
    with kvstore.open(MemoryStore(), flush_max_versions=3, **QUIET) as db:
        db.put(b"k", b"v")
        db.flush()
        assert db.flush() is None  # just the flush's own version: nothing worth a commit
        db.checkpoint("c")  # a second version without rows
        assert db.flush() is None
        db.checkpoint("d")  # the third: now opening would read 3 roots
        result = db.flush()
        assert result is not None and result.sst is None
        assert db.stats()["flushed_upto"] == result.flushed_upto == db.version - 1
        assert db.get(b"k") == b"v"


def _wait_for_window_to_pass_head(db: kvstore.Store, window: float) -> None:
    """With a zero window, wait until the head itself is outside it."""
    if window == 0:
        wait_for(lambda: db.retention_floor().reason == "head")


@pytest.mark.parametrize(("window", "expected_rows"), [(0.0, 1), (3600.0, 3)])
def test_flush_drops_versions_superseded_below_the_floor(window: float, expected_rows: int) -> None:
    with kvstore.open(MemoryStore(), retention_window_s=window, **QUIET) as db:
        for value in (b"1", b"2", b"3"):
            db.put(b"k", value)
        # Retention counts a version as outside the window only once it is
        # older than two steps of the storage clock's resolution (1 ms here)
        # plus the clock probe's round trip.
        _wait_for_window_to_pass_head(db, window)
        result = db.flush()
        assert result is not None and result.sst is not None
        assert result.sst.row_count == expected_rows
        assert db.get(b"k") == b"3"


@pytest.mark.parametrize("rows_per_batch", [3, 200], ids=["small versions", "bulk versions"])
@pytest.mark.parametrize(("window", "floor_drops"), [(0.0, True), (3600.0, False)])
def test_flush_writes_the_memtable_rows_the_floor_keeps(rows_per_batch: int, window: float, floor_drops: bool) -> None:
    """Keys recurring across versions, tombstones among them: the SST holds
    every memtable row, or with a floor at the head only each key's newest."""
    with kvstore.open(MemoryStore(), retention_window_s=window, **QUIET) as db:
        for batch_no in range(6):
            batch = kvstore.WriteBatch()
            for i in range(rows_per_batch):
                key = b"k%04d" % ((i * 11 + batch_no * 5) % (rows_per_batch + 3))  # keys recur across batches
                if (i + batch_no) % 5 == 0:
                    batch.delete(key)
                else:
                    batch.put(key, b"v%d-%d" % (batch_no, i))
            db.write(batch)
        memtable = db._state.layers.memtable  # internals: the rows the flush reads
        expected_live = dict(db.scan())
        all_rows = list(memtable.iter_rows())
        _wait_for_window_to_pass_head(db, window)  # see the test above
        result = db.flush()
        assert result is not None and result.sst is not None
        info = result.sst
        written = list(SSTReader.open(db.objects, info.path, cache=None, size=info.size, tail_size=info.tail_size).iter())
        if floor_drops:
            newest = {}
            for row in all_rows:
                newest.setdefault(row[0], row)
            assert written == list(newest.values())
        else:
            assert written == all_rows
        assert dict(db.scan()) == expected_live


def test_racing_flushers_one_wins_and_the_loser_deletes_its_sst() -> None:
    inner = MemoryStore()
    with kvstore.open(inner, **QUIET) as a, kvstore.open(inner, **QUIET) as b:
        for i in range(10):
            a.put(b"k%d" % i, b"v")
        b.refresh()
        won = a.flush()
        assert won is not None and won.sst is not None
        # b has not seen a's flush: it flushes the same versions, loses the
        # race on the tree, and must clean up.
        assert b.flush() is None
        assert sst_paths(inner) == {won.sst.path}
        assert b.stats()["tree"] == a.stats()["tree"]
        assert b.verify().ok


def test_flush_rebases_over_a_concurrent_compaction() -> None:
    inner = MemoryStore()
    with kvstore.open(inner, **QUIET) as a, kvstore.open(inner, **QUIET) as b:
        for round_ in range(3):
            a.put(b"r%d" % round_, b"v")
            a.flush()
        b.refresh()
        b.put(b"from-b", b"1")
        a.refresh()
        compacted = a.compact(full=True)
        assert len(compacted) == 1
        result = b.flush()  # b has not seen the compaction: rebased onto it
        assert result is not None and result.sst is not None
        tree = decode_tree(b.objects.get(b.stats()["tree"]), b.stats()["tree"])  # the tree b's head points at
        assert [info["path"] for info in tree.l0] == [result.sst.path]
        assert len(tree.runs) == 1
        assert b.get(b"r1") == b"v" and b.get(b"from-b") == b"1"
        assert b.verify().ok


def test_background_flush_triggers_on_the_version_threshold() -> None:
    options = {"poll_interval_s": 0, "flush_max_versions": 4, "maintenance_interval_s": 0.01}
    with kvstore.open(MemoryStore(), **options) as db:
        for i in range(12):
            db.put(b"k%02d" % i, b"v")
        wait_for(lambda: db.stats()["flushed_upto"] >= 8)
        assert all(db.get(b"k%02d" % i) == b"v" for i in range(12))
        assert db.maintenance_stats()["flushes"] >= 1


def test_background_flush_triggers_on_the_memtable_size() -> None:
    options = {"poll_interval_s": 0, "flush_max_bytes": 4096, "maintenance_interval_s": 0.01}
    with kvstore.open(MemoryStore(), **options) as db:
        db.put(b"big", b"x" * 8192)
        wait_for(lambda: db.stats()["flushed_upto"] >= 1)
        assert db.get(b"big") == b"x" * 8192


def test_traced_get_counts_ssts_and_agrees_with_get_row() -> None:
    with kvstore.open(MemoryStore(), **QUIET) as db:
        for flush in range(3):
            for i in range(flush, 30, 3):
                db.put(b"k%02d" % i, b"v%d" % flush)
            db.flush()
        layers, seq = db._state.layers, db.seq  # internals: which files a point read consults
        for i in range(31):
            key = b"k%02d" % i
            row, consulted, read = get_row_traced(layers, key, seq)
            assert row == get_row(layers, key, seq)
            assert read <= consulted <= 3
            if row is not None:
                assert read >= 1


@pytest.mark.parametrize("bad", [{"flush_max_versions": 1}, {"flush_max_bytes": 0}, {"max_space_amplification": 0.0}])
def test_bad_maintenance_options_are_rejected(bad: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        kvstore.open(MemoryStore(), **bad)


class _RefusesRoots(MemoryStore):
    """Once ``refusing``, root files (``_<bits>.ipc``) and, with ``manifests``,
    tree manifests are refused as a full disk refuses them: nothing written."""

    def __init__(self) -> None:
        super().__init__()
        self.refusing = False
        self.manifests = False

    def put_if_absent(self, path: str, data: bytes) -> bool:
        if self.refusing and path.startswith("_") and path.endswith(".ipc"):
            raise NotWrittenError(f"writing {path!r}: no space left on device")
        return super().put_if_absent(path, data)

    def put(self, path: str, data: bytes) -> None:
        if self.refusing and self.manifests and path.startswith("tree/"):
            raise NotWrittenError(f"writing {path!r}: no space left on device")
        super().put(path, data)


@pytest.mark.parametrize("refused", ["root", "manifest"])
def test_a_flush_the_storage_refuses_deletes_its_outputs_at_once(refused: str) -> None:
    """Issue 35: on a full disk, the outputs of a flush that certainly did not
    land are deleted at once, not left to GC an hour later."""
    store = _RefusesRoots()
    with kvstore.open(store, **QUIET) as db:
        for n in range(20):
            db.put(b"k%d" % n, b"v%d" % n)
        before = sst_paths(store), {meta.path for meta in store.list("tree/")}
        store.refusing, store.manifests = True, refused == "manifest"
        with pytest.raises(NotWrittenError if refused == "manifest" else CommitNotLandedError):
            db.flush()
        assert (sst_paths(store), {meta.path for meta in store.list("tree/")}) == before
        store.refusing = False
        db.flush()
        assert db.get(b"k7") == b"v7"
