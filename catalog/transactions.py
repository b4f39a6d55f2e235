"""Staging, rebase and commit for the three kinds of catalog transaction.

Every catalog change is a list of :mod:`catalog.ops` records, and there are
three ways to commit one:

* **direct** (:class:`LiveHost`, what ``lake.create_table`` and
  ``table.append`` use): the op is applied in a fresh lakekv transaction and
  committed at once as one lakehouse version (:func:`commit_ops`);
* **multi-table** (:class:`OpenTransaction`, ``with lake.transaction() as tx``):
  ops are applied to one open lakekv transaction as they come and commit
  together;
* **durable** (``lake.begin_durable()``, :mod:`catalog.durable`): ops are checked
  against the transaction's view and *staged* as records with their
  implicit locks (:func:`stage_durable`); the topmost commit applies them all
  in the lakekv transaction that marks it committed (:func:`apply_staged`).

Direct and multi-table commits share :func:`commit_ops`: one SERIALIZABLE
(or SNAPSHOT) lakekv transaction, committed with a summary of the
operations, which ``lake.history()`` reads back. Before it is sent, the
commit must not break a live durable lock (:func:`catalog.durable.guard.check_plain_commit`)
nor publish data files GC may already take (:mod:`catalog.freshness`).
When it loses to a concurrent commit, the pair of operations decides
(:func:`catalog.conflicts.classify`): rebase — start a fresh transaction on
the newest version, repeat the caller's recorded reads (they must return the
same), re-apply every op with ``rebase=True``, commit again, at most
``max_rebases`` times with the engine's jittered backoff — or raise
:class:`~catalog.errors.RetryableConflictError` /
:class:`~catalog.errors.IncompatibleConflictError`. Data files written for a
commit that finally fails are deleted (best effort; ``lake.gc()`` removes any
left behind once they are older than the grace period).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Sequence

from catalog.access import CatalogReader, CatalogWriter
from catalog.arguments import checked
from catalog.conflicts import FAIL, RETRY, classify
from catalog.context import Context, LakeContext
from catalog.datafiles import discard_files
from catalog.durable import keys as durable_keys
from catalog.durable import lifecycle, locks
from catalog.durable.guard import check_plain_commit
from catalog.durable.implicit import implicit_locks, removed_nodes
from catalog.durable.manager import TransactionManager
from catalog.durable.records import TxnRecord
from catalog.durable.work import Work
from catalog.errors import (
    CatalogConflictError,
    CatalogError,
    IncompatibleConflictError,
    RetryableConflictError,
    SchemaMismatchError,
    StaleDataFileError,
    StaleObservationError,
)
from catalog.freshness import publish_deadline
from catalog.ops import CheckRead, Op, from_record
from kvstore.backoff import backoff_delay
from kvstore.errors import ConflictError, StaleOutputError, TransactionClosedError
from kvstore.store import Store
from kvstore.txn import Transaction

log = logging.getLogger(__name__)

MAX_REBASES = 20
# Between rebases (kvstore.backoff's formula): a rebase re-applies the ops,
# so the first wait is short and the cap is a fifth of a second.
REBASE_BACKOFF_MIN_S = 0.002
REBASE_BACKOFF_MAX_S = 0.2


@dataclass
class Outcome:
    version: int
    summaries: list[dict[str, Any]]


def begin(store: Store, isolation: str, fresh: bool | None = None) -> tuple[Transaction, CatalogWriter]:
    """A transaction and its writer; ``fresh`` as ``Store.begin`` (None: the store's
    read consistency, so a first attempt starts at every acknowledged commit)."""
    txn = store.begin(isolation=isolation, fresh=fresh)
    return txn, CatalogWriter(txn)


def apply_one(op: Op, w: CatalogWriter, ctx: Context, rebase: bool, where: str = "") -> dict[str, Any]:
    """Apply one op; a precondition it observed that no longer holds is a retryable conflict.

    Returns the op's summary. ``where`` prefixes the conflict's message (e.g.
    which durable transaction the op was staged in).

    Raises:
        RetryableConflictError: what the op observed has changed.
        CatalogError (e.g. NoSuchTableError, TableAlreadyExistsError): the op does not apply.
    """
    try:
        return op.apply(w, ctx, rebase)
    except StaleObservationError as exc:
        raise RetryableConflictError(f"{where}{exc}", ours=op.kind, object=op.object_name) from None


def apply_all(ops: Sequence[Op], w: CatalogWriter, ctx: Context, rebase: bool) -> list[dict[str, Any]]:
    """Apply ``ops`` in order with :func:`apply_one`; returns their summaries.

    Raises:
        RetryableConflictError, CatalogError: as for :func:`apply_one`.
    """
    summaries = []
    for op in ops:
        summaries.append(apply_one(op, w, ctx, rebase))
    return summaries


def _theirs(exc: ConflictError, ours: Op, related_only: bool = False) -> tuple[str | None, int | None]:
    """The winning operation's kind (on our object if possible; with ``related_only``, else None) and version."""
    version = getattr(exc, "version", None)
    descriptor = getattr(exc, "descriptor", None) or {}
    theirs = ((descriptor.get("summary") or {}).get("ops")) or []
    table_id = getattr(ours, "table_id", None)
    for op in theirs:
        if _related(op.get("object"), ours.object_name) or (table_id is not None and op.get("table_id") == table_id):
            return op.get("kind"), version
    return (theirs[0].get("kind") if theirs and not related_only else None), version


