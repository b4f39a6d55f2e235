"""Every exception the engine raises, under one root: ``StoreError``.

Bad arguments are not store errors: they raise ``TypeError``/``ValueError``
with a message naming the argument.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Final, Mapping


class StoreError(Exception):
    """Root of all lakekv engine errors; catch this to catch any of them."""


class ObjectStoreError(StoreError):
    """A backend call failed; the backend's own exception is the ``__cause__``."""


class DirectGetUnavailableError(ObjectStoreError):
    """A signed one-request S3 GET (:mod:`kvstore.objstore.s3_direct_get`) could
    not answer: another status, a missing bucket, a transport error. The store
    asks s3fs instead; it never reaches a caller of the store."""


class NotWrittenError(ObjectStoreError):
    """A write failed before its object could exist under its name (e.g. the disk
    was full while the bytes went to a temp file): the storage certainly holds
    nothing new from this call. A plain :class:`ObjectStoreError` from a write
    leaves that open (the object may have landed)."""


class CorruptionError(StoreError):
    """A file failed its checksum or structural checks; names the file and block."""


class StoreClosedError(StoreError):
    """The store (or a view of it) was used after ``close()``."""


class CommitError(StoreError):
    """A commit could not be made durable (e.g. it lost the version race too often).

    Unless it is a :class:`CommitNotLandedError`, the commit may still have
    landed (its message says so): reopen to find out."""


class CommitNotLandedError(CommitError):
    """A commit certainly did not land: the storage refused its root file before
    the file could exist (e.g. the disk is full), or it could not be encoded.
    No version holds its writes; writing it again cannot duplicate it."""


class TreeChangedError(CommitError):
    """A flush or compaction lost to another one that changed the tree first; redo it."""


class EditConflictError(TreeChangedError):
    """A flush's or compaction's inputs are gone from the tree: another one won."""


class StaleOutputError(EditConflictError):
    """Flush/compaction outputs got older than half the GC grace period before
    their commit: GC may already have taken them, so they are dropped."""


class CompactionAbortedError(StoreError):
    """A compaction was stopped (the store is closing); its outputs are deleted."""


class InjectedFaultError(ObjectStoreError):
    """A fault injected by :class:`~kvstore.objstore.faulty.FaultyStore` (tests)."""


class CrashedError(ObjectStoreError):
    """The FaultyStore has "crashed": no call reaches storage any more (tests)."""


class CheckFailedError(StoreError):
    """A ``lakekv doctor`` check found the object store unsafe; the message says how."""


class ConflictError(StoreError):
    """A transaction conflicted with a committed one; retrying it may succeed.

    Attributes (keyword arguments of the constructor, each None when unknown):
        key: the conflicting key, when a single key conflicted.
        range: the scanned range ``(start, end)`` (None = unbounded side) a
            winning write fell into, when a range conflicted.
        version: the version of the winning commit.
        descriptor: the winning commit's descriptor as stored in its root
            file (``"op"``, ``"seq"``, ``"summary"`` when it had one, ...).
    """

    def __init__(
        self,
        message: str = "",
        *,
        key: bytes | None = None,
        range: tuple[bytes | None, bytes | None] | None = None,  # noqa: A002 - the catalog's field name
        version: int | None = None,
        descriptor: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.key = key
        self.range = range
        self.version = version
        self.descriptor = descriptor

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only fields survive pickling (errors cross process pools).
        return (self.__class__, self.args, dict(self.__dict__))


class LockTimeoutError(ConflictError):
    """``get_for_update`` waited longer than its timeout for a key another
    transaction of this handle holds; ``key`` names it. Roll back and retry
    (``Store.run`` does); the lock wait never decides a conflict by itself."""


class DeadlockError(ConflictError):
    """``get_for_update`` would have waited in a cycle (each transaction
    holding a key the next one waits for); raised at once to the transaction
    that closed the cycle, ``key`` names the key it asked for. Roll back and
    retry (``Store.run`` does)."""


class TransactionExpiredError(StoreError):
    """A transaction outlived its TTL and can no longer read or commit."""


class TransactionClosedError(StoreError):
    """A transaction was used after commit or rollback."""


class SnapshotTooOldError(StoreError):
    """The requested version or snapshot has been dropped by retention."""


class PreconditionFailedError(StoreError):
    """A compare-and-set's compare failed: the key is not at the revision the write required.

    Not a conflict: running the write again fails the same way until the
    caller reads the key again and decides anew.

    Attributes:
        key: the key whose compare failed.
        expected: the revision (seq) the write required; None for "absent".
        actual: the key's revision when compared; None when it had no value.
    """

    def __init__(self, message: str = "", *, key: bytes | None = None, expected: int | None = None,
                 actual: int | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.expected = expected
        self.actual = actual

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, self.args, dict(self.__dict__))


class EndedLeaseError(Exception):
    """A conditional or leased write met a key of a lease that has ended (``lease``), not yet reaped.

    Raised inside :func:`kvstore.cas.apply`, which revokes the lease and tries
    again; it never reaches a caller of the public API.
    """

    def __init__(self, lease: int) -> None:
        super().__init__(f"lease {lease} has ended; its keys are not yet deleted")
        self.lease = lease


class LeaseNotFoundError(StoreError):
    """The lease does not exist: it expired, was revoked, or was never granted. ``lease`` names it."""

    def __init__(self, message: str = "", *, lease: int | str | None = None) -> None:
        super().__init__(message)
        self.lease = lease

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, self.args, dict(self.__dict__))


# Old names of classes renamed so that every exception's name ends in Error,
# kept for one release (CHANGELOG.md): importing one still works but warns.
RENAMED: Final[dict[str, type[StoreError]]] = {
    "EditConflict": EditConflictError,
    "CompactionAborted": CompactionAbortedError,
    "InjectedFault": InjectedFaultError,
    "CheckFailed": CheckFailedError,
}


def deprecated_name(
    module: str, name: str, exported: frozenset[str], renamed: Mapping[str, type[Exception]] = RENAMED
) -> type[Exception]:
    """The class old name ``name`` (one of ``exported``) now has, warning that ``module.name`` goes away.

    For a module-level ``__getattr__`` (PEP 562), which Python calls only
    for names the module does not define; any other name raises
    ``AttributeError`` as a missing attribute would. ``renamed`` maps old
    names to classes: the engine's :data:`RENAMED` by default (the catalog
    passes its own, ``catalog.errors.RENAMED``).

    Raises:
        AttributeError: ``name`` is not one of ``exported``.
    """
    if name not in exported:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    new = renamed[name]
    # stacklevel 3: past this function and the module's __getattr__, to the
    # line that used the old name.
    warnings.warn(
        f"{module}.{name} is deprecated: it was renamed {new.__name__}; the old name goes in the next release",
        DeprecationWarning,
        stacklevel=3,
    )
    return new


# Hidden from the type checker so that it reports an old name in checked code
# as missing instead of typing every unknown attribute of this module.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> type[StoreError]:
        return deprecated_name(__name__, name, frozenset(RENAMED))
