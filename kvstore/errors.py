"""Every exception the engine raises, under one root: ``StoreError``.

Bad arguments are not store errors: they raise ``TypeError``/``ValueError``
with a message naming the argument.
"""

from __future__ import annotations


class StoreError(Exception):
    """Root of all lakekv engine errors; catch this to catch any of them."""


class ObjectStoreError(StoreError):
    """A backend call failed; the backend's own exception is the ``__cause__``."""


class CorruptionError(StoreError):
    """A file failed its checksum or structural checks; names the file and block."""


class StoreClosedError(StoreError):
    """The store (or a view of it) was used after ``close()``."""


class CommitError(StoreError):
    """A commit could not be made durable (e.g. it lost the version race too often)."""


class TreeChangedError(CommitError):
    """A flush or compaction lost to another one that changed the tree first; redo it."""


class ConflictError(StoreError):
    """A transaction conflicted with a committed one; retrying it may succeed."""


class TransactionExpiredError(StoreError):
    """A transaction outlived its TTL and can no longer read or commit."""


class TransactionClosedError(StoreError):
    """A transaction was used after commit or rollback."""


class SnapshotTooOldError(StoreError):
    """The requested version or snapshot has been dropped by retention."""