def _related(a: str | None, b: str) -> bool:
    """The same object, or a namespace and something inside it."""
    return a is not None and (a == b or a.startswith(b + ".") or b.startswith(a + "."))


def commit_ops(
    ctx: LakeContext,
    ops: Sequence[Op],
    *,
    isolation: str = "serializable",
    started: tuple[Transaction, CatalogWriter] | None = None,
    recorded: list[tuple[str, bytes, bytes]] | None = None,
    summaries: list[dict[str, Any]] | None = None,
    max_rebases: int = MAX_REBASES,
) -> Outcome:
    """Apply ``ops`` and commit them as one lakehouse version.

    ``started`` is a transaction the ops were already applied to (with their
    ``summaries``), as a multi-table transaction does; ``recorded`` are the
    caller's own reads in it, repeated on every rebase. Every attempt checks
    the durable locks (:func:`~catalog.durable.guard.check_plain_commit`)
    before it is sent.

    Raises:
        RetryableConflictError, IncompatibleConflictError: a concurrent commit won
            and the ops could not be rebased over it, or ``max_rebases`` ran out
            (see :mod:`catalog.conflicts`).
        LockConflictError: a durable transaction's lock forbids the ops.
        StaleDataFileError: a new data file is too old to commit safely (see
            :mod:`catalog.freshness`).
        CatalogError: an op does not apply (e.g. NoSuchTableError).
    """
    store = ctx.store
    unsettled = False  # a commit that failed other than by conflict may have landed
    lost: ConflictError | None = None  # the conflict we are rebasing over
    try:
        if started is None:
            txn, w = begin(store, isolation)
            try:
                summaries = apply_all(ops, w, ctx, rebase=False)
            except BaseException:
                txn.rollback()
                raise
        else:
            txn, w = started
            assert summaries is not None
        for attempt in range(max_rebases + 1):
            _check_durable_locks(txn, w, ops)  # refuses before anything is sent: settled
            _require_fresh_files(store, ctx, txn, ops)  # likewise
            try:
                txn.set_summary({"ops": bounded(summaries)})
                txn.commit()
                version = txn.commit_version if txn.commit_version is not None else txn.version
                return Outcome(version, summaries)
            except StaleOutputError as exc:  # missed the deadline in the queue: not sent, settled
                raise StaleDataFileError(
                    f"{_names(ops)} could not be published before its data files got older than half the "
                    f"GC grace period (gc_grace_s={store.options.gc_grace_s:g} s); write the data again and commit"
                ) from exc
            except ConflictError as exc:
                txn.rollback()
                lost = exc
                if isinstance(exc, CatalogConflictError):
                    raise
                _decide(exc, ops)
                if attempt == max_rebases:
                    raise RetryableConflictError(
                        f"{_names(ops)} lost {max_rebases + 1} races in a row; retry later",
                        ours=ops[0].kind if ops else "transaction",
                        version=getattr(exc, "version", None),
                    ) from exc
            except BaseException:
                unsettled = txn.state == "failed"  # the commit itself failed (not a rejection)
                raise
            time.sleep(backoff_delay(attempt, REBASE_BACKOFF_MIN_S, REBASE_BACKOFF_MAX_S))
            txn, w = begin(store, isolation, fresh=True)
            try:
                if recorded and not w.reads_unchanged(recorded):
                    raise RetryableConflictError(
                        "the transaction read data that a concurrent commit changed; run it again",
                        ours=ops[0].kind if ops else "read",
                    )
                summaries = apply_all(ops, w, ctx, rebase=True)
            except BaseException as exc:
                txn.rollback()
                raise _rebase_failure(exc, ops, lost) from exc
        raise AssertionError("unreachable")  # the loop returns or raises
    except BaseException:
        # If it landed, its entries point at the new files: keep them (gc() removes them if not).
        if not unsettled:
            discard_written(ctx, ops)
        raise


