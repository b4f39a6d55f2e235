"""Key locks: the per-handle locks ``Transaction.get_for_update`` takes.

A transaction that reads a key with ``get_for_update`` holds the key's lock
until it commits, rolls back, aborts, expires or is garbage-collected. Other
transactions of the same store handle that ask for the key queue behind it
(first come, first served) instead of racing it to an abort; transactions of
other processes never see these locks (optimistic validation still decides
between processes, see :mod:`kvstore.oracle`).

Deadlock freedom: a wait that would close a cycle (``A`` holds ``x`` and
waits for ``y``, ``B`` holds ``y`` and asks for ``x``) fails at once with
:class:`~kvstore.errors.DeadlockError`; any other wait is bounded by a
timeout and fails with :class:`~kvstore.errors.LockTimeoutError`. Both are
``ConflictError`` subclasses, so ``Store.run`` retries them.

A released key is handed straight to its first waiter (one wake-up per
release: sixteen threads queued on a hot key do not all wake on every
commit). A transaction that releases its keys because its commit is queued
(not yet durable) leaves a note on each key, an opaque hand-over object the
next holder reads with :meth:`KeyLocks.handed_over` (see
:mod:`kvstore.inflight`); the note stays until its owner settles and calls
:meth:`KeyLocks.forget`, so a holder that arrives after the release without
waiting finds it too.

Transactions dropped without commit or rollback release their locks from a
garbage-collection finalizer, which may run in any thread at any allocation,
even in one holding this module's mutex: :meth:`KeyLocks.release_later`
releases at once only if the mutex is free, and otherwise queues the owner
for the next call (waiters poll that queue every ``_POLL_S``).

Thread-safety: every method is thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from kvstore.errors import DeadlockError, LockTimeoutError

# How often a waiter wakes to apply releases queued by finalizers (see the
# module docstring). Normal releases wake the waiter directly.
_POLL_S = 0.05


class _Waiter:
    """One transaction waiting for one key: a lock held from birth that the
    releaser opens once it has handed the key over."""

    __slots__ = ("owner", "gate")

    def __init__(self, owner: int) -> None:
        self.owner = owner
        self.gate = threading.Lock()
        self.gate.acquire()


class KeyLocks:
    """Exclusive per-key locks owned by transaction ids. See the module docstring."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._holder: dict[bytes, int] = {}  # key -> owning transaction id
        self._held: dict[int, set[bytes]] = {}  # owner -> the keys it holds
        self._queues: dict[bytes, deque[_Waiter]] = {}  # key -> waiters, first come first
        self._waiting_for: dict[int, bytes] = {}  # owner -> the key it waits for
        self._released_later: deque[int] = deque()  # owners queued by finalizers
        self._notes: dict[bytes, object] = {}  # key -> hand-over note of its last releaser

    def acquire(self, owner: int, key: bytes, timeout: float) -> bool:
        """Take ``key`` for ``owner``, waiting at most ``timeout`` seconds.

        Reentrant: a key the owner already holds returns at once. Returns
        True if the call had to wait for another owner.

        Raises:
            DeadlockError: waiting would close a cycle of waiting owners.
            LockTimeoutError: the key was not released within ``timeout``.
        """
        with self._mutex:
            self._apply_released_later()
            holder = self._holder.get(key)
            if holder is None or holder == owner:
                self._grant(owner, key)
                return False
            cycle = self._cycle_through(owner, holder)
            if cycle is not None:
                raise DeadlockError(
                    f"transaction {owner} would wait for key {key!r} held by transaction {holder}, "
                    f"which waits (through {' -> '.join(map(str, cycle))}) for a key transaction {owner} holds; "
                    "roll back and retry",
                    key=key,
                )
            waiter = _Waiter(owner)
            self._queues.setdefault(key, deque()).append(waiter)
            self._waiting_for[owner] = key
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if waiter.gate.acquire(timeout=max(0.0, min(remaining, _POLL_S))):
                return True  # handed over by the releaser (who cleaned up our waiting entries)
            with self._mutex:
                self._apply_released_later()
                if self._holder.get(key) == owner:
                    return True  # handed over between the timeout and the mutex
                if remaining <= _POLL_S:
                    self._queues[key].remove(waiter)
                    if not self._queues[key]:
                        del self._queues[key]
                    del self._waiting_for[owner]
                    raise LockTimeoutError(
                        f"transaction {owner} waited {timeout:g} s for key {key!r}, held by transaction "
                        f"{self._holder.get(key)}; roll back and retry (or raise the store's lock_timeout_s)",
                        key=key,
                    )

    def release_all(self, owner: int, note: object | None = None) -> None:
        """Release every key ``owner`` holds; each goes to its first waiter. Idempotent.

        ``note``: left on each released key for its next holders (see
        :meth:`handed_over`) until :meth:`forget` removes it.
        """
        with self._mutex:
            if note is not None:
                for key in self._held.get(owner, ()):
                    self._notes[key] = note
            self._release(owner)
            self._apply_released_later()

    def handed_over(self, key: bytes) -> object | None:
        """The note the last releaser of ``key`` left, if it has not forgotten it."""
        return self._notes.get(key)

    def forget(self, keys: frozenset[bytes] | set[bytes], note: object) -> None:
        """Remove ``note`` from ``keys`` where a later releaser has not replaced it."""
        with self._mutex:
            for key in keys:
                if self._notes.get(key) is note:
                    del self._notes[key]

    def release_later(self, owner: int) -> None:
        """:meth:`release_all` that is safe from a garbage-collection finalizer."""
        if self._mutex.acquire(blocking=False):
            try:
                self._release(owner)
            finally:
                self._mutex.release()
        else:
            self._released_later.append(owner)

    def held_by(self, owner: int) -> frozenset[bytes]:
        """The keys ``owner`` holds now."""
        with self._mutex:
            self._apply_released_later()
            return frozenset(self._held.get(owner, ()))

    def __len__(self) -> int:
        """How many keys are locked now."""
        with self._mutex:
            self._apply_released_later()
            return len(self._holder)

    def waiting_count(self) -> int:
        """How many transactions wait for a key now."""
        with self._mutex:
            self._apply_released_later()
            return len(self._waiting_for)

    # -- under the mutex ---------------------------------------------------------

    def _grant(self, owner: int, key: bytes) -> None:
        self._holder[key] = owner
        self._held.setdefault(owner, set()).add(key)

    def _release(self, owner: int) -> None:
        for key in self._held.pop(owner, ()):
            queue = self._queues.get(key)
            if not queue:
                del self._holder[key]
                continue
            waiter = queue.popleft()
            if not queue:
                del self._queues[key]
            del self._waiting_for[waiter.owner]
            self._grant(waiter.owner, key)
            waiter.gate.release()

    def _apply_released_later(self) -> None:
        while self._released_later:
            self._release(self._released_later.popleft())

    def _cycle_through(self, owner: int, holder: int) -> list[int] | None:
        """The owners from ``holder`` back to ``owner`` if ``owner`` waiting
        for ``holder`` would close a cycle, else None. Each owner waits for
        at most one key, so the wait-for graph is a set of chains: walk one."""
        chain = [holder]
        seen = {holder}
        while True:
            key = self._waiting_for.get(chain[-1])
            if key is None:
                return None
            next_holder = self._holder.get(key)
            if next_holder is None:
                return None
            if next_holder == owner:
                return chain
            if next_holder in seen:  # a cycle not through us (it detected itself)
                return None
            seen.add(next_holder)
            chain.append(next_holder)
