"""Catalog operations inside a durable transaction.

:class:`DurableCatalogTransaction` is a :class:`~.manager.DurableTransaction`
handle that is also the host of a :class:`~catalog.tree.LakeTree`: every
namespace, table and view method works on it. Its reads see the newest
catalog with the staged operations of the transaction and its ancestors
applied; its writes are *staged* with their implicit locks
(:func:`catalog.transactions.stage_durable`). Nothing reaches the catalog's
keys before the topmost commit, which applies every staged record in one
lakekv version (:func:`catalog.transactions.apply_staged`).

A snapshot lock on a table freezes it: ``load_table`` of that table reads as
of the version the lock was taken (a :class:`FrozenTableHost`), and writes to
it are refused by the lock rules (snapshot forbids shared and exclusive in
the same transaction).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pyarrow.compute as pc

from catalog import names
from catalog.access import CatalogReader
from catalog.arguments import checked
from catalog.context import LakeContext
from catalog.durable import lifecycle, locks
from catalog.durable.manager import DurableTransaction, TransactionManager
from catalog.durable.records import SNAPSHOT_LOCK
from catalog.durable.work import Work
from catalog.ops import CheckRead, Op
from catalog.planning import prune
from catalog.table import TableHost
from catalog.transactions import durable_view, stage_durable
from catalog.tree import LakeTree, TreeMethods

log = logging.getLogger(__name__)


class DurableCatalogTransaction(DurableTransaction, TreeMethods):
    """A durable transaction with the catalog's methods (see the module docstring)."""

    def __init__(self, manager: TransactionManager, ctx: LakeContext, txid: str) -> None:
        DurableTransaction.__init__(self, manager, txid)
        self.context = ctx  # the lakehouse's store and data files; staged ops apply with it
        self.objects = ctx.objects
        self.target_file_bytes = ctx.target_file_bytes
        self.tree = LakeTree(self, table_host=self._table_host)

    # -- the TableHost protocol ----------------------------------------------------

    @contextmanager
    @checked
    def reading(self) -> Iterator[CatalogReader]:
        """The newest catalog with this transaction's (and its ancestors') staged operations applied.

        Raises TransactionStateError (or DurableTransactionExpiredError) unless the transaction is active.
        """
        with durable_view(self.context, self.manager, self.id) as view:
            yield view

    @checked
    def resolving(self) -> AbstractContextManager[CatalogReader]:
        """As :meth:`reading`."""
        return self.reading()

    @checked
    def check_writable(self) -> None:
        """Raise TransactionStateError (or DurableTransactionExpiredError) unless the transaction is active."""
        self.manager.run(lambda work: lifecycle.require_active(work, self.id))

    @checked
    def submit(self, op: Op) -> None:
        """Stage ``op`` in this transaction, taking its implicit locks; nothing reaches the catalog before the commit.

        Raises:
            LockConflictError: an implicit lock is refused (nothing is staged, its files are deleted).
            StaleDataFileError: its data files got too old to publish before staging.
        """
        stage_durable(self.context, self.manager, self.id, op)

    # -- reads that respect snapshot locks -----------------------------------------

    def _table_host(self, name: str) -> TableHost:
        """Where table ``name`` is read: frozen at this transaction's snapshot lock on it, if any."""
        version = self._snapshot_version(name)
        return self if version is None else FrozenTableHost(self, version)

    def _snapshot_version(self, node: str) -> int | None:
        def find(work: Work) -> int | None:
            related = work.related(self.id)
            for lock in locks.node_locks(work, node):
                if lock.txn in related and lock.mode == SNAPSHOT_LOCK:
                    return lock.version
            return None

        return self.manager.run(find)  # type: ignore[no-any-return]

    @checked
    def require_unchanged(self, name: str, version: int, filter: pc.Expression | None = None) -> None:
        """Make this transaction's commit depend on what table ``name`` held at lakehouse ``version``.

        For a write computed from rows read there: the commit raises
        ``RetryableConflictError`` (and applies nothing) if, since
        ``version``, the table was dropped or replaced, or gained or lost a
        data file that may hold rows matching ``filter`` (every row if None),
        by commits of others: the check is made against the committed
        catalog, now and again in the commit (atomically with it, before the
        transaction's own operations), so a table this transaction itself
        replaces or writes can be checked too.

        Raises:
            TypeError: ``version`` is not an int >= 0, or ``filter`` not an expression.
            NoSuchTableError: ``name`` was not a table at ``version``.
            RetryableConflictError: it already changed.
        """
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise TypeError(f"version must be a lakehouse version (an int >= 0), got {version!r}")
        if filter is not None and not isinstance(filter, pc.Expression):
            raise TypeError(f"filter must be a pyarrow.compute.Expression or None, got {type(filter).__name__}")
        ns, short = names.split_table_name(name)
        # the table as the lakehouse held it at ``version``
        table = LakeTree(FrozenTableHost(self, version)).load_table(name)
        files = table.files()
        selected = prune(files, table.schema, filter)
        iceberg = table.metadata_location if table.format == "iceberg" else None
        self.submit(CheckRead(ns, short, table.id, [f.id for f in files], [f.id for f in selected], filter, iceberg))

    @checked
    def update_properties(self, name: str, updates: dict[str, str] | None = None, removals: list[str] | None = None) -> None:
        """Set and remove properties of table ``name`` in this transaction.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed name or property, or a property both updated and removed.
            NoSuchTableError: no such table.
            LockConflictError: an implicit lock is refused.
        """
        self.load_table(name).update_properties(updates, removals)


class FrozenTableHost:
    """Reads as of one version (a snapshot lock's); writes go to the transaction, whose locks refuse them."""

    def __init__(self, owner: DurableCatalogTransaction, version: int) -> None:
        self._owner = owner
        self.version = version
        self.objects = owner.objects
        self.target_file_bytes = owner.target_file_bytes

    @contextmanager
    def reading(self) -> Iterator[CatalogReader]:
        """A catalog reader at the snapshot lock's version."""
        with self._owner.context.store.at(version=self.version) as snapshot:
            yield CatalogReader(snapshot)

    def resolving(self) -> AbstractContextManager[CatalogReader]:
        """As :meth:`reading`."""
        return self.reading()

    def check_writable(self) -> None:
        """As the owning transaction's ``check_writable``."""
        self._owner.check_writable()

    def submit(self, op: Op) -> Any:
        """Stage ``op`` in the owning transaction, whose lock rules refuse writes to a frozen table.

        Raises:
            LockConflictError, StaleDataFileError: as for :meth:`DurableCatalogTransaction.submit`.
        """
        return self._owner.submit(op)
