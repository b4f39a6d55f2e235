"""Crashes and errors at every step of a commit, then reopen.

Acknowledged writes must all be there; unacknowledged ones either wholly
present or wholly absent; opening never fails. An error raised *after* the
root PUT succeeded is settled by reading the root back: the caller is told
the commit succeeded and it is applied exactly once.
"""

from __future__ import annotations

import threading

import pytest

import kvstore
from kvstore.chain import VersionChain
from kvstore.errors import StoreError
from kvstore.objstore.faulty import FaultyStore
from kvstore.objstore.memory import MemoryStore
from kvstore.testing.seams import check_memtable

KEYS_PER_BATCH = 3
# Keep retries short: a crashed store fails every call, and each commit would
# otherwise sleep through its whole backoff schedule before giving up.
FAST_RETRY = {"max_commit_attempts": 3, "backoff_min_s": 0.0001, "backoff_max_s": 0.001}


def _batch(i: int) -> kvstore.WriteBatch:
    batch = kvstore.WriteBatch()
    for j in range(KEYS_PER_BATCH):
        batch.put(b"b%04d-%d" % (i, j), b"value-%d" % i)
    return batch


def _check_all_or_nothing(inner: MemoryStore, acked: set[int], attempted: int) -> None:
    with kvstore.open(inner, create=False, poll_interval_s=0) as db:
        for i in range(attempted):
            present = [db.get(b"b%04d-%d" % (i, j)) for j in range(KEYS_PER_BATCH)]
            if i in acked:
                assert present == [b"value-%d" % i] * KEYS_PER_BATCH, f"acknowledged batch {i} lost"
            else:
                assert present in ([None] * KEYS_PER_BATCH, [b"value-%d" % i] * KEYS_PER_BATCH), f"batch {i} torn"
        check_memtable(db)
        versions = VersionChain(inner).list_versions()
        assert versions == list(range(db.version + 1))


def _run_until_crash(db: kvstore.Store, batches: int, threads: int) -> tuple[set[int], int]:
    acked: set[int] = set()
    lock = threading.Lock()

    def run(tid: int) -> None:
        for i in range(tid, batches, threads):
            try:
                db.write(_batch(i))
            except StoreError:
                continue
            with lock:
                acked.add(i)

    pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return acked, batches


@pytest.mark.parametrize("crash_at", list(range(0, 60, 3)))
@pytest.mark.parametrize("inline_delta_bytes", [1 << 20, 32])  # inline deltas, and delta SSTs
def test_crash_at_any_call_then_reopen(crash_at: int, inline_delta_bytes: int) -> None:
    inner = MemoryStore()
    kvstore.open(inner, poll_interval_s=0).close()
    faulty = FaultyStore(inner, seed=crash_at)
    options = dict(poll_interval_s=0, hint_interval_s=0, inline_delta_bytes=inline_delta_bytes, **FAST_RETRY)
    with kvstore.open(faulty, **options) as db:
        faulty.crash_after(crash_at)
        acked, attempted = _run_until_crash(db, batches=30, threads=3)
    assert faulty.crashed or len(acked) == 30
    _check_all_or_nothing(inner, acked, attempted)


@pytest.mark.parametrize("seed", range(6))
def test_random_errors_before_and_after_calls(seed: int) -> None:
    inner = MemoryStore()
    kvstore.open(inner, poll_interval_s=0).close()
    faulty = FaultyStore(inner, seed=seed)
    with kvstore.open(faulty, poll_interval_s=0, hint_interval_s=0, inline_delta_bytes=32, **FAST_RETRY) as db:
        faulty.error_rate = faulty.after_rate = 0.1
        acked, attempted = _run_until_crash(db, batches=40, threads=4)
    assert acked, "with 10% faults some commits must still succeed"
    _check_all_or_nothing(inner, acked, attempted)


def test_error_after_root_put_is_settled_by_reading_back() -> None:
    inner = MemoryStore()
    faulty = FaultyStore(inner, seed=1)
    with kvstore.open(faulty, poll_interval_s=0) as db:
        db.put(b"before", b"1")
        faulty.fail_next("put_if_absent", when="after", path_prefix="_")
        seq = db.put(b"k", b"v")  # the root landed, the call "failed": told success
        assert db.get(b"k") == b"v"
        assert db.version == 2 and seq == 2
        db.put(b"after", b"3")
        assert db.version == 3
    chain = VersionChain(inner)
    assert chain.list_versions() == [0, 1, 2, 3]
    holders = [v for v in range(4) if b"k" in [row[0] for row in chain.read_root(v).delta_rows()]]
    assert holders == [2]  # applied exactly once


def test_error_before_root_put_is_retried_transparently() -> None:
    inner = MemoryStore()
    faulty = FaultyStore(inner, seed=2)
    with kvstore.open(faulty, poll_interval_s=0) as db:
        faulty.fail_next("put_if_absent", when="before", path_prefix="_", count=3)
        db.put(b"k", b"v")
        assert db.version == 1
    with kvstore.open(inner, poll_interval_s=0) as db:
        assert db.get(b"k") == b"v"


def test_failed_read_back_then_retry_of_same_bytes() -> None:
    inner = MemoryStore()
    faulty = FaultyStore(inner, seed=3)
    with kvstore.open(faulty, poll_interval_s=0) as db:
        faulty.fail_next("put_if_absent", when="after", path_prefix="_")
        faulty.fail_next("get", when="before", path_prefix="_0")
        db.put(b"k", b"v")
        assert db.version == 1
    assert VersionChain(inner).list_versions() == [0, 1]


def test_crash_after_root_put_leaves_a_whole_commit() -> None:
    inner = MemoryStore()
    faulty = FaultyStore(inner, seed=4)
    with kvstore.open(faulty, poll_interval_s=0, hint_interval_s=0) as db:
        db.write(_batch(0))
        faulty.fail_next("put_if_absent", when="after", path_prefix="_", crash=True)
        with pytest.raises(StoreError):
            db.write(_batch(1))
    _check_all_or_nothing(inner, {0}, 2)
    with kvstore.open(inner, poll_interval_s=0) as db:
        assert db.get(b"b0001-0") == b"value-1"  # it landed before the crash


def test_hint_write_failure_does_not_fail_commits() -> None:
    inner = MemoryStore()
    faulty = FaultyStore(inner, seed=5)
    with kvstore.open(faulty, poll_interval_s=0, hint_interval_s=0) as db:
        faulty.fail_next("put", path_prefix="_latest_hint", count=1000)
        for i in range(20):
            db.put(b"k%d" % i, b"v")
        assert db.version == 20
    with kvstore.open(inner, poll_interval_s=0) as db:
        assert db.version == 20 and db.get(b"k19") == b"v"


@pytest.mark.parametrize("when", ["before", "after"])
def test_delta_sst_write_failure_fails_only_that_commit(when: str) -> None:
    inner = MemoryStore()
    faulty = FaultyStore(inner, seed=6)
    with kvstore.open(faulty, poll_interval_s=0, inline_delta_bytes=32) as db:
        faulty.fail_next("put", when=when, path_prefix="sst/")
        with pytest.raises(StoreError):
            db.write(_batch(0))
        db.write(_batch(1))
        assert db.get(b"b0000-0") is None and db.get(b"b0001-0") == b"value-1"
    _check_all_or_nothing(inner, {1}, 2)
