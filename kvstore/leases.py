"""Leases: keys that live as long as their lease does (etcd's leases), with no write to the keys on keepalive.

A lease is a record holding its deadline; a key put with the lease carries
the lease's id in its engine expiry field (:func:`marker`: a time far beyond
any real one, so the engine itself never expires it). Reads are lease-aware
(:mod:`kvstore.lease_reads`): a value whose row carries a marker is shown only
while its lease's record says the lease lives. So ``keepalive()`` writes the
record alone (no key is rewritten, no watcher hears a "put"), and when a
lease's deadline passes its keys vanish for every reader at once, in every
process. ``revoke()`` deletes the record and every key still attached in one
commit; :func:`reap` does the same for each lease whose deadline has passed
(one delete commit per lease, as etcd's lessor revokes), run by the store's
background housekeeping and by ``lakekv serve``. Records live under the
reserved prefix ``b"\\x00lakekv/"``:

* ``lease/<id>``: JSON ``{"ttl_ms", "expire_ms"}``, kept until revoked or reaped;
* ``lease/<id>/k/<key>``: one per key put with the lease.

A key stays attached while it is still the lease's: last put with it (its row
carries the lease's marker). A later put without the lease (or with another)
takes it away. Expiry is judged by each reader's clock, as for any TTL: keep
clocks synced and TTLs far above their skew.

Leases granted before this model (32-hex ids) keep theirs: their keys carry
the lease's deadline as a plain engine expiry, and a keepalive moves it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Any, Final

from kvstore.batch import LeaseId
from kvstore.errors import LeaseNotFoundError
from kvstore.reader import now_ms

RESERVED: Final = b"\x00lakekv/"
_LEASE: Final = RESERVED + b"lease/"
_OWNER: Final = RESERVED + b"lease-of/"
RECORDS_PREFIX: Final = _LEASE  # every lease record and attachment key starts with it
MAX_LEASE_TTL_S: Final = 100 * 366 * 24 * 3600.0
# A leased key's engine expiry is MARKER_BASE + its lease id: beyond any real time (year 146 million),
# so the engine never expires it, and it names the lease. Ids are below 2**62 so that it fits an int64.
MARKER_BASE: Final = 1 << 62
ID_BITS: Final = 62


def clock_ms() -> int:
    """The lease clock, ms since the epoch (module-level so that tests and tools can move it)."""
    return now_ms()


def marker(lease_id: int) -> int:
    """The engine expiry a key attached to ``lease_id`` carries."""
    return MARKER_BASE + lease_id


def lease_of_expiry(expire: int | None) -> int | None:
    """The lease a row's engine expiry names, or None for a row with no lease."""
    return expire - MARKER_BASE if expire is not None and expire >= MARKER_BASE else None


def record_key(lease_id: LeaseId) -> bytes:
    """The store key of a lease's record."""
    return _LEASE + _text(lease_id)


def deadline_of(raw: bytes) -> int:
    """The deadline (ms since the epoch) in a lease record's bytes."""
    return int(json.loads(raw)["expire_ms"])

# run(fn): fn(txn) in a SERIALIZABLE transaction on the newest version, committed, retried on conflict.
Run = Callable[[Callable[[Any], Any]], Any]


def _text(lease_id: LeaseId) -> bytes:
    """How an id is written in keys: decimal for an int64, as is for an older lease's 32 hex characters
    (never 32 decimal digits: an int64 has at most 19)."""
    return str(lease_id).encode()


def _id_of(text: bytes) -> LeaseId:
    decoded = text.decode()
    return int(decoded) if len(decoded) <= 19 and decoded.isdigit() else decoded


_record_key = record_key


def _attached_prefix(lease_id: LeaseId) -> bytes:
    return _LEASE + _text(lease_id) + b"/k/"


def _check_ttl(ttl: object) -> int:
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl <= MAX_LEASE_TTL_S:
        raise ValueError(f"a lease's ttl must be a number of seconds > 0 and at most 100 years, not {ttl!r}")
    return max(1, int(ttl * 1000))


def _record(txn: Any, lease_id: LeaseId) -> dict[str, int]:
    """The record of a live lease. Raises LeaseNotFoundError once it is gone or its deadline has passed."""
    raw = txn.get(_record_key(lease_id))
    record: dict[str, int] | None = None if raw is None else json.loads(raw)
    if record is None or record["expire_ms"] <= clock_ms():
        raise LeaseNotFoundError(f"lease {lease_id} has expired or was revoked (or was never granted)", lease=lease_id)
    return record


