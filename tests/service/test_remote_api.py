"""The engine's API tests that make sense over HTTP, run against the embedded
store and against kvclient.RemoteStore on a live server (``db`` is parametrized).

The imported tests are the engine's own, unchanged (tests/kvstore/test_store.py
and test_txn.py); they pick up this module's ``db`` fixture. Left out are
those that read engine internals (oracle, watermark, counting stores), use
``snapshot()``/``scan_batches()`` (not offered remotely) or assert absolute
version numbers (the session server's store is shared by every test).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from test_store import (  # noqa: F401 - collected here with this module's db fixture
    test_bad_arguments_raise_clear_errors,
    test_closed_store_raises,
    test_scan_bounds_prefix_reverse_limit,
    test_ttl_expires_values,
)
from test_txn import (  # noqa: F401
    test_bad_arguments,
    test_blind_writes_never_conflict_but_abort_others,
    test_delete_then_get_and_put_again,
    test_empty_scan_range_still_protects,
    test_exception_in_context_manager_rolls_back,
    test_get_for_update_conflicts_even_under_snapshot,
    test_phantom_via_range_scan,
    test_read_of_missing_key_conflicts_with_its_insert,
    test_read_write_conflict_only_under_serializable,
    test_read_your_writes_in_get_and_scan,
    test_run_gives_up_after_retries,
    test_run_retries_conflicts,
    test_snapshot_reads_ignore_later_commits,
    test_use_after_commit_or_rollback_raises,
    test_write_outside_scanned_range_does_not_conflict,
    test_write_write_conflict_first_committer_wins,
)

import kvstore
from kvclient import RemoteStore
from kvstore.api import KeyValueLease, KeyValueStore, KeyValueTransaction, KeyValueWatch
from kvstore.errors import ConflictError, TransactionExpiredError
from kvstore.objstore.memory import MemoryStore


@pytest.fixture(params=["embedded", "remote"])
def db(request: pytest.FixtureRequest) -> Iterator[kvstore.Store | RemoteStore]:
    if request.param == "embedded":
        store = kvstore.open(MemoryStore(f"memory://{uuid.uuid4().hex}"), poll_interval_s=0)
        yield store
        store.close()
    else:
        yield request.getfixturevalue("remote_db")


# -- beyond the engine's tests: what only the remote path can get wrong ---------


def test_both_stores_and_their_handles_satisfy_the_protocols(db) -> None:
    # At run time, on live handles; tests/kvclient/test_conformance.py has mypy check the signatures.
    assert isinstance(db, KeyValueStore)
    txn = db.begin()
    try:
        assert isinstance(txn, KeyValueTransaction)
    finally:
        txn.rollback()
    lease = db.grant_lease(30)
    try:
        assert isinstance(lease, KeyValueLease)
    finally:
        lease.revoke()
    with db.watch(b"protocol/") as watch:
        assert isinstance(watch, KeyValueWatch)


def test_binary_keys_and_values_round_trip(db) -> None:
    keys = [bytes([i]) + b"\xff\x00/?#%" for i in range(1, 256, 37)] + [b"\xff" * 40, b"k" * 4096]
    for i, key in enumerate(keys):
        db.put(key, bytes(range(256)) * i)
    for i, key in enumerate(keys):
        assert db.get(key) == bytes(range(256)) * i
    assert [k for k, _ in db.scan()] == sorted(keys)


def test_keys_over_the_http_bound_are_refused_remotely(remote_db) -> None:
    with pytest.raises(ValueError, match="limit over HTTP is 4096"):
        remote_db.put(b"k" * 4097, b"v")
    with pytest.raises(ValueError, match="prefix is 4097 bytes"):
        list(remote_db.scan(prefix=b"k" * 4097))


def test_scan_pages_cover_everything_once(db) -> None:
    batch = kvstore.WriteBatch()
    for i in range(2500):  # several default pages of 1000 rows
        batch.put(b"p%05d" % i, b"%d" % i)
    db.write(batch)
    assert [k for k, _ in db.scan(prefix=b"p")] == [b"p%05d" % i for i in range(2500)]
    assert [k for k, _ in db.scan(prefix=b"p", reverse=True)] == [b"p%05d" % i for i in reversed(range(2500))]
    assert len(list(db.scan(prefix=b"p", limit=1500))) == 1500
    assert [k for k, _ in db.scan(start=b"p00990", end=b"p01010")] == [b"p%05d" % i for i in range(990, 1010)]
    with db.transaction() as txn:
        txn.put(b"p01000x", b"mine")
        keys = [k for k, _ in txn.scan(prefix=b"p")]
        assert len(keys) == 2501 and keys == sorted(keys)


def test_write_batch_with_ttl(db) -> None:
    db.write(kvstore.WriteBatch().put(b"a", b"1", ttl=3600).put(b"b", b"2").delete(b"c"))
    assert db.get(b"a") == b"1" and db.get(b"b") == b"2"


def test_transaction_expiry_is_reported(db) -> None:
    import time

    txn = db.begin(ttl=0.05)
    txn.put(b"k", b"v")
    time.sleep(0.2)
    with pytest.raises(TransactionExpiredError):
        txn.commit()
    assert db.get(b"k") is None


def test_concurrent_counter_increments_are_serializable(db) -> None:
    db.put(b"counter", b"0")

    def increment(txn) -> None:
        txn.put(b"counter", b"%d" % (int(txn.get(b"counter")) + 1))

    def worker() -> None:
        for _ in range(10):
            db.run(increment, retries=1000)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert db.get(b"counter") == b"40"


def test_conflict_error_message_crosses_the_wire(db) -> None:
    t1, t2 = db.begin(), db.begin()
    t1.put(b"k", b"1")
    t2.put(b"k", b"2")
    t1.commit()
    with pytest.raises(ConflictError, match="b'k'"):
        t2.commit()
