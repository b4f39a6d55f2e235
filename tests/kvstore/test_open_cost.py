"""Opening a store costs what its latest version needs, not what its history holds.

Issue 38: open of a store with a long retained history must read a bounded
number of objects (the head root, its tree, the tree's SSTs and the roots of
the unflushed versions) and hold memory that does not grow with the number
of versions. Two stores with the same data in the same tree shape and the
same unflushed tail, one with 20 versions of history and one with 2,000 (all
retained), must cost the same to open: the same object-store calls (counted
through :class:`~kvstore.objstore.counting.CountingStore`) and, within noise,
the same memory (traced with :mod:`tracemalloc`). No timing is asserted.
The SSTs' tails, a round trip each on S3, are read side by side.
"""

from __future__ import annotations

import threading
import tracemalloc
from collections import Counter

import pytest

import kvstore
from kvstore.objstore.counting import CountingStore
from kvstore.objstore.memory import MemoryStore

TEN_YEARS_S = 10 * 365 * 86400.0
KEYS = 200
UNFLUSHED = 5
SHORT, LONG = 20, 2000  # versions of history
PROBES = (0, UNFLUSHED, KEYS - 1)  # an unflushed key, keys the history rewrote or left alone
# Handles with no thread at all: every object-store call on open is open's own.
QUIET = dict(background_threads=False, background_maintenance=False, retention_window_s=TEN_YEARS_S)


def build(history: int) -> MemoryStore:
    """A store with ``KEYS`` keys, ``history`` retained small commits, one sorted run, ``UNFLUSHED`` unflushed versions."""
    objects = MemoryStore()
    with kvstore.open(objects, **QUIET) as db:
        batch = kvstore.WriteBatch()
        for i in range(KEYS):
            batch.put(b"key%04d" % i, b"v" * 50)
        db.write(batch)
        for v in range(history):
            db.put(b"key%04d" % (v % KEYS), b"w%d" % v)
            if v % 100 == 99:
                db.flush()
        db.flush()
        db.compact(full=True)  # one tree shape whatever the history (its versions are all kept)
        for v in range(UNFLUSHED):
            db.put(b"key%04d" % v, b"tail%d" % v)
        retained = db.history(limit=None)
        assert len(retained) == db.version + 1 > history and retained[-1].version == 0  # every version kept
    return objects


def expected(history: int, i: int) -> bytes:
    """What ``build(history)`` left in key ``i``."""
    if i < UNFLUSHED:
        return b"tail%d" % i
    written = [v for v in range(history) if v % KEYS == i]
    return b"w%d" % written[-1] if written else b"v" * 50


def open_cost(objects: MemoryStore) -> tuple[Counter[str], int, list[bytes | None], int]:
    """Object-store calls and traced peak bytes of one open, what it then reads of ``PROBES``,
    and how many versions are unflushed (open reads their roots)."""
    counting = CountingStore(objects)
    tracemalloc.start()
    try:
        db = kvstore.open(counting, create=False, **QUIET)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    calls = counting.counts
    with db:
        values = [db.get(b"key%04d" % i) for i in PROBES]
        stats = db.stats()
    return calls, peak, values, stats["version"] - stats["flushed_upto"]


@pytest.fixture(scope="module")
def stores() -> tuple[MemoryStore, MemoryStore]:
    """The short-history and the long-history store (built once: opening them writes nothing)."""
    return build(SHORT), build(LONG)


def test_open_reads_the_same_objects_whatever_the_history(stores: tuple[MemoryStore, MemoryStore]) -> None:
    short, long = stores
    short_calls, _, short_values, _ = open_cost(short)
    long_calls, _, long_values, unflushed = open_cost(long)
    assert long_calls == short_calls
    # Never a listing (linear in the roots). GETs: the unflushed versions'
    # roots (the head among them), the tree, the identity and the hint; one
    # range GET per SST of the tree (one here); HEADs to find the head.
    assert long_calls["list"] == 0
    assert long_calls["get"] <= unflushed + 3
    assert long_calls["get_range"] == 1
    assert short_values == [expected(SHORT, i) for i in PROBES]
    assert long_values == [expected(LONG, i) for i in PROBES]


def test_open_memory_does_not_grow_with_the_history(stores: tuple[MemoryStore, MemoryStore]) -> None:
    short, long = stores
    open_cost(short)  # warm: imports and first-use caches are not the store's
    _, short_peak, _, _ = open_cost(short)
    _, long_peak, _, _ = open_cost(long)
    # 100x the history; anything kept per version (a root summary is ~300
    # bytes) would add >= 600 KB over the short store's peak.
    assert long_peak < short_peak + 128 * 1024, (short_peak, long_peak)


class TailsMeetStore(CountingStore):
    """Holds the first ``parties`` SST range reads until all of them are in flight at once."""

    def __init__(self, inner: MemoryStore, parties: int) -> None:
        super().__init__(inner)
        self.barrier = threading.Barrier(parties, timeout=30)
        self._waiting = parties
        self._lock = threading.Lock()

    def get_range(self, path: str, start: int, end: int) -> bytes:
        with self._lock:
            meet = path.startswith("sst/") and self._waiting > 0
            self._waiting -= meet
        if meet:
            self.barrier.wait()  # BrokenBarrierError if open reads the tails one after another
        return super().get_range(path, start, end)


def test_open_reads_the_sst_tails_side_by_side() -> None:
    """On S3 each SST tail is a round trip: open has them in flight together (``open_parallelism``)."""
    objects = MemoryStore()
    with kvstore.open(objects, **QUIET) as db:
        for i in range(3):
            db.put(b"key%d" % i, b"v")
            db.flush()  # one L0 SST each
        assert db.stats()["l0_files"] == 3
    meeting = TailsMeetStore(objects, parties=3)
    with kvstore.open(meeting, create=False, **dict(QUIET, background_threads=True)) as db:
        assert [db.get(b"key%d" % i) for i in range(3)] == [b"v"] * 3
    assert meeting.counts["get_range"] >= 3