def _require_fresh_files(store: Store, ctx: Context, txn: Transaction, ops: Sequence[Op]) -> None:
    """Refuse files GC may take, and make the commit publish before it could (see catalog.freshness)."""
    try:
        deadline = publish_deadline(store, ctx.objects, [f for op in ops for f in op.new_files()])
        if deadline is not None:
            txn.publish_by(deadline)
    except BaseException:
        txn.rollback()
        raise


def _check_durable_locks(txn: Transaction, w: CatalogWriter, ops: Sequence[Op]) -> None:
    """A plain commit must not break a durable transaction's lock; a refusal rolls the transaction back."""
    try:
        check_plain_commit(w, ops)
    except BaseException:
        txn.rollback()
        raise


# The engine keeps a commit's summary in its root file, up to 64 KiB.
SUMMARY_BUDGET = 48 * 1024


def bounded(summaries: list[dict[str, Any]], budget: int = SUMMARY_BUDGET) -> list[dict[str, Any]]:
    """The op summaries, cut to fit the root file: a huge transaction (thousands of
    creates) keeps its first summaries and one ``"more"`` entry with the totals of the rest."""
    sizes = [len(json.dumps(s, separators=(",", ":"))) + 1 for s in summaries]
    if sum(sizes) <= budget:
        return summaries
    kept: list[dict[str, Any]] = []
    used = 512  # room for the "more" entry
    for summary, size in zip(summaries, sizes):
        if used + size > budget:
            break
        kept.append(summary)
        used += size
    rest = summaries[len(kept) :]
    more: dict[str, Any] = {"kind": "more", "object": None, "operations": len(rest)}
    for key in ("files_added", "files_removed", "rows_added", "rows_removed"):
        more[key] = sum(int(s.get(key, 0) or 0) for s in rest)
    more["kinds"] = sorted({str(s.get("kind")) for s in rest})[:20]
    return kept + [more]


def _names(ops: Sequence[Op]) -> str:
    if len(ops) == 1:
        return f"{ops[0].kind} of {ops[0].object_name!r}"
    return f"transaction of {len(ops)} operations"


