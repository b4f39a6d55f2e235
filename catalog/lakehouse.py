"""The lakehouse: a TrinityLake-style tree of namespaces, tables and views in one lakekv store.

One lakekv version is one lakehouse version, so every commit — one append or
a transaction over many tables — is atomic, and the whole lakehouse
time-travels (``lake.at(version=...)``), exports and shows its history as
one. The catalog's keys live in a lakekv store at the lakehouse URL; the
Parquet data files of native tables live beside them under ``data/<table id>/``
in the same object store.

>>> import catalog, pyarrow as pa
>>> with catalog.open("memory://lakehouse-doctest", poll_interval_s=0) as lake:
...     _ = lake.create_namespace("sales")
...     t = lake.create_table("sales.orders", pa.schema([("id", pa.int64()), ("day", pa.string())]))
...     v = t.append(pa.table({"id": [1, 2], "day": ["mon", "tue"]}))
...     lake.load_table("sales.orders").scan().to_arrow().num_rows
2
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Any, Iterator

from catalog import maintenance
from catalog.arguments import checked
from catalog.access import CatalogReader, CatalogWriter
from catalog.commit import Outcome, _cleanup, apply_one, commit_ops
from catalog.context import LakeContext
from catalog.datafiles import DEFAULT_TARGET_FILE_BYTES
from catalog.durable.guard import check_plain_commit
from catalog.durable.lake import DurableLake, staged_paths
from catalog.errors import ReadOnlyError
from catalog.maintenance import HistoryEntry as HistoryEntry  # its home; re-exported for catalog.lakehouse users
from catalog.ops import Op
from catalog.session import CatalogSession
from catalog.verify import verify as verify_lake
from kvstore.store import Store
from kvstore.store import open as open_kv
from kvstore.txn import Transaction


def open(url: object, create: bool = True, background: bool = True, **options: Any) -> Lakehouse:  # noqa: A001
    """Open (or create) the lakehouse at ``url``; see :class:`Lakehouse`.

    Args:
        url: a directory path, ``file://``, ``memory://name`` or ``s3://bucket/prefix``
            (``os.PathLike`` accepted).
        create: create the lakehouse if it does not exist.
        background: False opens a cheap short-lived handle that starts no
            background threads (what a Spark commit worker wants).
        **options: lakekv store options (``kvstore.open``) and object-store
            options (``endpoint_url``, ``key``, ``secret``, ``region``, ...).

    Raises:
        TypeError: ``url`` is not a str or os.PathLike.
        FileNotFoundError, StoreError, ValueError: as for :func:`kvstore.open` (no store
            there and ``create`` is false, a bad URL or option).
    """
    import os

    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if not isinstance(url, str):
        raise TypeError(f"url must be a str or os.PathLike, not {type(url).__name__}")
    if not background:
        options.setdefault("background_threads", False)
    store = open_kv(url, create=create, **options)
    return Lakehouse(store)


class Lakehouse(CatalogSession):
    """A handle on one lakehouse: thread-safe, one per process is enough.

    Plain reads see this handle's latest view of the store, which may be up to
    ``poll_interval_s`` behind other writers (``refresh()`` catches up).

    ``context`` (a :class:`~catalog.context.LakeContext`) is what the parts
    of the lakehouse (commits, maintenance, durable transactions) are given
    instead of this handle.
    """

    def __init__(self, store: Store, target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES) -> None:
        self.store = store
        self.objects = store.objects
        self.target_file_bytes = target_file_bytes
        self.context = LakeContext.of(store, target_file_bytes)
        # Durable transactions take part in every plain commit (their locks
        # hold against it) and in GC (the files they staged are referenced).
        self.context.commit_checks.append(check_plain_commit)
        self.context.gc_references.append(functools.partial(staged_paths, store))
        self._durable: DurableLake | None = None  # made on first use

    def __repr__(self) -> str:
        return f"Lakehouse({self.url!r}, version={self.version})"

    @staticmethod
    @checked
    def open(url: object, create: bool = True, background: bool = True, **options: Any) -> Lakehouse:  # noqa: A003
        """``catalog.Lakehouse.open(url)`` is :func:`catalog.open` (DESIGN.md's spelling).

        Raises:
            TypeError, FileNotFoundError, StoreError, ValueError: as for :func:`catalog.open`.
        """
        return open(url, create=create, background=background, **options)

    @property
    def url(self) -> str:
        """The lakehouse's URL, as its object store names it."""
        return str(self.objects.url)

    @property
    def version(self) -> int:
        """The newest lakehouse version this handle knows."""
        return self.store.version

    @checked
    def refresh(self) -> int:
        """Catch up with versions other writers committed; returns the version."""
        return self.store.refresh()

    @checked
    def close(self) -> None:
        """Close the store and the object store it opened."""
        self.store.close()  # closes the object store it opened

    def __enter__(self) -> Lakehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- session hooks (what a Table asks of its host) ---------------------------------

    @contextmanager
    @checked
    def reading(self) -> Iterator[CatalogReader]:
        """A catalog reader on one snapshot of the newest version this handle knows."""
        snap = self.store.snapshot()
        try:
            yield CatalogReader(snap)
        finally:
            snap.close()

    @checked
    def submit(self, op: Op) -> int:
        """Commit ``op`` as one lakehouse version and return it.

        Raises:
            RetryableConflictError, IncompatibleConflictError: it lost to a concurrent commit
                (see :mod:`catalog.conflicts`).
            LockConflictError: a durable transaction's lock forbids it.
        """
        return self._commit([op]).version

    @checked
    def check_writable(self) -> None:
        """The live lakehouse always takes writes: never raises."""
        return None

    def _commit(self, ops: list[Op]) -> Outcome:
        return commit_ops(self.context, ops)

    # -- transactions, time travel, history --------------------------------------

    @contextmanager
    @checked
    def transaction(self, isolation: str = "serializable") -> Iterator[LakeTransaction]:
        """A multi-table transaction: every change inside becomes ONE lakehouse version.

        Commits on a clean exit (conflicts are rebased or raised as in
        :mod:`catalog.conflicts`), rolls back on an exception. Reads inside
        see the transaction's own changes.

        Raises:
            TypeError: ``isolation`` is not a str.
            RetryableConflictError, IncompatibleConflictError: the commit lost to a concurrent
                commit and could not be rebased (see :mod:`catalog.conflicts`).
            Any exception raised inside the block, after rolling back.
        """
        tx = LakeTransaction(self, isolation)
        try:
            yield tx
        except BaseException:
            tx.rollback()
            raise
        tx.commit()

    @checked
    def at(self, version: int | None = None, timestamp: float | None = None) -> PastLakehouse:
        """The lakehouse as of a version or a storage timestamp (read-only).

        TrinityLake's ``FOR SYSTEM_VERSION AS OF`` / ``FOR SYSTEM_TIME AS OF``:
        ``timestamp`` is seconds since the epoch, compared with the storage's
        own time of each commit. Raises ``SnapshotTooOldError`` past retention.

        Raises:
            TypeError: an argument of the wrong type.
            SnapshotTooOldError: the version or time is past retention.
        """
        snap = self.store.at(version=version, timestamp=timestamp)
        return PastLakehouse(self, snap)

    @checked
    def history(self, limit: int | None = 20, table: str | None = None) -> list[HistoryEntry]:
        """Versions newest first with the catalog operations each committed.

        ``table`` keeps only versions that touched that table (by its current
        id, so history survives renames); ``limit`` counts returned entries.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: ``limit`` is negative, or a malformed table name.
            NoSuchTableError: ``table`` does not exist.
        """
        return maintenance.history(self.context, self, limit, table)

    # -- maintenance -------------------------------------------------------------

    @checked
    def compact_table(self, name: str, target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES, progress: bool = False) -> Any:
        """Rewrite the table's small files into files of about ``target_file_bytes``, in one commit.

        Returns a :class:`catalog.maintenance.CompactionReport`; see
        :func:`catalog.maintenance.compact_table`.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: ``target_file_bytes`` is below 1024, or a malformed name.
            NoSuchTableError: no such table.
            RetryableConflictError: a concurrent commit removed an input file.
        """
        return maintenance.compact_table(self.context, self, name, target_file_bytes, progress)

    @checked
    def gc(self, dry_run: bool = False, grace_s: float | None = None, progress: bool = False) -> Any:
        """Delete data files no retained version can reach, and the staged files of dead durable transactions.

        Returns a :class:`catalog.maintenance.GCReport` (``dry_run`` only reports);
        see :func:`catalog.maintenance.gc`.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: ``grace_s`` is not a non-negative number.
        """
        staged = self.durable.collect(dry_run)  # files of aborted/expired durable transactions
        report = maintenance.gc(self.context, dry_run, grace_s, progress)
        report.orphan_files.extend(staged)
        return report

    @checked
    def export(self, dest_url: str, version: int | None = None, progress: bool = False, **dest_options: Any) -> Any:
        """Copy the lakehouse as of ``version`` (default the newest) to ``dest_url``.

        Returns the export report; see :func:`catalog.maintenance.export`.

        Raises:
            TypeError: an argument of the wrong type.
            CorruptDataFileError: a data file's size or CRC32C is not its catalog entry's.
        """
        return maintenance.export(self.context, dest_url, version, progress, **dest_options)

    @checked
    def verify(self) -> Any:
        """Check the catalog's store and every data file of every retained version.

        Returns a :class:`catalog.verify.LakeVerifyReport`: ``ok``, and one
        problem per bad file (missing, wrong size, failed CRC32C,
        undecodable), each naming the file and its table. Reads every
        retained data file once.

        Raises:
            ObjectStoreError: the storage failed (a bad file is a problem in the report, not an error).
        """
        return verify_lake(self.context)

    # -- durable transactions and locks (catalog/durable/, YTsaurus model) ----------

    @property
    def durable(self) -> DurableLake:
        """The :class:`catalog.durable.lake.DurableLake` of this handle (created on first use)."""
        if self._durable is None:
            self._durable = DurableLake(self.context)
        return self._durable

    @checked
    def begin(self, timeout: float | None = None, parent: Any = None, title: str | None = None) -> Any:
        """Start a durable transaction (long-running, pinged, nestable, with locks); see catalog.durable.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a bad ``timeout`` or parent id.
            TransactionStateError / TransactionExpiredError: the parent is not active.
        """
        return self.durable.begin(timeout=timeout, parent=parent, title=title)

    @checked
    def attach(self, txid: str) -> Any:
        """The durable transaction ``txid``, begun by any process.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: ``txid`` is not 32 lowercase hex digits.
            TransactionStateError: no such transaction in this store.
        """
        return self.durable.attach(txid)

    @checked
    def transactions(self, include_finished: bool = False) -> list[Any]:
        """Durable transaction records (like YTsaurus ``//sys/transactions``).

        Raises:
            TypeError: an argument of the wrong type.
        """
        return self.durable.transactions(include_finished)

    @checked
    def locks(self, node: str) -> list[Any]:
        """The locks on a node, in queue order (like YTsaurus ``//sys/locks``).

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed node name.
        """
        return self.durable.locks(node)


class PastLakehouse(CatalogSession):
    """The lakehouse as of one past version: every read, no write."""

    def __init__(self, lake: Lakehouse, snapshot: Any) -> None:
        self.lake = lake
        self._snap = snapshot
        self.objects = lake.objects
        self.target_file_bytes = lake.target_file_bytes

    @property
    def version(self) -> int:
        """The lakehouse version this view shows."""
        return int(self._snap.version)

    def __repr__(self) -> str:
        return f"PastLakehouse({self.lake.url!r}, version={self.version})"

    @contextmanager
    @checked
    def reading(self) -> Iterator[CatalogReader]:
        """A catalog reader at this past version."""
        yield CatalogReader(self._snap)

    @checked
    def submit(self, op: Op) -> Any:
        """Refuse ``op``: a past version takes no writes.

        Raises:
            TypeError: ``op`` is not an op.
            ReadOnlyError: always.
        """
        raise ReadOnlyError(f"lakehouse version {self.version} is read-only (a past version)")

    @checked
    def check_writable(self) -> None:
        """Refuse writes: a past version takes none.

        Raises:
            ReadOnlyError: always.
        """
        raise ReadOnlyError(f"lakehouse version {self.version} is read-only (a past version)")

    @checked
    def close(self) -> None:
        """Release the snapshot this view reads."""
        self._snap.close()

    def __enter__(self) -> PastLakehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LakeTransaction(CatalogSession):
    """A multi-table transaction (``with lake.transaction() as tx``).

    Every catalog method works on it; changes are applied to one lakekv
    transaction at once (later reads in it see them) and commit together.
    The caller's reads (loading tables, scans, listings) are recorded so that
    a rebase after a lost race can prove they still hold.
    """

    def __init__(self, lake: Lakehouse, isolation: str) -> None:
        self.lake = lake
        self.isolation = isolation
        self.objects = lake.objects
        self.target_file_bytes = lake.target_file_bytes
        self._txn: Transaction = lake.store.begin(isolation=isolation)
        self._writer = CatalogWriter(self._txn)
        self._writer.recorded = []
        self._ops: list[Op] = []
        self._summaries: list[dict[str, Any]] = []
        self.state = "active"
        self.version: int | None = None

    @contextmanager
    @checked
    def reading(self) -> Iterator[CatalogReader]:
        """The transaction's own view (its changes so far); raises TransactionClosedError once it ended."""
        self._check_active()
        yield self._writer

    @contextmanager
    def _resolving(self) -> Iterator[CatalogReader]:
        self._check_active()
        recorded, self._writer.recorded = self._writer.recorded, None
        try:
            yield self._writer
        finally:
            self._writer.recorded = recorded

    def _check_active(self) -> None:
        if self.state != "active":
            from kvstore.errors import TransactionClosedError

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
            self._summaries.append(apply_one(op, self._writer, self.lake.context, rebase=False))
        except BaseException:
            _cleanup(self.lake.context, [op])
            raise
        finally:
            self._writer.recorded = recorded
        self._ops.append(op)

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
                self.lake.context,
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
        _cleanup(self.lake.context, self._ops)

