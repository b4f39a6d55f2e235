"""Every exception the catalog raises, under one root: ``CatalogError``.

``CatalogError`` subclasses :class:`kvstore.StoreError`, so ``except
kvstore.StoreError`` still catches everything lakekv raises. Bad arguments
(malformed names, wrong types) raise ``TypeError``/``ValueError`` naming the
argument, as in the engine. The two conflict errors subclass
:class:`kvstore.ConflictError` because they are conflicts first: code that
retries any ``ConflictError`` keeps working, and code that wants the catalog's
classification catches the subclass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from kvstore.errors import ConflictError, CorruptionError, StoreError, deprecated_name
from kvstore.errors import TransactionExpiredError as _KvTransactionExpiredError


class CatalogError(StoreError):
    """Root of all catalog errors."""


class ArgumentTypeError(TypeError):
    """A public method got an argument of the wrong type (see :mod:`catalog.arguments`).

    A plain ``TypeError`` to callers; the service answers it with 400, while
    any other ``TypeError`` reaching it is a bug (500).
    """


class NoSuchObjectError(CatalogError, LookupError):
    """A namespace, table or view does not exist (at the version read)."""


class NoSuchNamespaceError(NoSuchObjectError):
    """The namespace does not exist."""


class NoSuchTableError(NoSuchObjectError):
    """The table does not exist."""


class NoSuchViewError(NoSuchObjectError):
    """The view does not exist."""


class AlreadyExistsError(CatalogError):
    """An object of that name already exists."""


class NamespaceAlreadyExistsError(AlreadyExistsError):
    """The namespace already exists."""


class TableAlreadyExistsError(AlreadyExistsError):
    """A table or view of that name already exists in the namespace."""


class ViewAlreadyExistsError(AlreadyExistsError):
    """A view or table of that name already exists in the namespace."""


class NamespaceNotEmptyError(CatalogError):
    """``drop_namespace`` without ``cascade`` on a namespace that holds objects."""


class SchemaMismatchError(CatalogError, ValueError):
    """Data does not fit the table's schema; the message names the column and both types."""


class UnreadableMetadataError(CatalogError, ValueError):
    """An iceberg table's metadata location names no readable Iceberg metadata file."""


class ReadOnlyError(CatalogError):
    """A write through a read-only lakehouse view (``lake.at(...)``)."""


class CatalogConflictError(ConflictError, CatalogError):
    """A catalog operation lost to a concurrent commit; see the two subclasses.

    Attributes:
        ours: the kind of the operation that failed (``"append"``, ...).
        theirs: the kind of the winning operation, when known.
        object: the table, view or namespace both touched.
        version: the lakehouse version of the winning commit, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        ours: str,
        theirs: str | None = None,
        object: str | None = None,  # noqa: A002 - the catalog's own word for it
        version: int | None = None,
    ) -> None:
        super().__init__(message)
        self.ours = ours
        self.theirs = theirs
        self.object = object
        self.version = version


class RetryableConflictError(CatalogConflictError):
    """Redo the work against the new version: e.g. an overwrite raced an append.

    The operation could not be re-applied automatically without changing its
    meaning, but running it again on fresh data gives an equivalent result.
    """


class IncompatibleConflictError(CatalogConflictError):
    """The operation no longer makes sense: e.g. its table was dropped meanwhile."""


class StaleObservationError(Exception):
    """Raised by :meth:`catalog.ops.Op.apply` when what the op observed has changed: redo the work.

    Internal: the commit paths (:mod:`catalog.transactions`)
    turn it into :class:`RetryableConflictError` naming the op. Deliberately
    not a :class:`CatalogError`: an ``except CatalogError`` between the op
    and the commit loop must not swallow it.
    """


# -- durable transactions and locks (catalog/durable/) -------------------------


class LockConflictError(CatalogError):
    """A lock cannot be taken: names the node, the requested mode and key, and the holding transaction.

    Attributes:
        node: the locked node ("sales.eu.orders").
        mode: the requested mode ("snapshot", "shared" or "exclusive").
        key: the requested child_key or attribute_key, if any.
        holder: the id of the transaction whose lock is in the way (None when
            the lock itself is gone, e.g. a pending lock of a finished transaction).
    """

    def __init__(self, message: str, *, node: str, mode: str, key: str | None, holder: str | None) -> None:
        super().__init__(message)
        self.node = node
        self.mode = mode
        self.key = key
        self.holder = holder


class DurableTransactionExpiredError(CatalogError, _KvTransactionExpiredError):
    """A durable transaction (or an ancestor) passed its deadline without a ping; it counts as aborted.

    Also a :class:`kvstore.TransactionExpiredError` (an optimistic engine
    transaction that outlived its TTL), so code catching that one catches
    both. Named ``TransactionExpiredError`` before issue 24; the old name
    still imports, with a ``DeprecationWarning``, for one release.
    """


class TransactionStateError(CatalogError):
    """Not allowed in the transaction's state: commit after abort, commit with an open child, unlock of a changed node, ..."""


class StaleDataFileError(CatalogError):
    """A commit or staged operation names a data file GC may take (see :mod:`catalog.freshness`).

    The file is missing, or older than half the GC grace period, or the
    commit could not be published before it got that old. Nothing was
    committed; write the data again and commit the new files.

    Attributes:
        path: the data file's object path (None when the commit as a whole missed its deadline).
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class CorruptDataFileError(CatalogError, CorruptionError):
    """A data file is not the file its catalog entry describes: wrong size or CRC32C, or undecodable.

    A :class:`kvstore.CorruptionError` too. The message names the file and, where known, the table.

    Attributes:
        path: the data file's object path.
        table: the table's name, when the reader knew it.
    """

    def __init__(self, message: str, *, path: str, table: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.table = table


# Old names of classes renamed so that each name has one meaning (issue 24),
# kept for one release (CHANGELOG.md): importing one still works but warns.
class NonAppendVersionError(CatalogError, ValueError):
    """A read of appended rows over a range of versions holds one that deleted or changed rows (``catalog.changes``)."""

    def __init__(self, message: str, *, version: int, kind: str) -> None:
        super().__init__(message)
        self.version = version
        self.kind = kind


# The same mechanism as kvstore.errors.RENAMED (kvstore.errors.deprecated_name), for the catalog's names.
RENAMED: Final[dict[str, type[CatalogError]]] = {
    "TransactionExpiredError": DurableTransactionExpiredError,
}


# Hidden from the type checker so that it reports an old name in checked code
# as missing instead of typing every unknown attribute of this module.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> type[Exception]:
        return deprecated_name(__name__, name, frozenset(RENAMED), RENAMED)
