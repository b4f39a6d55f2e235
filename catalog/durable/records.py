"""The stored shapes of durable transactions, locks and the store-wide limits.

All three are JSON objects in the lakekv store (layout in :mod:`.keys`).
Stored field names and state strings are part of the on-disk format: never
rename them.

Time: every deadline is wall-clock milliseconds since the epoch, written by
the process that began or pinged the transaction and compared against the
wall clock of whichever process reads it. Different processes and machines
therefore agree on expiry only up to their clock skew. We assume NTP-synced
clocks (skew well under a second); a reader whose clock runs ``d`` ahead
expires transactions ``d`` early. Choose timeouts far above the skew and ping
at least every ``timeout / 3``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final

ACTIVE: Final = "active"
COMMITTED: Final = "committed"
ABORTED: Final = "aborted"
EXPIRED: Final = "expired"
TXN_STATES: Final = (ACTIVE, COMMITTED, ABORTED, EXPIRED)

# Lock modes (YTsaurus's names, public: ``tx.lock(node, "snapshot")``). A
# "snapshot" lock is not the engine's "snapshot" isolation level
# (kvstore.SNAPSHOT): hence the _LOCK suffix on these constants.
SNAPSHOT_LOCK: Final = "snapshot"
SHARED_LOCK: Final = "shared"
EXCLUSIVE_LOCK: Final = "exclusive"
LOCK_MODES: Final = (SNAPSHOT_LOCK, SHARED_LOCK, EXCLUSIVE_LOCK)

ACQUIRED: Final = "acquired"
PENDING: Final = "pending"


def _dumps(value: dict[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class DurableConfig:
    """Store-wide limits, stored once under ``sys/txn/config`` so every process applies the same ones."""

    # YTsaurus' default upper bound on a transaction's time to live.
    max_timeout_ms: int = 3_600_000
    # Used when begin() gets no timeout: long enough for interactive work, short
    # enough that a crashed client's locks come back within a minute.
    default_timeout_ms: int = 60_000
    # Bounds the size of one transaction's lock set (and so of its commit);
    # YTsaurus has the same kind of per-transaction limit.
    max_locks_per_txn: int = 10_000

    def encode(self) -> bytes:
        """The limits as stored: JSON bytes."""
        return _dumps(asdict(self))

    @classmethod
    def decode(cls, raw: bytes | None) -> DurableConfig:
        """The limits :meth:`encode` stored, or the defaults when none are stored (``raw`` is None)."""
        return cls() if raw is None else cls(**json.loads(raw))


@dataclass(frozen=True)
class TxnRecord:
    """One durable transaction. ``ancestors`` runs from the topmost transaction down to the parent."""

    id: str
    parent: str | None
    ancestors: tuple[str, ...]
    title: str | None
    timeout_ms: int
    start_ms: int
    last_ping_ms: int
    state: str = ACTIVE
    finish_ms: int | None = None

    @property
    def deadline_ms(self) -> int:
        """Wall-clock ms after which the transaction counts as expired (see the module docstring)."""
        return self.last_ping_ms + self.timeout_ms

    def state_at(self, now_ms: int) -> str:
        """The stored state, or ``"expired"`` if it is still stored active but its deadline has passed."""
        if self.state == ACTIVE and now_ms >= self.deadline_ms:
            return EXPIRED
        return self.state

    def with_state(self, state: str, now_ms: int) -> TxnRecord:
        """A copy in ``state``, finished at ``now_ms``."""
        return replace(self, state=state, finish_ms=now_ms)

    def pinged(self, now_ms: int) -> TxnRecord:
        """A copy last pinged at ``now_ms``."""
        return replace(self, last_ping_ms=now_ms)

    def encode(self) -> bytes:
        """The record as stored: JSON bytes."""
        value = asdict(self)
        value["ancestors"] = list(self.ancestors)
        return _dumps(value)

    @classmethod
    def decode(cls, raw: bytes) -> TxnRecord:
        """The record :meth:`encode` stored."""
        value = json.loads(raw)
        value["ancestors"] = tuple(value["ancestors"])
        return cls(**value)


@dataclass(frozen=True)
class LockRecord:
    """One lock on one node, acquired or pending; ``seq`` is its place in the node's queue.

    ``implicit`` marks a lock a catalog operation took (or used): the node has a
    staged change in the transaction, so the lock cannot be unlocked.
    ``version`` (snapshot locks only) is the lakekv version the lock froze:
    the transaction reads the node as of it.
    """

    id: str
    node: str
    seq: int
    txn: str
    mode: str
    state: str
    child_key: str | None = None
    attribute_key: str | None = None
    implicit: bool = False
    created_ms: int = field(default=0, compare=False)
    version: int | None = None

    @property
    def key(self) -> str | None:
        """The child or attribute key, whichever is set (at most one is)."""
        return self.child_key if self.child_key is not None else self.attribute_key

    @property
    def queue(self) -> tuple[str | None, str | None]:
        """Which FIFO queue of the node a pending lock waits in: one per child key, per attribute key, and one for keyless locks."""
        return (self.child_key, self.attribute_key)

    def describe(self) -> str:
        """The lock's mode with its key, for messages: ``shared(child_key='x')``."""
        if self.child_key is not None:
            return f"{self.mode}(child_key={self.child_key!r})"
        if self.attribute_key is not None:
            return f"{self.mode}(attribute_key={self.attribute_key!r})"
        return self.mode

    def encode(self) -> bytes:
        """The record as stored: JSON bytes."""
        return _dumps(asdict(self))

    @classmethod
    def decode(cls, raw: bytes) -> LockRecord:
        """The record :meth:`encode` stored."""
        return cls(**json.loads(raw))
