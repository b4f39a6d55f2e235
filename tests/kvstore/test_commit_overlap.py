"""A large commit's rows go to the memtable while its root file is written.

A test of the committer's internals (it counts the commits that overlapped,
``db._committer``). The store under the handles makes every root write take a
millisecond, as an fsync does: that is when the committer overlaps. Every
test checks what readers see, and that a commit that did not land left
nothing behind in the memtable.
"""

from __future__ import annotations

import time
import uuid

import pytest

import kvstore
from kvstore.errors import CommitNotLandedError, NotWrittenError
from kvstore.format.rows import PUT
from kvstore.objstore.memory import MemoryStore
from kvstore.testing.seams import check_memtable, row_at

QUIET = {"poll_interval_s": 0, "background_maintenance": False}
ROWS = 300  # over the committer's threshold for overlapping


class _SlowRoots(MemoryStore):
    """Root files take a millisecond to write; with ``refuse`` set, root PUTs are refused."""

    def __init__(self) -> None:
        super().__init__(f"memory://{uuid.uuid4().hex}")
        self.refuse = False

    def put_if_absent(self, path: str, data: bytes) -> bool:
        if path.startswith("_") and path.endswith(".ipc"):
            time.sleep(0.001)  # the write's latency (an fsync's), not a wait for anything
            if self.refuse:
                raise NotWrittenError("refused: no space left")
        return super().put_if_absent(path, data)


def _batch(prefix: bytes, value: bytes = b"v", n: int = ROWS) -> kvstore.WriteBatch:
    return kvstore.WriteBatch().put_many((b"%s%05d" % (prefix, i), value) for i in range(n))


def _warm(db: kvstore.Store) -> None:
    """Commit until the committer has seen that root writes are slow (it then overlaps)."""
    for n in range(3):
        db.write(_batch(b"warm", b"%d" % n))


@pytest.fixture
def store() -> _SlowRoots:
    return _SlowRoots()


def test_overlapped_commits_read_like_the_model(store: _SlowRoots) -> None:
    with kvstore.open(store, **QUIET) as db:
        _warm(db)
        model = dict(db.scan())
        before = db._committer.overlapped_commits  # internals: counts overlapped commits
        seqs = []
        for n in range(4):
            batch = _batch(b"k%d" % (n % 2), b"v%d" % n).put(b"solo%d" % n, b"s")
            seqs.append(db.write(batch))
            model.update((key, mutation[1]) for key, mutation in batch.mutations.items())
        assert db._committer.overlapped_commits - before == 4  # internals: every one overlapped
        assert dict(db.scan()) == model
        check_memtable(db)
        assert row_at(db, b"k000007", seqs[0]) == (b"k000007", seqs[0], PUT, b"v0", None)
        assert row_at(db, b"k000007", seqs[2] - 1) == (b"k000007", seqs[0], PUT, b"v0", None)
        assert row_at(db, b"k000007", seqs[2])[3] == b"v2"  # type: ignore[index]
        assert row_at(db, b"solo3", seqs[2]) is None
    with kvstore.open(store, **QUIET) as again:
        assert dict(again.scan()) == model


def test_a_lost_race_leaves_no_row_behind(store: _SlowRoots) -> None:
    with kvstore.open(store, **QUIET) as a, kvstore.open(store, **QUIET) as b:
        _warm(a)
        rival_seq = b.write(kvstore.WriteBatch().put(b"rival", b"r"))
        # a has not seen b's version: its first attempt takes the same version and seq, and loses.
        seq = a.write(_batch(b"mine"))
        assert a._committer.races_lost == 1  # internals: the race happened
        assert seq == rival_seq + 1
        assert row_at(a, b"mine00000", rival_seq) is None  # the lost attempt's rows had that seq
        assert row_at(a, b"mine00000", seq) == (b"mine00000", seq, PUT, b"v", None)
        assert a.get(b"rival") == b"r"
        check_memtable(a)
        assert a.stats()["memtable_rows"] == 3 * ROWS + 1 + ROWS
        with kvstore.open(store, **QUIET) as fresh:
            assert dict(fresh.scan()) == dict(a.scan())


def test_a_refused_commit_leaves_no_row_behind(store: _SlowRoots) -> None:
    with kvstore.open(store, **QUIET) as db:
        _warm(db)
        head, rows_before = db.version, db.stats()["memtable_rows"]
        store.refuse = True
        with pytest.raises(CommitNotLandedError):
            db.write(_batch(b"lost"))
        assert db.version == head
        assert db.get(b"lost00000") is None and row_at(db, b"lost00000", 2**63) is None
        assert db.stats()["memtable_rows"] == rows_before
        check_memtable(db)
        store.refuse = False
        seq = db.write(_batch(b"next"))  # takes the seq the refused commit had
        assert [key for key, _ in db.scan(prefix=b"lost")] == []
        assert row_at(db, b"next00000", seq) == (b"next00000", seq, PUT, b"v", None)
        check_memtable(db)