def _decide(exc: ConflictError, ops: Sequence[Op]) -> None:
    """Raise the classified error unless every op may be rebased over the winner."""
    for op in ops:
        theirs, version = _theirs(exc, op)
        # A winner on another object reached us through something we read (a
        # listing, another table): rebase, which re-checks those reads.
        outcome = classify(op.kind, _theirs(exc, op, related_only=True)[0])
        if outcome == RETRY:
            raise RetryableConflictError(
                f"{op.kind} of {op.object_name!r} conflicts with a concurrent {theirs} (version {version}); "
                "redo it on the new data",
                ours=op.kind,
                theirs=theirs,
                object=op.object_name,
                version=version,
            ) from exc
        if outcome == FAIL:
            raise IncompatibleConflictError(
                f"{op.kind} of {op.object_name!r} is incompatible with a concurrent {theirs} (version {version})",
                ours=op.kind,
                theirs=theirs,
                object=op.object_name,
                version=version,
            ) from exc


def _rebase_failure(exc: BaseException, ops: Sequence[Op], lost: ConflictError | None = None) -> BaseException:
    """What a failed re-application means to the caller."""
    op = ops[0] if ops else None
    ours = op.kind if op else "transaction"
    obj = op.object_name if op else None
    if isinstance(exc, (CatalogConflictError,)):
        return _name_winner(exc, ops, lost)
    if isinstance(exc, (CatalogError, SchemaMismatchError, ValueError)):
        return _name_winner(IncompatibleConflictError(
            f"after a concurrent commit, {_names(ops)} no longer applies: {exc}", ours=ours, object=obj
        ), ops, lost)
    return exc


def _name_winner(error: CatalogConflictError, ops: Sequence[Op], lost: ConflictError | None) -> CatalogConflictError:
    """An error raised while rebasing names the commit we lost to (its kind and version)."""
    op = next((o for o in ops if o.object_name == error.object), ops[0] if ops else None)
    if lost is not None and op is not None and error.theirs is None and error.version is None:
        error.theirs, error.version = _theirs(lost, op)
    return error


def discard_written(ctx: Context, ops: Sequence[Op], why: str = "its commit failed") -> None:
    """Delete the files ``ops`` wrote for a commit that will not happen (best effort, see
    :func:`catalog.datafiles.discard_files`)."""
    discard_files(ctx.objects, [path for op in ops for path in op.new_paths()], why)



# -- direct: each op is one commit ---------------------------------------------------


class LiveHost:
    """The live lakehouse as a :class:`~catalog.table.TableHost`: reads see the newest
    version this handle knows, each write commits at once and returns its version."""

    def __init__(self, ctx: LakeContext) -> None:
        self.context = ctx
        self.objects = ctx.objects
        self.target_file_bytes = ctx.target_file_bytes

    @contextmanager
    def reading(self) -> Iterator[CatalogReader]:
        """A catalog reader on one snapshot of the newest version this handle knows."""
        with self.context.store.snapshot() as snap:
            yield CatalogReader(snap)

    def resolving(self) -> AbstractContextManager[CatalogReader]:
        """As :meth:`reading` (only a multi-table transaction tells the two apart)."""
        return self.reading()

    def submit(self, op: Op) -> int:
        """Commit ``op`` as one lakehouse version and return it.

        Raises:
            RetryableConflictError, IncompatibleConflictError: it lost to a concurrent commit
                (see :mod:`catalog.conflicts`).
            LockConflictError: a durable transaction's lock forbids it.
        """
        return commit_ops(self.context, [op]).version

    def check_writable(self) -> None:
        """The live lakehouse always takes writes: never raises."""
        return None


# -- multi-table: ops applied to one open transaction, committed together ---------------


