"""etcd leases as records beside the store, so that a keepalive writes no key and bumps no revision.

etcd's lessor keeps each lease's deadline in the leader's memory; a keepalive
moves it without touching the keys, and a key put with the lease is visible
exactly while the lease lives. Here many stateless servers share one store, so
the deadline lives in one small object per lease next to the store's files
(``etcd-leases/<id as 16 hex digits>``, JSON ``{"id", "ttl", "expire_ms"}``),
written with a plain PUT. It is not a commit: granting or keeping a lease
alive changes no revision and sends no watch event, as in etcd. Every server
on the store reads the same object, so all agree on whether a lease lives.

Why caching a deadline is safe: the deadline of a lease id only moves
forward. A keepalive sets ``now + ttl``, later than before. Revoking deletes
the keys in a commit, then replaces the record with a tombstone
(``etcd-leases-revoked/<id>``) that keeps the old deadline until it passes,
and a client that grants the same id again before then gets a deadline no
earlier than the old one. So a deadline some server cached, still in the
future, proves the lease alive (or its keys deleted already); only when it
has passed is the object read again before the lease is called expired.
Writes never trust the cache: a put with a lease reads the record
(:meth:`LeaseTable.live`), so no key is attached to a revoked lease.

Why a late keepalive gives up: a keepalive checks the lease is alive, then
writes the new deadline. If the write finishes after the old deadline, a
reader on another server may already have judged the lease expired (and
handed its lock to a waiter), so :meth:`LeaseTable.keepalive` reports the
lease gone (:class:`~service.etcd.errors.EtcdLeaseLateError`) and the caller revokes it: a lease
never comes back to life after anyone saw it dead.

Deadlines are read on each server's wall clock, as for every TTL in lakekv:
keep clocks synced and TTLs far above their skew.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Callable, Final

from kvstore.objstore.base import ObjectStore
from service.etcd.errors import (
    EtcdLeaseExistsError,
    EtcdLeaseLateError,
    EtcdLeaseNotFoundError,
    EtcdLeaseTTLTooLargeError,
)

LEASE_DIR: Final = "etcd-leases/"
REVOKED_DIR: Final = "etcd-leases-revoked/"
# etcd's bounds: a TTL below the minimum (1.5 election timeouts, 2 s with etcd's defaults) is raised to
# it; one above MaxLeaseTTL is refused.
MIN_TTL_S: Final = 2
MAX_TTL_S: Final = 9_000_000_000
_ID_MASK: Final = (1 << 64) - 1


def _now_ms() -> int:
    return int(time.time() * 1000)


def _path(lease_id: int, directory: str = LEASE_DIR) -> str:
    # Unsigned hex: etcd ids are int64 and may be negative when a client picks them.
    return f"{directory}{lease_id & _ID_MASK:016x}"


def _id_of(path: str, directory: str = LEASE_DIR) -> int | None:
    name = path[len(directory):]
    if len(name) != 16:
        return None
    try:
        value = int(name, 16)
    except ValueError:
        return None
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass(frozen=True)
class LeaseRecord:
    id: int
    ttl: int  # the granted TTL in seconds
    expire_ms: int

    def remaining_s(self, now_ms: int) -> int:
        """Whole seconds left (etcd truncates), 0 at the deadline."""
        return max(0, (self.expire_ms - now_ms) // 1000)

    def encode(self) -> bytes:
        return json.dumps({"id": self.id, "ttl": self.ttl, "expire_ms": self.expire_ms}).encode()

    @staticmethod
    def decode(raw: bytes) -> LeaseRecord:
        data = json.loads(raw)
        return LeaseRecord(int(data["id"]), int(data["ttl"]), int(data["expire_ms"]))


def check_lease_id(lease_id: object, what: str = "lease id") -> int:
    """An etcd lease id: an int64."""
    if isinstance(lease_id, bool) or not isinstance(lease_id, int):
        raise TypeError(f"{what} must be an int64, not {type(lease_id).__name__}")
    if not -(1 << 63) <= lease_id < 1 << 63:
        raise ValueError(f"{what} must be an int64, got {lease_id}")
    return lease_id


class LeaseTable:
    """The leases of one store, read and written through its object store.

    Thread-safe. ``clock`` returns wall-clock milliseconds (tests may pass their own).
    """

    def __init__(self, objects: ObjectStore, clock: Callable[[], int] = _now_ms) -> None:
        self._objects = objects
        self._clock = clock
        self._lock = threading.Lock()
        self._deadlines: dict[int, int] = {}  # lease id -> a deadline it had (never later than its real one)

    def now_ms(self) -> int:
        return self._clock()

    # -- reads ---------------------------------------------------------------

    def get(self, lease_id: int) -> LeaseRecord | None:
        """The lease's record as stored now, or None if it was never granted or is gone (expired or not)."""
        try:
            raw = self._objects.get(_path(lease_id))
        except FileNotFoundError:
            with self._lock:
                self._deadlines.pop(lease_id, None)
            return None
        record = LeaseRecord.decode(raw)
        self._remember(record)
        return record

    def live(self, lease_id: int) -> LeaseRecord:
        """The record of a lease that is alive now.

        Raises:
            EtcdLeaseNotFoundError: it was never granted, was revoked, or its deadline has passed.
        """
        record = self.get(lease_id)
        if record is None or record.expire_ms <= self._clock():
            raise EtcdLeaseNotFoundError()
        return record

    def is_alive(self, lease_id: int) -> bool:
        """Whether a key attached to this lease is visible now (no I/O while a cached deadline is ahead)."""
        with self._lock:
            cached = self._deadlines.get(lease_id)
        if cached is not None and cached > self._clock():
            return True
        record = self.get(lease_id)
        return record is not None and record.expire_ms > self._clock()

    def ids(self) -> list[int]:
        """Every lease with a record (alive, or expired and not yet swept), as etcd's LeaseLeases lists them."""
        return [lease_id for meta in self._objects.list(LEASE_DIR) if (lease_id := _id_of(meta.path)) is not None]

    def expired(self) -> list[int]:
        """Leases whose deadline has passed: their keys are invisible and wait to be deleted."""
        now = self._clock()
        gone = []
        for lease_id in self.ids():
            with self._lock:
                cached = self._deadlines.get(lease_id)
            if cached is not None and cached > now:
                continue
            record = self.get(lease_id)
            if record is not None and record.expire_ms <= now:
                gone.append(lease_id)
        return gone

    def next_deadline_ms(self) -> int | None:
        """The earliest deadline this server knows of (when a sweep may next find work)."""
        with self._lock:
            return min(self._deadlines.values(), default=None)

    # -- writes --------------------------------------------------------------

    def grant(self, ttl: int, lease_id: int = 0) -> LeaseRecord:
        """A new lease of ``ttl`` seconds (etcd's bounds), with ``lease_id`` or, for 0, a fresh random id.

        An id revoked before its deadline keeps that deadline as a floor (see the module docstring).

        A record left by an expired lease with that id must be removed first (:meth:`remove`), after its keys.

        Raises:
            EtcdLeaseTTLTooLargeError: ``ttl`` is above etcd's MaxLeaseTTL.
            EtcdLeaseExistsError: ``lease_id`` already has a record.
        """
        if isinstance(ttl, bool) or not isinstance(ttl, int):
            raise TypeError(f"a lease TTL must be an int of seconds, not {type(ttl).__name__}")
        check_lease_id(lease_id)
        if ttl > MAX_TTL_S:
            raise EtcdLeaseTTLTooLargeError()
        ttl = max(ttl, MIN_TTL_S)
        while True:
            chosen = lease_id or secrets.randbits(63)
            if chosen == 0:
                continue
            record = LeaseRecord(chosen, ttl, max(self._clock() + ttl * 1000, self._revoked_deadline(chosen)))
            if self._objects.put_if_absent(_path(chosen), record.encode()):
                self._remember(record)
                return record
            if lease_id:
                raise EtcdLeaseExistsError()

    def keepalive(self, lease_id: int) -> LeaseRecord:
        """Move the lease's deadline to now + its TTL (never earlier); the keys stay as they are.

        Raises:
            EtcdLeaseNotFoundError: the lease is gone or its deadline has passed.
            EtcdLeaseLateError: the new deadline was written after the old one passed: revoke the lease.
        """
        old = self.live(lease_id)
        # Never earlier than before: other servers may have cached the old deadline (a re-granted id's floor).
        record = LeaseRecord(lease_id, old.ttl, max(self._clock() + old.ttl * 1000, old.expire_ms))
        self._objects.put(_path(lease_id), record.encode())
        if self._clock() >= old.expire_ms:
            raise EtcdLeaseLateError()
        self._remember(record)
        return record

    def remove(self, lease_id: int) -> None:
        """Forget the lease (after its keys were deleted). A no-op if it has no record.

        A lease removed before its deadline leaves a tombstone with that deadline (see the module docstring).
        """
        record = self.get(lease_id)
        if record is not None and record.expire_ms > self._clock():
            self._objects.put(_path(lease_id, REVOKED_DIR), record.encode())
        self._objects.delete(_path(lease_id))  # deleting a missing object is not an error (ObjectStore)
        with self._lock:
            self._deadlines.pop(lease_id, None)

    def _revoked_deadline(self, lease_id: int) -> int:
        """The deadline a revoked ``lease_id`` had, if it has not passed (else 0)."""
        try:
            return LeaseRecord.decode(self._objects.get(_path(lease_id, REVOKED_DIR))).expire_ms
        except FileNotFoundError:
            return 0

    def forget_tombstones(self) -> int:
        """Delete the tombstones whose deadline has passed (no cache can trust it any more); how many."""
        now = self._clock()
        forgotten = 0
        for meta in self._objects.list(REVOKED_DIR):
            try:
                record = LeaseRecord.decode(self._objects.get(meta.path))
            except FileNotFoundError:
                continue  # another server forgot it first
            if record.expire_ms <= now:
                self._objects.delete(meta.path)
                forgotten += 1
        return forgotten

    def _remember(self, record: LeaseRecord) -> None:
        with self._lock:
            if record.expire_ms > self._deadlines.get(record.id, -1):
                self._deadlines[record.id] = record.expire_ms