def _is_marked(lease_id: LeaseId) -> bool:
    """True for a lease whose keys carry its marker (int ids); older 32-hex leases put their deadline on keys."""
    return isinstance(lease_id, int)


class Lease:
    """A granted lease: ``keepalive()`` before it expires, ``revoke()`` to end it with its keys."""

    def __init__(self, run: Run, lease_id: LeaseId, ttl_ms: int) -> None:
        self._run = run
        self.id = lease_id
        self.ttl = ttl_ms / 1000

    def keepalive(self) -> float:
        """Restart the lease's ttl (and its keys'); return the seconds until it expires now.

        Raises:
            LeaseNotFoundError: it has already expired or was revoked (its keys are gone).
        """
        return keepalive(self._run, self.id)

    def revoke(self) -> None:
        """Delete the lease and every key still attached to it, in one commit. A no-op if it is already gone."""
        revoke(self._run, self.id)

    def remaining(self) -> float:
        """The seconds until the lease expires, read without extending it (etcd's TimeToLive).

        Raises:
            LeaseNotFoundError: it has already expired or was revoked.
        """
        return remaining(self._run, self.id)

    def keys(self) -> list[bytes]:
        """The keys attached to the lease now."""

        def attached(txn: Any) -> list[bytes]:
            _record(txn, self.id)
            return [key for key in _attached(txn, self.id) if _still_attached(txn, self.id, key)]

        return self._run(attached)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"Lease({self.id}, ttl={self.ttl:g}s)"


def grant(run: Run, ttl: object) -> Lease:
    """A new lease that expires ``ttl`` seconds from now unless kept alive."""
    ttl_ms = _check_ttl(ttl)
    lease_id = 0
    while not lease_id:  # an int64 > 0, as etcd's ids
        lease_id = secrets.randbits(ID_BITS)  # below 2**62: marker() must fit an int64

    def create(txn: Any) -> None:
        expire = clock_ms() + ttl_ms
        # No engine expiry: an expired record must stay readable until reap() deletes its keys.
        txn.put(_record_key(lease_id), json.dumps({"ttl_ms": ttl_ms, "expire_ms": expire}).encode())

    run(create)
    return Lease(run, lease_id, ttl_ms)


def remaining(run: Run, lease_id: LeaseId) -> float:
    expire: int = run(lambda txn: _record(txn, lease_id))["expire_ms"]
    return max(0.0, (expire - clock_ms()) / 1000)


def every(run: Run) -> list[Lease]:
    """Every lease alive now (etcd's LeaseLeases), by id."""

    def records(txn: Any) -> list[Lease]:
        found = []
        for key, raw in txn.scan(prefix=_LEASE):
            lease_id = key[len(_LEASE):]
            record = json.loads(raw) if b"/" not in lease_id else None  # not an attachment (lease/<id>/k/<key>)
            if record is not None and record["expire_ms"] > clock_ms():
                found.append(Lease(run, _id_of(lease_id), record["ttl_ms"]))
        return found

    return run(records)  # type: ignore[no-any-return]


def attach(run: Run, lease_id: LeaseId) -> Lease:
    """A handle on an existing lease (granted by any process)."""
    record = run(lambda txn: _record(txn, lease_id))
    return Lease(run, lease_id, record["ttl_ms"])


def attach_in(txn: Any, key: bytes, value: bytes, lease_id: LeaseId) -> None:
    """Inside ``txn``: put ``key = value`` attached to the lease (its expiry, its bookkeeping).

    Raises:
        LeaseNotFoundError: the lease has expired or was revoked.
    """
    expire = _record(txn, lease_id)["expire_ms"]
    if isinstance(lease_id, int):  # a marked lease (_is_marked)
        txn.put(key, value, expire_at_ms=marker(lease_id))
        txn.put(_attached_prefix(lease_id) + key, b"")
        return
    txn.put(key, value, expire_at_ms=expire)
    txn.put(_OWNER + key, _text(lease_id), expire_at_ms=expire)
    txn.put(_attached_prefix(lease_id) + key, b"", expire_at_ms=expire)


def _attached(txn: Any, lease_id: LeaseId) -> list[bytes]:
    prefix = _attached_prefix(lease_id)
    return [key[len(prefix):] for key, _ in txn.scan(prefix=prefix)]


