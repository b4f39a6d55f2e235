"""KeyLocks: exclusive per-key locks with FIFO hand-over, timeouts, cycle
detection and finalizer-safe release (kvstore.keylocks)."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvstore.errors import ConflictError, DeadlockError, LockTimeoutError
from kvstore.keylocks import KeyLocks


def test_acquire_is_exclusive_and_reentrant() -> None:
    locks = KeyLocks()
    assert locks.acquire(1, b"k", 0) is False
    assert locks.acquire(1, b"k", 0) is False  # reentrant, no wait
    with pytest.raises(LockTimeoutError) as caught:
        locks.acquire(2, b"k", 0)
    assert caught.value.key == b"k" and isinstance(caught.value, ConflictError)
    assert "transaction 1" in str(caught.value)
    locks.release_all(1)
    assert locks.acquire(2, b"k", 0) is False
    assert locks.held_by(2) == {b"k"} and locks.held_by(1) == frozenset()


def test_timeout_leaves_no_waiter_behind() -> None:
    locks = KeyLocks()
    locks.acquire(1, b"k", 0)
    with pytest.raises(LockTimeoutError):
        locks.acquire(2, b"k", 0.05)
    locks.release_all(1)
    assert len(locks) == 0  # not handed to the waiter that gave up
    assert locks.acquire(3, b"k", 0) is False


def test_release_hands_the_key_to_the_first_waiter() -> None:
    locks = KeyLocks()
    locks.acquire(1, b"k", 0)
    order: list[int] = []

    def wait_for_key(owner: int) -> None:
        assert locks.acquire(owner, b"k", 30) is True
        order.append(owner)
        locks.release_all(owner)

    first = threading.Thread(target=wait_for_key, args=(2,))
    first.start()
    _wait_until_waiting(locks, 2)
    second = threading.Thread(target=wait_for_key, args=(3,))
    second.start()
    _wait_until_waiting(locks, 3)
    locks.release_all(1)
    first.join(30)
    second.join(30)
    assert order == [2, 3]
    assert len(locks) == 0


def test_opposite_order_fails_fast_instead_of_hanging() -> None:
    locks = KeyLocks()
    locks.acquire(1, b"a", 0)
    locks.acquire(2, b"b", 0)
    outcome: list[object] = []

    def one_wants_b() -> None:
        try:
            outcome.append(locks.acquire(1, b"b", 30))
        except ConflictError as exc:  # kept for the assertion below to show
            outcome.append(exc)

    waiter = threading.Thread(target=one_wants_b)
    waiter.start()
    _wait_until_waiting(locks, 1)
    with pytest.raises(DeadlockError) as caught:
        locks.acquire(2, b"a", 30)  # would close the cycle 2 -> 1 -> 2
    assert caught.value.key == b"a"
    locks.release_all(2)  # what a transaction does on the error: roll back
    waiter.join(30)
    assert outcome == [True]
    assert locks.held_by(1) == {b"a", b"b"}


def test_longer_cycles_are_detected() -> None:
    locks = KeyLocks()
    for owner, key in ((1, b"a"), (2, b"b"), (3, b"c")):
        locks.acquire(owner, key, 0)
    errors: list[BaseException] = []
    threads = [
        threading.Thread(target=_acquire_recording, args=(locks, 1, b"b", errors)),
        threading.Thread(target=_acquire_recording, args=(locks, 2, b"c", errors)),
    ]
    for owner, thread in zip((1, 2), threads):
        thread.start()
        _wait_until_waiting(locks, owner)
    with pytest.raises(DeadlockError, match="through 1 -> 2"):
        locks.acquire(3, b"a", 30)
    locks.release_all(3)
    threads[1].join(30)
    assert locks.held_by(2) == {b"b", b"c"}
    locks.release_all(2)
    threads[0].join(30)
    assert locks.held_by(1) == {b"a", b"b"}
    assert errors == []  # both waiters were granted once the cycle was broken


def test_release_later_under_the_mutex_is_applied_by_the_next_call() -> None:
    locks = KeyLocks()
    locks.acquire(1, b"k", 0)
    with locks._mutex:  # internals: a finalizer running in a thread that holds the mutex
        locks.release_later(1)
    assert locks.held_by(1) == frozenset()
    assert locks.acquire(2, b"k", 0) is False


def test_release_later_wakes_a_waiter_through_its_poll() -> None:
    locks = KeyLocks()
    locks.acquire(1, b"k", 0)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(locks.acquire(2, b"k", 30)))
    waiter.start()
    _wait_until_waiting(locks, 2)
    with locks._mutex:  # internals: as a finalizer would, under the mutex
        locks.release_later(1)  # queued: nobody wakes the waiter directly
    waiter.join(30)
    assert got == [True] and locks.held_by(2) == {b"k"}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["acquire", "release"]), st.integers(1, 4), st.sampled_from([b"a", b"b", b"c"]))))
def test_single_thread_model(ops: list[tuple[str, int, bytes]]) -> None:
    """Without waiting (timeout 0) the locks behave like a dict key -> owner."""
    locks = KeyLocks()
    model: dict[bytes, int] = {}
    for op, owner, key in ops:
        if op == "release":
            locks.release_all(owner)
            model = {k: o for k, o in model.items() if o != owner}
        elif model.get(key, owner) == owner:
            assert locks.acquire(owner, key, 0) is False
            model[key] = owner
        else:
            with pytest.raises(LockTimeoutError):
                locks.acquire(owner, key, 0)
        assert len(locks) == len(model)
        for o in range(1, 5):
            assert locks.held_by(o) == {k for k, h in model.items() if h == o}


def _acquire_recording(locks: KeyLocks, owner: int, key: bytes, errors: list[BaseException]) -> None:
    """Acquire in a thread; a failure is recorded for the test to assert on."""
    try:
        locks.acquire(owner, key, 30)
    except ConflictError as exc:
        errors.append(exc)


def _wait_until_waiting(locks: KeyLocks, owner: int) -> None:
    """Block until ``owner`` is queued for a key (no sleeps-as-assertions)."""
    for _ in range(30_000):
        with locks._mutex:  # internals: the wait-for graph's lock
            if owner in locks._waiting_for:  # internals: no public query says who is waiting
                return
        threading.Event().wait(0.001)
    raise AssertionError(f"owner {owner} never started waiting")


def test_a_release_note_stays_for_later_holders_until_its_owner_forgets_it() -> None:
    locks = KeyLocks()
    locks.acquire(1, b"k", 1)
    locks.acquire(1, b"j", 1)
    note = object()
    locks.release_all(1, note)
    assert locks.handed_over(b"k") is note and locks.handed_over(b"j") is note
    locks.acquire(2, b"k", 1)  # no wait: the note is still there for it
    assert locks.handed_over(b"k") is note
    newer = object()
    locks.release_all(2, newer)
    locks.forget({b"k", b"j"}, note)  # k was handed over again since: not removed
    assert locks.handed_over(b"k") is newer and locks.handed_over(b"j") is None
    locks.forget({b"k"}, newer)
    assert locks.handed_over(b"k") is None and len(locks) == 0


def test_store_stats_count_the_transactions_waiting_for_a_key() -> None:
    import time

    import kvstore

    with kvstore.open("memory://key-lock-waiters", poll_interval_s=0) as db:
        holder = db.begin()
        holder.get_for_update(b"k")
        waiter = db.begin()
        done = threading.Event()

        def wait_for_the_key() -> None:
            waiter.get_for_update(b"k")
            done.set()

        thread = threading.Thread(target=wait_for_the_key)
        thread.start()
        for _ in range(5_000):  # until the waiter has queued
            if db.stats()["key_lock_waiters"] == 1:
                break
            time.sleep(0.001)
        assert db.stats()["key_lock_waiters"] == 1 and not done.is_set()
        holder.rollback()
        thread.join(10)
        assert done.is_set() and db.stats()["key_lock_waiters"] == 0
        waiter.rollback()
