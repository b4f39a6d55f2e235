"""Durable transactions of one lakehouse: the catalog side of the topmost commit, and gc.

``lake.begin_durable/attach/transactions/locks`` delegate to a :class:`DurableLake`
(one per :class:`~catalog.lakehouse.Lakehouse` handle). At a topmost commit,
:func:`catalog.transactions.apply_staged` re-applies every staged operation
record to the catalog inside the very lakekv transaction that marks the
transaction committed and releases its locks: the whole durable transaction
becomes ONE lakehouse version, listed in ``lake.history()`` like any other
commit. An operation whose premise a commit from outside the lock protocol
broke fails the commit with a conflict error instead of applying wrongly;
the transaction stays active and can be aborted.

A :class:`DurableLake` is given the lakehouse's
:class:`~catalog.context.LakeContext` (store, data files), not the
lakehouse. GC keeps the files staged operations name (:func:`staged_paths`)
and deletes those of transactions that ended without committing
(:meth:`DurableLake.collect`).
"""

from __future__ import annotations

import functools
import json
from typing import Any

from catalog.context import LakeContext
from catalog.datafiles import discard_files
from catalog.durable import keys, lifecycle
from catalog.durable.manager import DurableTransaction, TransactionManager
from catalog.durable.records import ABORTED, ACTIVE, EXPIRED, LockRecord, TxnRecord
from catalog.durable.session import DurableCatalogTransaction
from catalog.durable.work import Work
from catalog.ops import from_record
from catalog.transactions import apply_staged
from kvstore.store import Store


class DurableLake:
    """The durable transactions and locks stored in one lakehouse."""

    def __init__(self, ctx: LakeContext, **manager_options: Any) -> None:
        self.context = ctx
        self.manager = TransactionManager(ctx.store, apply_ops=functools.partial(apply_staged, ctx), **manager_options)

    def begin(
        self, timeout: float | None = None, parent: DurableTransaction | str | None = None, title: str | None = None
    ) -> DurableCatalogTransaction:
        """See :meth:`.manager.TransactionManager.begin`; the handle also has the catalog's methods.

        Raises:
            TypeError, ValueError: a bad ``timeout``, ``parent`` or ``title``.
            TransactionStateError, DurableTransactionExpiredError: the parent is not active.
        """
        return DurableCatalogTransaction(self.manager, self.context, self.manager.begin(timeout, parent, title).id)

    def attach(self, txid: str) -> DurableCatalogTransaction:
        """A handle (with the catalog's methods) on the existing transaction ``txid``.

        Raises:
            TypeError / ValueError: ``txid`` is not 32 lowercase hex digits.
            TransactionStateError: no such transaction in this store.
        """
        return DurableCatalogTransaction(self.manager, self.context, self.manager.attach(txid).id)

    def transactions(self, include_finished: bool = False) -> list[TxnRecord]:
        """The transaction records, oldest first (finished ones too with ``include_finished``); see :meth:`.manager.TransactionManager.transactions`."""
        return self.manager.transactions(include_finished)

    def locks(self, node: str) -> list[LockRecord]:
        """The locks on ``node`` in queue order; see :meth:`.manager.TransactionManager.locks`.

        Raises:
            TypeError / ValueError: a bad node name.
        """
        return self.manager.locks(node)

    # -- gc ----------------------------------------------------------------------------

    def collect(self, dry_run: bool = False) -> list[str]:
        """Delete the staged files of aborted and expired transactions, then their records; return the paths.

        Expired transactions nobody noticed yet are finished first. Files go
        before the records that name them, so a crash in between leaves
        records whose files are already gone, which the next run skips.
        """
        finished = self.manager.run(_finish_dead_and_list_finished_ops)
        paths = [path for _, records in finished for op in records for path in from_record(op).new_paths()]
        if dry_run or not finished:
            return paths
        discard_files(self.context.objects, paths, "its transaction ended without committing them")

        def forget(work: Work) -> None:
            for txid, _ in finished:
                for key, _value in list(work.txn.scan(prefix=keys.op_prefix(txid))):
                    work.txn.delete(key)

        self.manager.run(forget)
        return paths


def _finish_dead_and_list_finished_ops(work: Work) -> list[tuple[str, list[dict[str, Any]]]]:
    for _, raw in work.txn.scan(prefix=keys.TXN_PREFIX):
        record = TxnRecord.decode(raw)
        if record.state == ACTIVE and work.is_dead(record.id):
            lifecycle.settle(work, lifecycle.finish_dead(work, record.id))
    by_txn: dict[str, list[dict[str, Any]]] = {}
    for key, raw in work.txn.scan(prefix=keys.OP_PREFIX):
        txid = key[len(keys.OP_PREFIX) :].split(b"/", 1)[0].decode()
        by_txn.setdefault(txid, []).append(json.loads(raw))
    return [(txid, ops) for txid, ops in by_txn.items() if _is_finished(work, txid)]


def _is_finished(work: Work, txid: str) -> bool:
    record = work.record(txid)
    return record is None or record.state in (ABORTED, EXPIRED)


def staged_paths(store: Store) -> set[str]:
    """Every data file a staged operation in ``store`` names: ``lake.gc()`` keeps them (:func:`catalog.maintenance.gc`)."""
    paths: set[str] = set()
    with store.snapshot(fresh=True) as snapshot:
        for _, raw in snapshot.scan(prefix=keys.OP_PREFIX):
            paths.update(from_record(json.loads(raw)).new_paths())
    return paths
