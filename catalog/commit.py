"""Committing catalog operations: one lakekv transaction, rebased when it loses.

:func:`commit_ops` applies a list of :mod:`catalog.ops` records in one
SERIALIZABLE (or SNAPSHOT) lakekv transaction and commits it with a summary
of the operations, which ``lake.history()`` reads back. When the commit
loses to a concurrent one, the pair of operations decides
(:func:`catalog.conflicts.classify`): rebase — start a fresh transaction on
the newest version, repeat the caller's recorded reads (they must return the
same), re-apply every op with ``rebase=True``, commit again, at most
``max_rebases`` times with jittered backoff — or raise
:class:`~catalog.errors.RetryableConflictError` /
:class:`~catalog.errors.IncompatibleConflictError`. Data files written for a
commit that finally fails are deleted (best effort; ``lake.gc()`` removes any
left behind once they are older than the grace period).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Sequence

from catalog.access import CatalogWriter
from catalog.conflicts import FAIL, RETRY, classify
from catalog.context import LakeContext
from catalog.datafiles import discard_files
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
from catalog.ops import Context, Op
from kvstore.backoff import backoff_delay
from kvstore.errors import ConflictError, StaleOutputError
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


def apply_one(op: Op, w: CatalogWriter, ctx: Context, rebase: bool) -> dict[str, Any]:
    """Apply one op; a precondition it observed that no longer holds is a retryable conflict.

    Returns the op's summary.

    Raises:
        RetryableConflictError: what the op observed has changed.
        CatalogError (e.g. NoSuchTableError, TableAlreadyExistsError): the op does not apply.
    """
    try:
        return op.apply(w, ctx, rebase)
    except StaleObservationError as exc:
        raise RetryableConflictError(str(exc), ours=op.kind, object=op.object_name) from None


def apply_all(ops: Sequence[Op], w: CatalogWriter, ctx: Context, rebase: bool) -> list[dict[str, Any]]:
    """Apply ``ops`` in order with :func:`apply_one`; returns their summaries.

    Raises:
        RetryableConflictError, CatalogError: as for :func:`apply_one`.
    """
    return [apply_one(op, w, ctx, rebase) for op in ops]


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
    caller's own reads in it, repeated on every rebase. Every attempt runs
    ``ctx``'s commit checks (durable locks) before it is sent.

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
            _run_commit_checks(ctx, txn, w, ops)  # refuses before anything is sent: settled
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
            _cleanup(ctx, ops)
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


def _run_commit_checks(ctx: LakeContext, txn: Transaction, w: CatalogWriter, ops: Sequence[Op]) -> None:
    """The checks the lakehouse registered (a plain commit must not break a durable
    transaction's lock: catalog.durable.guard); a refusal rolls the transaction back."""
    try:
        ctx.check_commit(w, ops)
    except BaseException:
        txn.rollback()
        raise


# The engine keeps a commit's summary in its root file, up to 64 KiB.
SUMMARY_BUDGET = 48 * 1024


def bounded(summaries: list[dict[str, Any]], budget: int = SUMMARY_BUDGET) -> list[dict[str, Any]]:
    """The op summaries, cut to fit the root file: a huge transaction (thousands of
    creates) keeps its first summaries and one ``"more"`` entry with the totals of the rest."""
    import json

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


def _cleanup(ctx: Context, ops: Sequence[Op]) -> None:
    """Delete the files ``ops`` wrote for a commit that will not happen."""
    discard_files(ctx.objects, [path for op in ops for path in op.new_paths()], "its commit failed")