class OpenTransaction:
    """An open multi-table transaction as a :class:`~catalog.table.TableHost`: ops are
    applied to one lakekv transaction as they come (later reads see them) and commit together.

    The caller's reads (loading tables, scans, listings) are recorded so that
    a rebase after a lost race can prove they still hold.
    :class:`catalog.lakehouse.LakeTransaction` adds the tree's methods.
    """

    def __init__(self, ctx: LakeContext, isolation: str) -> None:
        self.context = ctx
        self.isolation = isolation
        self.objects = ctx.objects
        self.target_file_bytes = ctx.target_file_bytes
        self._txn: Transaction = ctx.store.begin(isolation=isolation)
        self._writer = CatalogWriter(self._txn)
        self._writer.recorded = []
        self._ops: list[Op] = []
        self._summaries: list[dict[str, Any]] = []
        self.state = "active"
        self.version: int | None = None

    # -- the TableHost protocol --

    @contextmanager
    @checked
    def reading(self) -> Iterator[CatalogReader]:
        """The transaction's own view (its changes so far); raises TransactionClosedError once it ended."""
        self._check_active()
        yield self._writer

    @contextmanager
    @checked
    def resolving(self) -> Iterator[CatalogReader]:
        """Like :meth:`reading`, for looking an object up to act on it (``load_table``).

        These reads are not recorded as the caller's: what an operation needs
        of the table it acts on, each op re-checks itself when rebased (its
        id, its schema), so a concurrent property or compatible schema change
        does not turn ``tx.load_table(t).append(x)`` into a conflict that
        ``t.append(x)`` would not have.
        """
        self._check_active()
        recorded, self._writer.recorded = self._writer.recorded, None
        try:
            yield self._writer
        finally:
            self._writer.recorded = recorded

    def _check_active(self) -> None:
        if self.state != "active":
            raise TransactionClosedError(f"lakehouse transaction is {self.state}")

    @checked
    def check_writable(self) -> None:
        """Raise TransactionClosedError once the transaction committed or rolled back."""
        self._check_active()

    @checked
    def submit(self, op: Op) -> None:
        """Apply ``op`` to the transaction (it commits with the rest).

        Raises:
            TransactionClosedError: the transaction already ended.
            RetryableConflictError: what the op observed no longer holds.
        """
        self._check_active()
        recorded, self._writer.recorded = self._writer.recorded, None  # the op's own reads are not the caller's
        try:
            self._summaries.append(apply_one(op, self._writer, self.context, rebase=False))
        except BaseException:
            discard_written(self.context, [op])
            raise
        finally:
            self._writer.recorded = recorded
        self._ops.append(op)

    # -- the transaction --

    @property
    def operations(self) -> list[Op]:
        """The operations applied so far, in order (a copy)."""
        return list(self._ops)

    @checked
    def commit(self) -> int:
        """Commit every change as one lakehouse version; returns it.

        Raises:
            TransactionClosedError: the transaction already ended.
            RetryableConflictError, IncompatibleConflictError: it lost to a concurrent
                commit (see :mod:`catalog.conflicts`). The transaction is then aborted.
        """
        self._check_active()
        self.state = "committing"
        try:
            outcome = commit_ops(
                self.context,
                self._ops,
                isolation=self.isolation,
                started=(self._txn, self._writer),
                recorded=self._writer.recorded,
                summaries=self._summaries,
            )
        except BaseException:
            self.state = "aborted"
            raise
        self.state = "committed"
        self.version = outcome.version
        return outcome.version

    @checked
    def rollback(self) -> None:
        """Discard every change (files written for them are deleted)."""
        if self.state != "active":
            return
        self.state = "rolled back"
        self._txn.rollback()
        discard_written(self.context, self._ops)


# -- durable: ops staged with their locks, applied at the topmost commit --------------------


@contextmanager
def durable_view(ctx: LakeContext, manager: TransactionManager, txid: str, staged: bool = True) -> Iterator[CatalogWriter]:
    """The newest catalog with the staged operations of ``txid`` and its ancestors applied
    (``staged=False``: without them), in a throw-away lakekv transaction.

    Raises:
        TransactionStateError, DurableTransactionExpiredError: the transaction is not active.
    """
    manager.run(lambda work: lifecycle.require_active(work, txid))
    txn = ctx.store.begin(isolation="snapshot", fresh=True)
    try:
        writer = CatalogWriter(txn)
        if staged:
            raw = txn.get(durable_keys.txn_key(txid))
            assert raw is not None, "require_active saw the record"
            for ancestor in (*TxnRecord.decode(raw).ancestors, txid):
                for _, op_raw in txn.scan(prefix=durable_keys.op_prefix(ancestor)):
                    op = from_record(json.loads(op_raw))
                    if not isinstance(op, CheckRead):  # writes nothing; checked against committed data only
                        op.apply(writer, ctx, rebase=False)
        yield writer
    finally:
        txn.rollback()


