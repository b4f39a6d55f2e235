"""Catalog operations inside a durable transaction.

:class:`DurableCatalogTransaction` is a :class:`~.manager.DurableTransaction`
that is also a :class:`~catalog.session.CatalogSession`: every namespace,
table and view method works on it. An operation

1. is applied to a *view* of the transaction: a throw-away lakekv
   transaction on the newest version with the staged operations of the
   transaction and its ancestors re-applied in order (so it validates against,
   and later reads see, what the transaction already did), doing its data
   work (writing Parquet files) once;
2. then, in one SERIALIZABLE lakekv transaction, takes its implicit locks
   (:mod:`.implicit`) and appends its JSON record to the transaction's staged
   operations. If a lock is refused nothing is staged and its files are deleted.

Nothing reaches the catalog's keys before the topmost commit, which applies
every staged record in one lakekv version (:mod:`.lake`).

A snapshot lock on a table freezes it: ``load_table`` of that table reads as
of the version the lock was taken, and writes to it are refused by the lock
rules (snapshot forbids shared and exclusive in the same transaction).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow.compute as pc

from catalog.arguments import checked
from catalog import names
from catalog.access import CatalogReader, CatalogWriter
from catalog.datafiles import discard_files
from catalog.context import LakeContext
from catalog.durable import keys, lifecycle, locks
from catalog.durable.implicit import implicit_locks
from catalog.durable.manager import DurableTransaction, TransactionManager
from catalog.durable.records import SNAPSHOT, TxnRecord
from catalog.durable.work import Work
from catalog.errors import StaleDataFileError
from catalog.freshness import publish_deadline
from catalog.ops import CheckRead, Op, from_record
from catalog.planning import prune
from catalog.session import CatalogSession
from catalog.table import Table
from kvstore.errors import StaleOutputError

log = logging.getLogger(__name__)


class DurableCatalogTransaction(DurableTransaction, CatalogSession):
    """A durable transaction with the catalog's methods (see the module docstring)."""

    def __init__(self, manager: TransactionManager, ctx: LakeContext, txid: str) -> None:
        DurableTransaction.__init__(self, manager, txid)
        self._ctx = ctx  # the lakehouse's store and data files; staged ops apply with it
        self.objects = ctx.objects
        self.target_file_bytes = ctx.target_file_bytes

    # -- CatalogSession hooks ----------------------------------------------------

    @contextmanager
    @checked
    def reading(self) -> Iterator[CatalogReader]:
        """The newest catalog with this transaction's (and its ancestors') staged operations applied.

        Raises TransactionStateError (or TransactionExpiredError) unless the transaction is active.
        """
        self.manager.run(lambda work: lifecycle.require_active(work, self.id))
        txn = self._ctx.store.begin(isolation="snapshot", fresh=True)
        try:
            writer = CatalogWriter(txn)
            raw = txn.get(keys.txn_key(self.id))
            assert raw is not None, "require_active saw the record"
            for txid in (*TxnRecord.decode(raw).ancestors, self.id):
                for _, op_raw in txn.scan(prefix=keys.op_prefix(txid)):
                    op = from_record(json.loads(op_raw))
                    if not isinstance(op, CheckRead):  # writes nothing; checked against committed data only
                        op.apply(writer, self._ctx, rebase=False)
            yield writer
        finally:
            txn.rollback()

    @checked
    def check_writable(self) -> None:
        """Raise TransactionStateError (or TransactionExpiredError) unless the transaction is active."""
        self.manager.run(lambda work: lifecycle.require_active(work, self.id))

    @contextmanager
    def _committed(self) -> Iterator[CatalogReader]:
        """The newest committed catalog, without this transaction's staged operations."""
        self.manager.run(lambda work: lifecycle.require_active(work, self.id))
        txn = self._ctx.store.begin(isolation="snapshot", fresh=True)
        try:
            yield CatalogWriter(txn)
        finally:
            txn.rollback()

    @checked
    def submit(self, op: Op) -> None:
        """Stage ``op`` in this transaction, taking its implicit locks; nothing reaches the catalog before the commit.

        Raises:
            LockConflictError: an implicit lock is refused (nothing is staged, its files are deleted).
            StaleDataFileError: its data files got too old to publish before staging.
        """
        try:
            # A read check is about committed data (what a query read at a lakehouse version), not
            # about what this transaction staged: it checks, and at the commit applies, before them.
            with self._committed() if isinstance(op, CheckRead) else self.reading() as view:
                op.apply(view, self._ctx, rebase=False)  # type: ignore[arg-type]
            requests = implicit_locks(op)
            record = op.to_record()
            store = self._ctx.store
            files = op.new_files()

            def stage(work: Work) -> None:
                lifecycle.require_active(work, self.id)
                for request in requests:
                    lifecycle.lock(work, self.id, *request, waitable=False, implicit=True)
                lifecycle.stage_op(work, self.id, record)
                # Staged files count as referenced (lake.gc's staged_paths), so
                # the rule applies now, as it would to a commit (catalog.freshness).
                deadline = publish_deadline(store, self.objects, files)
                if deadline is not None:
                    work.txn.publish_by(deadline)

            try:
                self.manager.run(stage, keep_cleanup=False)
            except StaleOutputError as exc:
                raise StaleDataFileError(
                    f"staging {op.kind} of {op.object_name!r} into durable transaction {self.id} could not be "
                    "published before its data files got older than half the GC grace period; write the data again"
                ) from exc
        except BaseException:
            discard_files(self.objects, op.new_paths(), "its staging failed")
            raise
        return None

    # -- reads that respect snapshot locks -----------------------------------------

    @checked
    def load_table(self, name: str) -> Table:
        """The table as this transaction sees it (frozen at its snapshot lock's version, if it holds one).

        Raises:
            TypeError: ``name`` is not a str.
            ValueError: a malformed name.
            NoSuchTableError: no such table at the transaction's view.
        """
        version = self._snapshot_version(name)
        if version is None:
            return CatalogSession.load_table(self, name)
        ns, short = names.split_table_name(name)
        frozen = FrozenSession(self, version)
        with frozen.reading() as reader:
            pointer, definition = reader.require_table(ns, short)
            properties = reader.table_properties(pointer.id)
        return Table(frozen, ns, short, definition, properties)

    def _snapshot_version(self, node: str) -> int | None:
        def find(work: Work) -> int | None:
            related = work.related(self.id)
            for lock in locks.node_locks(work, node):
                if lock.txn in related and lock.mode == SNAPSHOT:
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
            NoSuchTableError: ``name`` was not a table at ``version``.
            RetryableConflictError: it already changed.
        """
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise TypeError(f"version must be a lakehouse version (an int >= 0), got {version!r}")
        if filter is not None and not isinstance(filter, pc.Expression):
            raise TypeError(f"filter must be a pyarrow.compute.Expression or None, got {type(filter).__name__}")
        ns, short = names.split_table_name(name)
        table = FrozenSession(self, version).load_table(name)  # the table as the lakehouse held it at ``version``
        files = table.files()
        selected = prune(files, table.schema, filter)
        self.submit(CheckRead(ns, short, table.id, [f.id for f in files], [f.id for f in selected], filter))

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


class FrozenSession(CatalogSession):
    """Reads as of one version (a snapshot lock's); writes go to the transaction, whose locks refuse them."""

    def __init__(self, owner: DurableCatalogTransaction, version: int) -> None:
        self._owner = owner
        self.version = version
        self.objects = owner.objects
        self.target_file_bytes = owner.target_file_bytes

    @contextmanager
    @checked
    def reading(self) -> Iterator[CatalogReader]:
        """A catalog reader at the snapshot lock's version."""
        with self._owner._ctx.store.at(version=self.version) as snapshot:
            yield CatalogReader(snapshot)

    @checked
    def check_writable(self) -> None:
        """As the owning transaction's ``check_writable``."""
        self._owner.check_writable()

    @checked
    def submit(self, op: Op) -> Any:
        """Stage ``op`` in the owning transaction, whose lock rules refuse writes to a frozen table.

        Raises:
            TypeError: ``op`` is not an op.
            LockConflictError, StaleDataFileError: as for :meth:`DurableCatalogTransaction.submit`.
        """
        return self._owner.submit(op)
