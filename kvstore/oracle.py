"""The transaction oracle: backward validation of optimistic transactions.

It remembers, for every recently committed transaction (this process's and
other writers', ingested as versions are applied), its commit seq, version
and write keys, and the start seqs of running transactions. A transaction
that started at seq ``s`` conflicts with a committed one of seq ``c > s`` if

* SNAPSHOT: ``c`` wrote a key in its write set (first committer wins);
* SERIALIZABLE: also if ``c`` wrote a key it read, or a key inside a range it
  scanned (the requested range, whether rows came back or not).

Keys read with ``get_for_update`` count as written, on both sides: the root
file records them (descriptor ``lock_keys``) so other processes see them.

A transaction that read the writes of commits still in flight (a key lock
handed over early, see :mod:`kvstore.inflight`) names them as its
*ancestors*: they are not conflicts for it, and it is rejected if any of
them did not commit.

That is Badger's oracle made distributed: versions from other processes feed
it before validation (the committer catches up on a lost race and then
re-validates). Committed entries no running transaction can conflict with
(``seq <=`` the oldest running start) are dropped, so memory is bounded by
what the running transactions need. Write keys are compared exactly, never
by hash, so there are no false conflicts from collisions.

Thread-safety: every method takes the oracle's lock.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from kvstore.errors import ConflictError, SnapshotTooOldError, TransactionExpiredError
from kvstore.format.root import RootFile
from kvstore.format.rows import Row

# How often expired transactions are looked for; expiry is enforced exactly
# at validation anyway, the sweep only frees what forgotten ones pin.
_EXPIRY_SWEEP_S = 0.05

SNAPSHOT = "snapshot"
SERIALIZABLE = "serializable"
ISOLATION_LEVELS = (SNAPSHOT, SERIALIZABLE)

# A scanned range [start, end); None = unbounded on that side.
KeyRange = tuple["bytes | None", "bytes | None"]


@dataclass(frozen=True)
class Committed:
    """One committed transaction as the oracle remembers it."""

    seq: int
    version: int | None  # None: earlier in the group being validated (not committed yet)
    keys: frozenset[bytes]
    # Its commit descriptor as the root file stores it (with "summary" if any).
    descriptor: dict[str, Any] | None = None


@dataclass
class TxnValidation:
    """What the committer validates for one transaction (its read/write sets)."""

    txn_id: int
    start_seq: int
    isolation: str
    deadline: float  # time.monotonic() after which it is expired
    write_keys: frozenset[bytes]
    read_keys: frozenset[bytes] = frozenset()
    read_ranges: tuple[KeyRange, ...] = ()
    # Commits in flight whose writes it read (PendingCommits, oldest first).
    ancestors: tuple[Any, ...] = ()


@dataclass
class _Running:
    start_seq: int
    deadline: float
    on_expire: list[Callable[[], None]] = field(default_factory=list)


def _in_range(key: bytes, key_range: KeyRange) -> bool:
    start, end = key_range
    return (start is None or key >= start) and (end is None or key < end)


class Oracle:
    """See the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._committed: deque[Committed] = deque()  # ascending seq
        self._running: dict[int, _Running] = {}
        # Ids of transactions dropped without commit/rollback, appended by
        # their garbage-collection finalizers without the lock (see end_later).
        self._abandoned: deque[int] = deque()
        self._ids = itertools.count(1)
        self._next_sweep = 0.0
        # Transactions that started before this seq cannot be validated: the
        # versions between their start and it may be gone (see set_horizon).
        self._horizon = 0

    # -- transactions --------------------------------------------------------

    def begin(self, head: Callable[[], tuple[int, int]], ttl_s: float) -> tuple[int, int, int]:
        """Register a transaction; return ``(txn_id, version, start_seq)``.

        ``head`` returns the store's current ``(version, seq)``; it is read
        under the oracle lock so no committed entry newer than the start can
        be dropped between reading the head and registering.
        """
        with self._lock:
            version, start_seq = head()
            txn_id = next(self._ids)
            self._running[txn_id] = _Running(start_seq, time.monotonic() + ttl_s)
        return txn_id, version, start_seq

    def advance(self, txn_id: int, head: Callable[[], tuple[int, int]], moved: Callable[[int, int], None]) -> bool:
        """Move a running transaction's start to the store's current head.

        For a transaction that has read and written nothing yet
        (``get_for_update`` after waiting for a key lock): validation then checks it only
        against commits after the new start. ``head`` is read, and
        ``moved(version, seq)`` called, under the oracle lock, so an expiry
        sweep never sees a half-moved transaction. Returns False (and calls
        nothing) if the transaction is no longer running.
        """
        with self._lock:
            running = self._running.pop(txn_id, None)
            if running is None:
                return False
            version, seq = head()
            running.start_seq = max(running.start_seq, seq)
            # Re-inserted last: the head never goes back, so the dict's order
            # stays start order (_collect relies on it).
            self._running[txn_id] = running
            moved(version, running.start_seq)
        return True

    def on_expire(self, txn_id: int, callback: Callable[[], None]) -> None:
        """Call ``callback()`` if the transaction is dropped for outliving its TTL."""
        with self._lock:
            running = self._running.get(txn_id)
            if running is not None:
                running.on_expire.append(callback)

    def end_later(self, txn_id: int) -> None:
        """Forget a transaction at the next oracle call; safe from a finalizer
        (takes no lock: a finalizer may run in a thread holding it)."""
        self._abandoned.append(txn_id)

    def end(self, txn_id: int) -> None:
        """Forget a finished transaction (commit, rollback, expiry). Idempotent."""
        with self._lock:
            self._running.pop(txn_id, None)
            self._collect()

    def set_horizon(self, seq: int) -> None:
        """Refuse to validate transactions that started before ``seq``.

        Called when the store rebuilt its state after falling behind GC: the
        write sets of the versions it skipped are unknown.
        """
        with self._lock:
            self._horizon = max(self._horizon, seq)
            self._committed.clear()

    def is_running(self, txn_id: int) -> bool:
        with self._lock:
            return txn_id in self._running

    # -- committed history -------------------------------------------------------

    def record_version(self, root: RootFile, rows: list[Row]) -> None:
        """Remember the write sets of every transaction in an applied version.

        Skipped when no transaction is running: one that begins later reads a
        head that already includes this version (the state moves its head
        before calling listeners), so it can never conflict with it.
        """
        with self._lock:
            if not rows or not self._running:
                return
            by_seq: dict[int, set[bytes]] = {}
            for row in rows:
                by_seq.setdefault(row[1], set()).add(row[0])
            descriptors = {d["seq"]: d for d in root.commits if isinstance(d.get("seq"), int)}
            for seq, descriptor in descriptors.items():
                if seq in by_seq:
                    by_seq[seq].update(_lock_keys(descriptor))
            for seq in sorted(by_seq):
                self._committed.append(
                    Committed(seq, root.version, frozenset(by_seq[seq]), descriptors.get(seq))
                )
            self._collect()

    def _collect(self) -> None:
        # Requires the lock. Expire overdue transactions (at most every
        # _EXPIRY_SWEEP_S: a sweep is O(running)), then drop committed entries
        # that no running transaction can conflict with.
        while self._abandoned:
            self._running.pop(self._abandoned.popleft(), None)
        now = time.monotonic()
        if now >= self._next_sweep:
            self._next_sweep = now + _EXPIRY_SWEEP_S
            expired = [txn_id for txn_id, r in self._running.items() if r.deadline <= now]
            for txn_id in expired:
                for callback in self._running.pop(txn_id).on_expire:
                    callback()
        # begin() registers under the lock with a non-decreasing head seq, so
        # the dict's insertion order is start order: the first is the oldest.
        floor = next(iter(self._running.values())).start_seq if self._running else None
        committed = self._committed
        while committed and (floor is None or committed[0].seq <= floor):
            committed.popleft()

    def committed_count(self) -> int:
        """How many committed entries are held (bounded by the running transactions)."""
        with self._lock:
            return len(self._committed)

    def running_count(self) -> int:
        with self._lock:
            self._collect()
            return len(self._running)

    # -- validation ----------------------------------------------------------

    def validate_group(self, group: Iterable[Any]) -> list[Any]:
        """Validate queued commits in order; set ``error`` on the rejected ones.

        Blind writes (``validation is None``) always pass. Each transaction is
        checked against committed history *and* against the writes accepted
        before it in this group, which will commit with smaller seqs.
        """
        group = list(group)
        if all(pending.validation is None for pending in group):
            return group  # blind writes only: nothing to validate
        accepted = []
        earlier_in_group: dict[Any, Committed] = {}  # accepted pending -> its entry, in order
        with self._lock:
            self._collect()
            for pending in group:
                check = pending.validation
                keys = frozenset(pending.mutations)
                if check is not None:
                    keys |= check.write_keys  # get_for_update keys included
                if check is not None:
                    error = self._check(check, earlier_in_group)
                    if error is not None:
                        pending.error = error
                        continue
                accepted.append(pending)
                earlier_in_group[pending] = Committed(-1, None, keys, dict(pending.descriptor))
        return accepted

    def validate_read_only(self, check: TxnValidation) -> Exception | None:
        """The error, or None, for a transaction without writes that read
        in-flight commits (all of them settled by now): were its reads one
        serializable view? Nothing is committed either way."""
        with self._lock:
            self._collect()
            return self._check(check, {})

    def _check(self, check: TxnValidation, earlier_in_group: dict[Any, Committed]) -> Exception | None:
        if check.txn_id not in self._running or check.deadline <= time.monotonic():
            return TransactionExpiredError(f"transaction {check.txn_id} outlived its TTL before it could commit")
        if check.start_seq < self._horizon:
            return SnapshotTooOldError(
                f"transaction {check.txn_id} started at seq {check.start_seq}, before versions this handle "
                f"could not read (GC removed them while it was idle); retry it"
            )
        serializable = check.isolation == SERIALIZABLE
        own_seqs: set[int] = set()
        own_in_group: set[Any] = set()
        for ancestor in check.ancestors:
            if ancestor.error is not None or (ancestor.finished and not ancestor.committed):
                return ConflictError(
                    f"transaction {check.txn_id} read the writes of a commit in flight that did not commit "
                    f"({type(ancestor.error).__name__}: {ancestor.error}); retry it"
                )
            if ancestor.committed:
                own_seqs.add(ancestor.seq)
            elif ancestor in earlier_in_group:
                own_in_group.add(ancestor)
            else:  # cannot happen (the committer orders groups); never guess
                return ConflictError(
                    f"transaction {check.txn_id} read the writes of a commit in flight whose outcome is "
                    "unknown at its validation; retry it"
                )
        # Only commits after the snapshot can conflict: walk the (ascending)
        # history from its newest end and stop at the snapshot, instead of
        # testing every entry a long-running transaction keeps alive.
        candidates: list[Committed] = []
        for committed in reversed(self._committed):
            if committed.seq <= check.start_seq:
                break
            if committed.seq not in own_seqs:
                candidates.append(committed)
        candidates.reverse()
        candidates.extend(c for p, c in earlier_in_group.items() if p not in own_in_group)
        for committed in candidates:
            clash = committed.keys & check.write_keys
            if clash:
                return _conflict("write-write conflict on key", committed, key=min(clash))
            if not serializable:
                continue
            clash = committed.keys & check.read_keys
            if clash:
                return _conflict("read-write conflict on key", committed, key=min(clash))
            for key_range in check.read_ranges:
                for key in sorted(committed.keys):
                    if _in_range(key, key_range):
                        return _conflict(
                            f"phantom: key {key!r} written inside scanned range "
                            f"[{key_range[0]!r}, {key_range[1]!r})",
                            committed,
                            key_range=key_range,
                        )
        return None


def _lock_keys(descriptor: dict[str, Any]) -> list[bytes]:
    """Keys a committed transaction read with get_for_update (``lock_keys``, hex)."""
    keys = descriptor.get("lock_keys")
    if not isinstance(keys, list):
        return []
    try:
        return [bytes.fromhex(key) for key in keys if isinstance(key, str)]
    except ValueError:  # the root passed its checksum: a writer bug; keep going
        return []


def _conflict(
    what: str, winner: Committed, *, key: bytes | None = None, key_range: KeyRange | None = None
) -> ConflictError:
    """A ConflictError naming the winner, with the structured fields set."""
    where = (
        f"a transaction committed at seq {winner.seq} (version {winner.version})"
        if winner.version is not None
        else "a transaction committed just before it in the same group"
    )
    subject = f" {key!r}" if key is not None else ""
    return ConflictError(
        f"{what}{subject} with {where}",
        key=key,
        range=key_range,
        version=winner.version,
        descriptor=winner.descriptor,
    )
