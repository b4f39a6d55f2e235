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

import warnings
from contextlib import contextmanager
from typing import Any, Iterator

import pyarrow as pa

from catalog import changes, expiry, import_files, maintenance, retention, rewrite, rollback, timetravel
from catalog.arguments import checked
from catalog.context import LakeContext
from catalog.datafiles import DEFAULT_TARGET_FILE_BYTES
from catalog.durable.lake import DurableLake
from catalog.durable.manager import DurableTransaction
from catalog.durable.records import LockRecord, TxnRecord
from catalog.durable.session import DurableCatalogTransaction
from catalog.import_files import ImportReport
from catalog.maintenance import CompactionReport, ExportReport, GCReport
from catalog.rewrite import RewriteReport
from catalog.rollback import RollbackReport
from catalog.timetravel import HistoryEntry, PastLakehouse
from catalog.transactions import LiveHost, OpenTransaction
from catalog.tree import LakeTree, TreeMethods
from catalog.verify import LakeVerifyReport
from catalog.verify import verify as verify_lake
from kvstore.store import Store
from kvstore.store import open_embedded as open_kv

__all__ = ["HistoryEntry", "LakeTransaction", "Lakehouse", "PastLakehouse", "open"]


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
            ``retention_window_s`` is the lakehouse's, not the handle's: given,
            it is recorded in the lakehouse if it differs (a commit, as
            :meth:`Lakehouse.set_retention`); left out, the handle keeps the
            recorded window (see :mod:`catalog.retention`).

    Raises:
        TypeError: ``url`` is not a str or os.PathLike.
        FileNotFoundError, StoreError, ValueError: as for :func:`kvstore.open_embedded` (no
            store there and ``create`` is false, a bad URL or option, or the URL of a
            ``lakekv serve`` server: a lakehouse opens its store itself).
    """
    import os

    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if not isinstance(url, str):
        raise TypeError(f"url must be a str or os.PathLike, not {type(url).__name__}")
    if not background:
        options.setdefault("background_threads", False)
    store = open_kv(url, create=create, **options)
    try:
        explicit = options.get("retention_window_s")
        if explicit is None:
            explicit = retention.recorded_window(store)
            if explicit is not None and explicit != store.options.retention_window_s:
                # The engine's own retention (its compaction and GC) follows the lakehouse's window too.
                store.close()
                store = open_kv(url, create=False, **{**options, "retention_window_s": explicit})
        lake = Lakehouse(store, retention_window_s=explicit)
        maintenance.keep_reserve(lake.context)  # before the disk can fill: see catalog.maintenance
        return lake
    except BaseException:
        store.close()
        raise


class Lakehouse(TreeMethods):
    """A handle on one lakehouse: thread-safe, one per process is enough.

    Plain reads see this handle's latest view of the store, which may be up to
    ``poll_interval_s`` behind other writers (``refresh()`` catches up).

    A facade over parts that each take the lakehouse's
    :class:`~catalog.context.LakeContext` (``context``), never this handle:

    * ``tree`` — namespaces, tables and views on the live lakehouse
      (:class:`~catalog.tree.LakeTree` over :class:`~catalog.transactions.LiveHost`);
      its methods are this handle's (``lake.create_table`` ...);
    * ``transaction()`` — multi-table transactions (:mod:`catalog.transactions`);
    * ``at()`` and ``history()`` — time travel (:mod:`catalog.timetravel`);
    * ``compact_table()``, ``gc()``, ``export()``, ``verify()`` — maintenance
      (:mod:`catalog.maintenance`, :mod:`catalog.verify`);
    * ``durable`` and ``begin_durable()`` ... — durable transactions and locks
      (:mod:`catalog.durable`).
    """

    def __init__(
        self, store: Store, target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES, *, retention_window_s: float | None = None
    ) -> None:
        """Build the handle on the lakehouse kept in ``store``.

        ``retention_window_s`` is recorded as the lakehouse's retention
        window if it differs from the recorded one (None: the store's own
        ``retention_window_s`` is, unless it is the engine's default); see
        :mod:`catalog.retention`.

        Raises:
            TypeError / ValueError: a bad ``retention_window_s``.
        """
        self.store = store
        self.objects = store.objects
        self.target_file_bytes = target_file_bytes
        self.context = LakeContext.of(store, target_file_bytes)
        wanted = retention.requested_window(store, retention_window_s)
        if wanted is not None and wanted != retention.window_s(store):
            retention.set_window(store, wanted)
        self.tree = LakeTree(LiveHost(self.context))
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
        tx = LakeTransaction(self.context, isolation)
        try:
            yield tx
        except BaseException:
            tx.rollback()
            raise
        tx.commit()

    @checked
    def at(self, version: int | None = None, timestamp: float | None = None) -> PastLakehouse:
        """The lakehouse as of a version or a storage timestamp (read-only); with neither, as of now.

        TrinityLake's ``FOR SYSTEM_VERSION AS OF`` / ``FOR SYSTEM_TIME AS OF``:
        ``timestamp`` is seconds since the epoch, compared with the storage's
        own time of each commit. Raises ``SnapshotTooOldError`` past retention.

        ``lake.at()`` is one consistent view of the newest version, read as
        this handle reads (by default linearizable: it sees every commit
        finished before the call). Every read through it shares that one
        check, where each ``lake`` read makes its own: on S3 that is a GET
        round trip per read, so ``with lake.at() as now:
        now.load_table(t).files(f)`` plans with one, ``lake.load_table(t).files(f)``
        with two. Close it (or use ``with``) to release the version.

        Raises:
            TypeError: an argument of the wrong type, or both given.
            SnapshotTooOldError: the version or time is past retention.
        """
        return timetravel.at(self.context, version, timestamp)

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
        return timetravel.history(self.context, self.tree, limit, table)

    @checked
    def changes(
        self, table: str, start: int, end: int | None = None, identifier_columns: list[str] | None = None
    ) -> pa.Table:
        """The changelog of ``table`` over versions (``start``, ``end``]: see :mod:`catalog.changes`.

        ``end`` None is the latest version. Each changed row once, with
        ``_change_type`` (insert, delete, update_preimage, update_postimage;
        updates need ``identifier_columns``), ``_commit_version`` and ``_commit_timestamp``.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: ``start > end``, ``end`` not committed, a non-native table, or an unknown identifier column.
            NoSuchTableError: no table ``table`` at ``end``.
            SnapshotTooOldError: ``start`` is past retention (the message names the floor).
        """
        return changes.table_changes(self, table, start, self.refresh() if end is None else end, identifier_columns)

    @property
    def retention_window_s(self) -> float:
        """The lakehouse's retention window in seconds, as recorded in it (the engine's default if never set).

        It decides which data files GC may delete, for every process; see
        :mod:`catalog.retention`.
        """
        return retention.window_s(self.store)

    @property
    def retention_floor(self) -> int:
        """The lakehouse's data floor: versions below it may have lost data files and read as ``SnapshotTooOldError``."""
        return retention.floor(self.store)

    @checked
    def set_retention(self, window_s: float) -> int | None:
        """Record ``window_s`` (seconds) as the lakehouse's retention window, for every process.

        GC (in any process) then keeps a removed data file until its removal
        is ``window_s`` old on the storage's clock. Shortening it lets the
        next GC delete more (those versions become ``SnapshotTooOldError``);
        lengthening it keeps what GC has not deleted yet. Returns the
        version that recorded it, or None if it was already recorded.
        Handles already open keep their engine-level window until reopened.

        Raises:
            TypeError: ``window_s`` is not a number.
            ValueError: it is negative or not finite.
        """
        return retention.set_window(self.store, window_s)

    # -- maintenance -------------------------------------------------------------

    @checked
    def compact_table(self, name: str, target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES, progress: bool = False) -> CompactionReport:
        """Rewrite the table's small files into files of about ``target_file_bytes``, in one commit.

        Returns a :class:`catalog.maintenance.CompactionReport`; see
        :func:`catalog.maintenance.compact_table`.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: ``target_file_bytes`` is below 1024, or a malformed name.
            NoSuchTableError: no such table.
            RetryableConflictError: a concurrent commit removed an input file.
        """
        return maintenance.compact_table(self.context, name, target_file_bytes, progress)

    @checked
    def rewrite_data_files(
        self,
        name: str,
        where: str | None = None,
        target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES,
        strategy: str = "binpack",
        sort_order: str | None = None,
    ) -> RewriteReport:
        """Compact table ``name``'s files matching the SQL condition ``where``, bin-packed or sorted, in one commit.

        Rebases over concurrent appends and redoes itself when a concurrent
        commit removed an input; see :mod:`catalog.rewrite`.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a bad ``target_file_bytes``, ``strategy``, ``sort_order`` or ``where``.
            NoSuchTableError: no such table.
            RetryableConflictError: concurrent commits removed an input on every attempt.
        """
        return rewrite.rewrite_data_files(self.context, name, where, target_file_bytes, strategy, sort_order)

    @checked
    def rollback_table(self, name: str, version: int | None = None, timestamp: float | None = None) -> RollbackReport:
        """Make table ``name`` hold again its rows and schema of lakehouse ``version`` (or storage time ``timestamp``).

        A NEW commit: the versions in between stay in the history and stay
        readable. See :mod:`catalog.rollback`.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: neither or both of ``version`` and ``timestamp``, or a column that cannot be restored.
            NoSuchTableError: no such table (now, or then under that name).
            SnapshotTooOldError: the version is past retention.
            RetryableConflictError: concurrent commits changed the table on every attempt.
        """
        return rollback.rollback_table(self.context, name, version, timestamp)

    @checked
    def add_files(self, name: str, source: str) -> ImportReport:
        """Import the Parquet files at ``source`` (inside the lakehouse's storage) into table ``name`` without copying.

        See :mod:`catalog.import_files`.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: ``source`` is not importable, or a file does not fit the table (naming file and column).
            NoSuchTableError: no such table.
        """
        return import_files.add_files(self.context, name, source)

    @checked
    def expire_versions(self, older_than: float | None = None, retain_last: int = 1, dry_run: bool = False) -> GCReport:
        """Delete the data files only versions before ``older_than`` read, keeping the newest ``retain_last``.

        Never past the recorded retention window; see :mod:`catalog.expiry`.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: ``retain_last`` below 1 or ``older_than`` in the future.
        """
        return expiry.expire_versions(self.context, older_than, retain_last, dry_run)

    @checked
    def remove_orphan_files(self, older_than: float | None = None, dry_run: bool = False) -> GCReport:
        """Delete files no version references, older than ``older_than`` (default ``gc_grace_s`` ago).

        Also the staged files of dead durable transactions; see :mod:`catalog.expiry`.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: ``older_than`` is later than ``gc_grace_s`` ago.
        """
        report = expiry.remove_orphan_files(self.context, older_than, dry_run)
        report.orphan_files.extend(self.durable.collect(dry_run))
        return report

    @checked
    def gc(self, dry_run: bool = False, grace_s: float | None = None, progress: bool = False) -> GCReport:
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
    def export(self, dest_url: str, version: int | None = None, progress: bool = False, **dest_options: Any) -> ExportReport:
        """Copy the lakehouse as of ``version`` (default the newest) to ``dest_url``.

        Returns the export report; see :func:`catalog.maintenance.export`.

        Raises:
            TypeError: an argument of the wrong type.
            SnapshotTooOldError: ``version`` is below the lakehouse's data floor.
            CorruptDataFileError: a data file's size or CRC32C is not its catalog entry's.
        """
        return maintenance.export(self.context, dest_url, version, progress, **dest_options)

    @checked
    def verify(self, table: str | None = None) -> LakeVerifyReport:
        """Check the catalog's store and every data file of every retained version (with ``table``, that table's).

        Returns a :class:`catalog.verify.LakeVerifyReport`: ``ok``, and one
        problem per bad file (missing, wrong size, failed CRC32C,
        undecodable), each naming the file and its table. Reads every
        retained data file (of ``table``) once.

        Raises:
            ObjectStoreError: the storage failed (a bad file is a problem in the report, not an error).
            NoSuchTableError: ``table`` does not exist.
        """
        if table is not None:
            self.refresh()
            table = self.load_table(table).name
        return verify_lake(self.context, table)

    # -- durable transactions and locks (catalog/durable/, YTsaurus model) ----------

    @property
    def durable(self) -> DurableLake:
        """The :class:`catalog.durable.lake.DurableLake` of this handle (created on first use)."""
        if self._durable is None:
            self._durable = DurableLake(self.context)
        return self._durable

    @checked
    def begin_durable(
        self, timeout: float | None = None, parent: DurableTransaction | str | None = None, title: str | None = None
    ) -> DurableCatalogTransaction:
        """Start a durable transaction (long-running, pinged, nestable, with locks); see catalog.durable.

        Not an optimistic one: that is :meth:`transaction` here, ``store.begin()`` in the engine.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a bad ``timeout`` or parent id.
            TransactionStateError / DurableTransactionExpiredError: the parent is not active.
        """
        return self.durable.begin(timeout=timeout, parent=parent, title=title)

    @checked
    def begin(
        self, timeout: float | None = None, parent: DurableTransaction | str | None = None, title: str | None = None
    ) -> DurableCatalogTransaction:
        """Deprecated alias of :meth:`begin_durable` (removed in the next release): warns, then starts one.

        Renamed because ``store.begin()`` starts an optimistic engine transaction.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a bad ``timeout`` or parent id.
            TransactionStateError / DurableTransactionExpiredError: the parent is not active.
        """
        # stacklevel 3: past this method and the @checked wrapper, to the caller.
        warnings.warn(
            "Lakehouse.begin() is deprecated: it was renamed begin_durable(); the old name goes in the next release",
            DeprecationWarning,
            stacklevel=3,
        )
        return self.begin_durable(timeout=timeout, parent=parent, title=title)

    @checked
    def attach(self, txid: str) -> DurableCatalogTransaction:
        """The durable transaction ``txid``, begun by any process.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: ``txid`` is not 32 lowercase hex digits.
            TransactionStateError: no such transaction in this store.
        """
        return self.durable.attach(txid)

    @checked
    def transactions(self, include_finished: bool = False) -> list[TxnRecord]:
        """Durable transaction records (like YTsaurus ``//sys/transactions``).

        Raises:
            TypeError: an argument of the wrong type.
        """
        return self.durable.transactions(include_finished)

    @checked
    def locks(self, node: str) -> list[LockRecord]:
        """The locks on a node, in queue order (like YTsaurus ``//sys/locks``).

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: a malformed node name.
        """
        return self.durable.locks(node)


class LakeTransaction(OpenTransaction, TreeMethods):
    """A multi-table transaction (``with lake.transaction() as tx``): every change inside becomes one version.

    Every namespace, table and view method works on it: it is the host
    (:class:`~catalog.transactions.OpenTransaction`: staging, rebase and
    commit) of its own :class:`~catalog.tree.LakeTree`.
    """

    def __init__(self, ctx: LakeContext, isolation: str) -> None:
        super().__init__(ctx, isolation)
        self.tree = LakeTree(self)
