"""lakekv engine: an embedded LSM key-value store on object storage.

>>> import kvstore
>>> with kvstore.open("memory://doctest", poll_interval_s=0) as db:
...     seq = db.put(b"k", b"v")
...     db.get(b"k")
b'v'
"""

from kvstore import errors
from kvstore.api import KeyValueStore
from kvstore.batch import WriteBatch
from kvstore.errors import (
    CommitError,
    CommitNotLandedError,
    ConflictError,
    CorruptionError,
    DeadlockError,
    LeaseNotFoundError,
    LockTimeoutError,
    NotWrittenError,
    ObjectStoreError,
    PreconditionFailedError,
    SnapshotTooOldError,
    StoreClosedError,
    StoreError,
    TransactionClosedError,
    TransactionExpiredError,
)
from kvstore.history import VersionInfo
from kvstore.oracle import SERIALIZABLE, SNAPSHOT
from kvstore.snapshot import Snapshot
from kvstore.store import Store, open, open_embedded
from kvstore.txn import Transaction

__all__ = [
    "open",
    "open_embedded",
    "Store",
    "KeyValueStore",
    "Snapshot",
    "WriteBatch",
    "Transaction",
    "VersionInfo",
    "SNAPSHOT",
    "SERIALIZABLE",
    "errors",
    "StoreError",
    "ObjectStoreError",
    "NotWrittenError",
    "CorruptionError",
    "StoreClosedError",
    "CommitError",
    "CommitNotLandedError",
    "ConflictError",
    "LockTimeoutError",
    "DeadlockError",
    "TransactionExpiredError",
    "TransactionClosedError",
    "SnapshotTooOldError",
    "PreconditionFailedError",
    "LeaseNotFoundError",
]