def stage_durable(ctx: LakeContext, manager: TransactionManager, txid: str, op: Op) -> None:
    """Stage ``op`` in durable transaction ``txid``, taking its implicit locks.

    The op is first applied to the transaction's view (so it validates
    against, and later reads see, what the transaction already did, and its
    data work is done once); then one SERIALIZABLE lakekv transaction takes
    its implicit locks (:mod:`catalog.durable.implicit`) and appends its record
    to the staged operations. Nothing reaches the catalog's keys before the
    topmost commit (:func:`apply_staged`). On any failure nothing is staged
    and the op's files are deleted.

    Raises:
        LockConflictError: an implicit lock is refused.
        StaleDataFileError: its data files got too old to publish before staging.
        TransactionStateError, DurableTransactionExpiredError: the transaction is not active.
        CatalogError: the op does not apply to the transaction's view.
    """
    try:
        # A read check is about committed data (what a query read at a lakehouse version), not
        # about what this transaction staged: it checks, and at the commit applies, before them.
        with durable_view(ctx, manager, txid, staged=not isinstance(op, CheckRead)) as view:
            apply_one(op, view, ctx, rebase=False)
        requests = implicit_locks(op)
        record = op.to_record()
        files = op.new_files()

        def stage(work: Work) -> None:
            lifecycle.require_active(work, txid)
            for request in requests:
                lifecycle.lock(work, txid, *request, waitable=False, implicit=True)
            lifecycle.stage_op(work, txid, record)
            # Staged files count as referenced (lake.gc keeps them), so the
            # freshness rule applies now, as it would to a commit.
            deadline = publish_deadline(ctx.store, ctx.objects, files)
            if deadline is not None:
                work.txn.publish_by(deadline)

        try:
            manager.run(stage, keep_cleanup=False)
        except StaleOutputError as exc:
            raise StaleDataFileError(
                f"staging {op.kind} of {op.object_name!r} into durable transaction {txid} could not be "
                "published before its data files got older than half the GC grace period; write the data again"
            ) from exc
    except BaseException:
        discard_written(ctx, [op], "its staging failed")
        raise


def apply_staged(ctx: LakeContext, work: Work, record: TxnRecord, ops: list[dict[str, Any]]) -> None:
    """Apply ``record``'s staged operation records to the catalog inside ``work`` (the topmost commit).

    Operations re-apply with ``rebase=True``, so an operation whose premise a
    commit from outside the lock protocol broke (a plain ``table.overwrite``
    of a file it rewrites) fails the commit with a conflict error instead of
    applying wrongly.

    Raises:
        RetryableConflictError: what an operation observed has changed.
        CatalogError (e.g. NoSuchTableError, IncompatibleConflictError): an
            operation no longer applies to the catalog.
    """
    writer = CatalogWriter(work.txn)
    summaries = []
    # Read checks first: they are about what others committed, not about this transaction's ops.
    decoded = [from_record(op_record) for op_record in ops]
    decoded.sort(key=lambda op: not isinstance(op, CheckRead))
    for op in decoded:
        summaries.append(apply_one(op, writer, ctx, rebase=True, where=f"durable transaction {record.id}: "))
        for node in removed_nodes(op):
            locks.drop_pending(work, node, except_txn=frozenset({record.id}))
    work.txn.set_summary({"ops": bounded(summaries), "durable_transaction": record.id, "title": record.title})
