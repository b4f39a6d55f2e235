"""One Transaction used from two threads at once: misuse is refused, never silent.

The contract is one thread at a time, but a writer that keeps calling
``put`` while another thread commits used to see its calls return normally
and its writes dropped (2,096-3,545 of 5,000 per trial). Now every write
either is in the commit (the call returned) or raised TransactionClosedError,
which these tests check against what the store holds afterwards, with real
threads and a real local store (the commit's fsync leaves the writer room).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import kvstore
from kvstore.errors import TransactionClosedError

# Writes before the commit starts: the commit then races a running writer.
HEAD_START = 200


def _race_commit(db: kvstore.Store, write: Callable[[kvstore.Transaction, int], None]) -> tuple[set[int], set[int], int]:
    """Thread A writes 0, 1, 2, ... until a call raises, then rolls back; thread B commits once A is under way.

    Returns (indices whose call returned, indices whose call raised, the commit's seq).
    """
    txn = db.begin()
    started = threading.Event()
    returned: set[int] = set()
    raised: set[int] = set()
    failures: list[BaseException] = []

    def writer() -> None:
        try:
            for i in itertools.count():
                try:
                    write(txn, i)
                except TransactionClosedError:
                    raised.add(i)
                    # What cleanup code does: a no-op, during the commit as after it.
                    txn.rollback()
                    return
                returned.add(i)
                if i == HEAD_START:
                    started.set()
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)
            started.set()

    thread = threading.Thread(target=writer)
    thread.start()
    started.wait()
    seq = txn.commit()
    thread.join()
    assert not failures, failures
    assert txn.state == "committed"
    return returned, raised, seq


def _key(i: int) -> bytes:
    return b"w/%08d" % i


@pytest.mark.parametrize("trial", range(3))
def test_every_put_during_a_commit_is_committed_or_raises(tmp_path: Path, trial: int) -> None:
    with kvstore.open(str(tmp_path / "db")) as db:
        returned, raised, _ = _race_commit(db, lambda txn, i: txn.put(_key(i), b"%d" % i))
        committed = {int(k[2:]) for k, _ in db.scan(prefix=b"w/")}
        assert len(raised) == 1 and returned.isdisjoint(raised)
        assert committed == returned  # nothing returned without being committed, nothing raised was committed
        assert len(returned) > HEAD_START


def test_every_delete_during_a_commit_is_committed_or_raises(tmp_path: Path) -> None:
    with kvstore.open(str(tmp_path / "db")) as db:
        batch = kvstore.WriteBatch()
        batch.put_many((_key(i), b"x") for i in range(20_000))
        db.write(batch)
        returned, raised, _ = _race_commit(db, lambda txn, i: txn.delete(_key(i)))
        left = {int(k[2:]) for k, _ in db.scan(prefix=b"w/")}
        assert left == set(range(20_000)) - returned


def test_reads_and_summaries_racing_a_commit_are_in_it_or_raise(tmp_path: Path) -> None:
    with kvstore.open(str(tmp_path / "db")) as db:
        def mixed(txn: kvstore.Transaction, i: int) -> None:
            txn.put(_key(i), b"v")
            txn.get(_key(i // 2))
            txn.set_summary({"i": i})

        returned, raised, _ = _race_commit(db, mixed)
        committed = {int(k[2:]) for k, _ in db.scan(prefix=b"w/")}
        # The last call raised in put (not committed) or after it (its put committed).
        assert committed in (returned, returned | raised)
        summary = next(c["summary"] for c in db.history(limit=1)[0].commits if "summary" in c)
        assert summary == {"i": max(returned)}  # the last summary set before the commit began

        txn = db.begin()
        txn.put(b"solo", b"1")
        txn.commit()
        txn.rollback()  # after commit: still a no-op
        assert db.get(b"solo") == b"1"
