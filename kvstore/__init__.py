"""lakekv engine: an LSM key-value store on object storage."""

from kvstore import errors
from kvstore.errors import (
    CommitError,
    ConflictError,
    CorruptionError,
    ObjectStoreError,
    SnapshotTooOldError,
    StoreClosedError,
    StoreError,
    TransactionClosedError,
    TransactionExpiredError,
)

__all__ = [
    "errors",
    "StoreError",
    "ObjectStoreError",
    "CorruptionError",
    "StoreClosedError",
    "CommitError",
    "ConflictError",
    "TransactionExpiredError",
    "TransactionClosedError",
    "SnapshotTooOldError",
]
