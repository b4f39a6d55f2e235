"""Leases: keys that live as long as their lease does (etcd's leases, on the engine's per-key expiry).

A lease is a record with an expiry; a key put with the lease carries the same
expiry, so when the lease expires its keys vanish for every reader at once,
in every process, with nothing to run. ``keepalive()`` moves the expiry of
the record and of every key still attached, in one transaction; ``revoke()``
deletes them all in one. Records live under the reserved prefix
``b"\\x00lakekv/"``:

* ``lease/<id>``: JSON ``{"ttl_ms", "expire_ms"}``, expiring with the lease;
* ``lease/<id>/k/<key>``: one per key put with the lease;
* ``lease-of/<key>``: the lease the key was last put with.

A key stays attached while it is still the lease's: last put with it and
carrying its expiry. A later put without the lease (or with another) takes
it away, and keepalive leaves it alone. Expiry is judged by each reader's
clock, as for any TTL: keep clocks synced and TTLs far above their skew.
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
MAX_LEASE_TTL_S: Final = 100 * 366 * 24 * 3600.0

# run(fn): fn(txn) in a SERIALIZABLE transaction on the newest version, committed, retried on conflict.
Run = Callable[[Callable[[Any], Any]], Any]


def _text(lease_id: LeaseId) -> bytes:
    """How an id is written in keys: decimal for an int64, as is for an older lease's 32 hex characters
    (never 32 decimal digits: an int64 has at most 19)."""
    return str(lease_id).encode()


def _id_of(text: bytes) -> LeaseId:
    decoded = text.decode()
    return int(decoded) if len(decoded) <= 19 and decoded.isdigit() else decoded


def _record_key(lease_id: LeaseId) -> bytes:
    return _LEASE + _text(lease_id)


def _attached_prefix(lease_id: LeaseId) -> bytes:
    return _LEASE + _text(lease_id) + b"/k/"


def _check_ttl(ttl: object) -> int:
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl <= MAX_LEASE_TTL_S:
        raise ValueError(f"a lease's ttl must be a number of seconds > 0 and at most 100 years, not {ttl!r}")
    return max(1, int(ttl * 1000))


def _record(txn: Any, lease_id: LeaseId) -> dict[str, int]:
    raw = txn.get(_record_key(lease_id))
    if raw is None:
        raise LeaseNotFoundError(f"lease {lease_id} has expired or was revoked (or was never granted)", lease=lease_id)
    record: dict[str, int] = json.loads(raw)
    return record


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
        lease_id = secrets.randbits(63)

    def create(txn: Any) -> None:
        expire = now_ms() + ttl_ms
        txn.put(_record_key(lease_id), json.dumps({"ttl_ms": ttl_ms, "expire_ms": expire}).encode(), expire_at_ms=expire)

    run(create)
    return Lease(run, lease_id, ttl_ms)


def remaining(run: Run, lease_id: LeaseId) -> float:
    expire: int = run(lambda txn: _record(txn, lease_id))["expire_ms"]
    return max(0.0, (expire - now_ms()) / 1000)


def every(run: Run) -> list[Lease]:
    """Every lease alive now (etcd's LeaseLeases), by id."""

    def records(txn: Any) -> list[Lease]:
        found = []
        for key, raw in txn.scan(prefix=_LEASE):
            lease_id = key[len(_LEASE):]
            if b"/" not in lease_id:  # a record, not one of its attachments (lease/<id>/k/<key>)
                found.append(Lease(run, _id_of(lease_id), json.loads(raw)["ttl_ms"]))
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
    txn.put(key, value, expire_at_ms=expire)
    txn.put(_OWNER + key, _text(lease_id), expire_at_ms=expire)
    txn.put(_attached_prefix(lease_id) + key, b"", expire_at_ms=expire)


def _attached(txn: Any, lease_id: LeaseId) -> list[bytes]:
    prefix = _attached_prefix(lease_id)
    return [key[len(prefix):] for key, _ in txn.scan(prefix=prefix)]


def _still_attached(txn: Any, lease_id: LeaseId, key: bytes) -> bool:
    """The key was last put with this lease and still carries its expiry (no later plain put)."""
    expire = _record(txn, lease_id)["expire_ms"]
    return bool(txn.get(_OWNER + key) == _text(lease_id) and txn.expires_at(key) == expire)


def keepalive(run: Run, lease_id: LeaseId) -> float:
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


def revoke(run: Run, lease_id: LeaseId) -> None:
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