def _still_attached(txn: Any, lease_id: LeaseId, key: bytes) -> bool:
    """The key was last put with this lease (no later plain put, or put with another lease)."""
    if isinstance(lease_id, int):  # a marked lease (_is_marked)
        return bool(txn.expires_at(key) == marker(lease_id))
    expire = _record(txn, lease_id)["expire_ms"]
    return bool(txn.get(_OWNER + key) == _text(lease_id) and txn.expires_at(key) == expire)


def keepalive(run: Run, lease_id: LeaseId) -> float:
    if _is_marked(lease_id):
        return _keepalive_record(run, lease_id)

    def extend(txn: Any) -> float:
        record = _record(txn, lease_id)
        expire = now_ms() + record["ttl_ms"]
        for key in _attached(txn, lease_id):
            attachment = _attached_prefix(lease_id) + key
            if _still_attached(txn, lease_id, key):
                txn.put(key, txn.get(key), expire_at_ms=expire)
                txn.put(_OWNER + key, _text(lease_id), expire_at_ms=expire)
                txn.put(attachment, b"", expire_at_ms=expire)
            else:
                txn.delete(attachment)
        txn.put(_record_key(lease_id), json.dumps({"ttl_ms": record["ttl_ms"], "expire_ms": expire}).encode(),
                expire_at_ms=expire)
        return (expire - now_ms()) / 1000

    return run(extend)  # type: ignore[no-any-return]


def _keepalive_record(run: Run, lease_id: LeaseId) -> float:
    """Move the record's deadline: the only write of a keepalive (the keys name the lease, not a time).

    A keepalive whose commit lands after the old deadline gives up and revokes: a reader may
    already have judged the lease expired, and a lease never comes back to life after that
    (as :class:`service.etcd.lease_table.LeaseTable` does).
    """
    old: list[int] = []

    def extend(txn: Any) -> int:
        record = _record(txn, lease_id)
        old[:] = [record["expire_ms"]]
        expire = clock_ms() + record["ttl_ms"]
        txn.put(_record_key(lease_id), json.dumps({"ttl_ms": record["ttl_ms"], "expire_ms": expire}).encode())
        return expire

    expire: int = run(extend)
    if clock_ms() >= old[0]:
        revoke(run, lease_id)
        raise LeaseNotFoundError(f"lease {lease_id} expired before its keepalive committed", lease=lease_id)
    return (expire - clock_ms()) / 1000


def revoke_if_expired(run: Run, lease_id: LeaseId) -> bool:
    """Revoke ``lease_id`` (one commit) if its deadline has passed; False if it was gone or kept alive."""
    return _is_marked(lease_id) and _delete_lease(run, lease_id, only_expired=True)


def reap(run: Run) -> list[LeaseId]:
    """Revoke every lease whose deadline has passed, one commit each (etcd's lessor); the ids revoked."""

    def expired(txn: Any) -> list[LeaseId]:
        now = clock_ms()
        return [_id_of(key[len(_LEASE):]) for key, raw in txn.scan(prefix=_LEASE)
                if b"/" not in key[len(_LEASE):] and json.loads(raw)["expire_ms"] <= now]

    reaped = []
    for lease_id in run(expired):
        if _is_marked(lease_id) and _delete_lease(run, lease_id, only_expired=True):
            reaped.append(lease_id)
    return reaped


def _delete_lease(run: Run, lease_id: LeaseId, only_expired: bool) -> bool:
    """Delete the record and the keys still attached, in one commit; False if there was nothing to delete
    (or, with ``only_expired``, the lease was kept alive meanwhile)."""

    def end(txn: Any) -> bool:
        raw = txn.get(_record_key(lease_id))
        if raw is None:
            return False
        if only_expired and deadline_of(raw) > clock_ms():
            return False
        for key in _attached(txn, lease_id):
            if _still_attached(txn, lease_id, key):
                txn.delete(key)
            txn.delete(_attached_prefix(lease_id) + key)
        txn.delete(_record_key(lease_id))
        return True

    return bool(run(end))


def revoke(run: Run, lease_id: LeaseId) -> None:
    if _is_marked(lease_id):
        _delete_lease(run, lease_id, only_expired=False)
        return

    def end(txn: Any) -> None:
        try:
            _record(txn, lease_id)
        except LeaseNotFoundError:
            return  # expired: its keys are already gone for every reader
        for key in _attached(txn, lease_id):
            if _still_attached(txn, lease_id, key):
                txn.delete(key)
                txn.delete(_OWNER + key)
            txn.delete(_attached_prefix(lease_id) + key)
        txn.delete(_record_key(lease_id))

    run(end)
