"""Interactive transactions that live across HTTP requests.

Each transaction gets an unguessable id (128 random bits), so one client
cannot drive another's transaction by counting. A transaction is used by one
request at a time (its own lock), matching the engine's "one thread at a
time" rule. Finished ids are remembered for a while, so a late request gets
410 with the real reason (committed, rolled back, expired) rather than 404.

Thread-safety: every method may be called from any worker thread.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final, Iterator

from kvstore import Store, Transaction
from service.errors import ApiError

# Finished ids remembered for 410 answers; older ones fall back to 404.
_REMEMBER_FINISHED: Final = 100_000
# begin() sweeps expired transactions at most this often.
_SWEEP_INTERVAL_S: Final = 1.0


@dataclass
class _Open:
    txn: Transaction
    deadline: float  # time.monotonic() when its TTL runs out
    lock: threading.Lock = field(default_factory=threading.Lock)
    # The keys it writes: what its commit's Idempotency-Key record is
    # fingerprinted with (service.idempotency).
    writes: set[bytes] = field(default_factory=set)


class TxnRegistry:
    """The open interactive transactions of one server."""

    def __init__(self, store: Store, max_open: int, max_ttl_s: float) -> None:
        self._store = store
        self._max_open = max_open
        self._max_ttl_s = max_ttl_s
        self._lock = threading.Lock()
        self._open: dict[str, _Open] = {}
        self._finished: OrderedDict[str, str] = OrderedDict()  # id -> final state
        self._last_sweep = time.monotonic()

    def begin(self, isolation: str, ttl_s: float | None) -> tuple[str, Transaction]:
        """Start a transaction; return its id and the transaction.

        Raises:
            ApiError: 400 for a TTL above the cap, 503 when too many are open.
            ValueError: a bad isolation level (from the engine).
        """
        if ttl_s is None:
            ttl_s = self._max_ttl_s
        elif ttl_s > self._max_ttl_s:
            raise ApiError(400, "ValueError", f"ttl must be at most {self._max_ttl_s:g} seconds, got {ttl_s:g}")
        if time.monotonic() - self._last_sweep > _SWEEP_INTERVAL_S:
            self.sweep()
        with self._lock:
            if len(self._open) >= self._max_open:
                raise ApiError(503, "TooManyTransactionsError", f"{self._max_open} transactions are already open")
        txn = self._store.begin(isolation, ttl_s, fresh=True)
        txn_id = secrets.token_hex(16)
        with self._lock:
            self._open[txn_id] = _Open(txn, time.monotonic() + ttl_s)
        return txn_id, txn

    @contextmanager
    def use(self, txn_id: str) -> Iterator[Transaction]:
        """Hold transaction ``txn_id`` for one request; retire it if it finished.

        Raises:
            ApiError: 404 for an unknown id, 410 for a finished or expired one.
        """
        with self._lock:
            entry = self._open.get(txn_id)
            final = self._finished.get(txn_id) if entry is None else None
        if entry is None:
            if final == "expired":
                raise ApiError(410, "TransactionExpiredError", f"transaction {txn_id} outlived its TTL")
            if final is not None:
                raise ApiError(410, "TransactionClosedError", f"transaction {txn_id} is already {final}")
            raise ApiError(
                404, "NoSuchTransactionError",
                f"transaction {txn_id} is unknown to this server (expired long ago, or the server restarted)",
            )
        with entry.lock:
            try:
                yield entry.txn
            finally:
                if entry.txn.state != "active":
                    self._retire(txn_id, entry.txn.state)

    def note_write(self, txn_id: str, key: bytes) -> None:
        """Remember that the transaction writes (puts or deletes) ``key``, for its commit's fingerprint."""
        with self._lock:
            entry = self._open.get(txn_id)
            if entry is not None:
                entry.writes.add(key)

    def writes_fingerprint(self, txn_id: str) -> bytes | None:
        """A digest of the keys the transaction writes (None for an unknown id).

        Keys, not values: a client that re-runs a read-modify-write
        transaction after a lost answer writes other values to the same keys,
        and must be recognised as the same request; a transaction that writes
        other keys under the same Idempotency-Key is a different one.
        """
        with self._lock:
            entry = self._open.get(txn_id)
            if entry is None:
                return None
            keys = sorted(entry.writes)
        h = hashlib.sha256()
        for key in keys:
            h.update(len(key).to_bytes(4, "big") + key)
        return h.digest()

    def _retire(self, txn_id: str, state: str) -> None:
        with self._lock:
            if self._open.pop(txn_id, None) is not None:
                self._finished[txn_id] = state
                while len(self._finished) > _REMEMBER_FINISHED:
                    self._finished.popitem(last=False)

    def sweep(self) -> int:
        """Roll back and retire every transaction past its TTL; return how many."""
        now = time.monotonic()
        self._last_sweep = now
        with self._lock:
            expired = [(txn_id, entry) for txn_id, entry in self._open.items() if entry.deadline <= now]
        for txn_id, entry in expired:
            entry.txn.rollback()  # a no-op if the engine already expired it: only releases pins
            self._retire(txn_id, "expired")
        return len(expired)

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)

    def close(self) -> None:
        """Roll back every open transaction (server shutdown)."""
        with self._lock:
            entries = list(self._open.items())
        for txn_id, entry in entries:
            entry.txn.rollback()
            self._retire(txn_id, "rolled back")
