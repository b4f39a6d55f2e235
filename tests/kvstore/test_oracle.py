"""Oracle: validation rules in isolation, and bounded memory."""

from __future__ import annotations

import threading
import time
from collections import deque
from types import SimpleNamespace

import pytest

import kvstore
from kvstore.committer import PendingCommit
from kvstore.errors import ConflictError, TransactionExpiredError
from kvstore.format.rows import PUT
from kvstore.objstore.memory import MemoryStore
from kvstore.oracle import Oracle, TxnValidation


def _version(version: int, *seq_keys: tuple[int, bytes]):
    rows = [(key, seq, PUT, b"v", None) for seq, key in seq_keys]
    return SimpleNamespace(version=version, commits=[]), rows


def _pending(oracle: Oracle, txn_id: int, start: int, isolation: str, writes=(), reads=(), ranges=()):
    check = TxnValidation(txn_id, start, isolation, time.monotonic() + 60, frozenset(writes) | frozenset(),
                          frozenset(reads), tuple(ranges))
    return PendingCommit({k: (PUT, b"x", None) for k in writes}, {}, validation=check)


def test_rules_per_isolation_level() -> None:
    oracle = Oracle()
    txn_si, _, start = oracle.begin(lambda: (0, 10), 60)
    txn_ser, _, _ = oracle.begin(lambda: (0, 10), 60)
    oracle.record_version(*_version(1, (11, b"read-me"), (12, b"in-range")))
    si = _pending(oracle, txn_si, start, "snapshot", writes=[b"w"], reads=[b"read-me"])
    ser = _pending(oracle, txn_ser, start, "serializable", writes=[b"w2"], ranges=[(b"in", b"io")])
    accepted = oracle.validate_group([si, ser])
    assert accepted == [si]
    assert isinstance(ser.error, ConflictError) and "phantom" in str(ser.error)


def test_entries_at_or_before_the_start_never_conflict() -> None:
    oracle = Oracle()
    keep, _, _ = oracle.begin(lambda: (0, 0), 60)  # holds history from seq 0
    oracle.record_version(*_version(1, (5, b"k")))
    txn, _, start = oracle.begin(lambda: (1, 5), 60)
    pending = _pending(oracle, txn, start, "serializable", writes=[b"k"], reads=[b"k"])
    assert oracle.validate_group([pending]) == [pending]
    oracle.end(keep)


def test_expired_transaction_is_rejected_at_validation() -> None:
    oracle = Oracle()
    txn, _, start = oracle.begin(lambda: (0, 0), 0.01)
    expired = []
    oracle.on_expire(txn, lambda: expired.append(txn))
    time.sleep(0.02)
    pending = _pending(oracle, txn, start, "snapshot", writes=[b"k"])
    assert oracle.validate_group([pending]) == []
    assert isinstance(pending.error, TransactionExpiredError)
    assert expired == [txn] and oracle.running_count() == 0


@pytest.mark.slow
def test_memory_stays_bounded_over_a_million_transactions() -> None:
    """1M transactions, at most 64 running: the oracle keeps only what they need."""
    oracle = Oracle()
    seq = 0
    running: deque[tuple[int, int]] = deque()
    peak = 0
    for i in range(1_000_000):
        txn, _, start = oracle.begin(lambda: (seq, seq), 3600)
        running.append((txn, start))
        if len(running) == 64:
            finished, _ = running.popleft()
            seq += 1
            oracle.record_version(*_version(seq, (seq, b"key%d" % (i % 1000))))
            oracle.end(finished)
        oldest_start = running[0][1]
        # Exactly the commits newer than the oldest running start are needed.
        assert oracle.committed_count() <= seq - oldest_start
        peak = max(peak, oracle.committed_count())
    for txn, _ in running:
        oracle.end(txn)
    assert oracle.committed_count() == 0 and oracle.running_count() == 0
    assert peak <= 64


def test_store_oracle_is_empty_when_no_transaction_runs() -> None:
    with kvstore.open(MemoryStore(), poll_interval_s=0) as db:
        def worker(tid: int) -> None:
            for i in range(100):
                db.run(lambda txn: txn.put(b"t%d-%d" % (tid, i % 7), b"v"), isolation="snapshot")

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert db.stats()["running_transactions"] == 0
        assert db._oracle.committed_count() == 0  # internals: the oracle's committed history was pruned
        assert len(db.watermark) == 0
