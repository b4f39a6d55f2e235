"""Time travel: the lakehouse as of a past version, and the history of versions.

One lakekv version is one lakehouse version, so a past lakehouse is a
catalog reader on a retained snapshot of the store (TrinityLake's
``FOR SYSTEM_VERSION AS OF`` / ``FOR SYSTEM_TIME AS OF``), and the history is
the store's commit log with the operation summaries each commit carried
(:func:`catalog.transactions.commit_ops` writes them).

Both answer from the retention recorded in the lakehouse
(:mod:`catalog.retention`): a version below its data floor is
``SnapshotTooOldError`` and is not listed, and a data file found missing
while reading a past version is ``SnapshotTooOldError`` once the floor has
passed that version (GC records the floor before deleting), never a bare
``FileNotFoundError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from catalog import retention
from catalog.access import CatalogReader
from catalog.arguments import checked
from catalog.context import LakeContext
from catalog.errors import NoSuchTableError, ReadOnlyError
from catalog.names import join
from catalog.ops import Op
from catalog.records import TABLE
from catalog.table import Table
from catalog.tree import LakeTree, TreeMethods
from kvstore.objstore import ForwardingStore
from kvstore.objstore.base import ObjectMeta, ObjectStore
from kvstore.snapshot import Snapshot


class _PastObjects(ForwardingStore):
    """The lakehouse's object store as a reader of one past version sees it.

    Every call goes to ``inner``; a data file missing on a read becomes
    ``SnapshotTooOldError`` when GC took it (the data floor has passed the
    version: :func:`catalog.retention.too_old_if_collected`).
    """

    def __init__(self, ctx: LakeContext, version: int) -> None:
        super().__init__(ctx.objects)
        self._ctx = ctx
        self._version = version

    def _missing(self, exc: FileNotFoundError) -> None:
        retention.too_old_if_collected(self._ctx.store, self._version, exc)

    def get(self, path: str) -> bytes:
        try:
            return self.inner.get(path)
        except FileNotFoundError as exc:
            self._missing(exc)
            raise

    def get_range(self, path: str, start: int, end: int) -> bytes:
        try:
            return self.inner.get_range(path, start, end)
        except FileNotFoundError as exc:
            self._missing(exc)
            raise

    def head(self, path: str) -> ObjectMeta:
        try:
            return self.inner.head(path)
        except FileNotFoundError as exc:
            self._missing(exc)
            raise

    def close(self) -> None:
        """Nothing to close: the lakehouse owns the store."""


class PastLakehouse(TreeMethods):
    """The lakehouse as of one version, past or current: every read, no write (``lake.at(...)``).

    It is the host of its own :class:`~catalog.tree.LakeTree`: reads come
    from one retained snapshot, writes raise :class:`~catalog.errors.ReadOnlyError`.
    """

    def __init__(self, ctx: LakeContext, snapshot: Snapshot) -> None:
        self.context = ctx
        self._snap = snapshot
        self.objects: ObjectStore = _PastObjects(ctx, int(snapshot.version))
        self.target_file_bytes = ctx.target_file_bytes
        self.tree = LakeTree(self)

    @property
    def version(self) -> int:
        """The lakehouse version this view shows."""
        return int(self._snap.version)

    def __repr__(self) -> str:
        return f"PastLakehouse({str(self.objects.url)!r}, version={self.version})"

    @checked
    def load_table_by_id(self, table_id: str) -> Table:
        """The table whose id is ``table_id`` as of this version, under the name it had then.

        Follows a table through renames: ``lake.at(version=v).load_table_by_id(lake.load_table("ns.new").id)``
        reads the past of the table named ``ns.new`` now, whatever it was called at ``v``.

        Raises:
            TypeError: ``table_id`` is not a str.
            NoSuchTableError: no table had that id at this version.
        """
        with self.reading() as r:
            for ns in [(), *r.child_namespaces((), recursive=True)]:
                for name, pointer in r.entries(ns):
                    if pointer.kind == TABLE and pointer.id == table_id:
                        return self.load_table(join((*ns, name)))
        raise NoSuchTableError(f"no table with id {table_id!r} at lakehouse version {self.version}")

    # -- the TableHost protocol --

    @contextmanager
    @checked
    def reading(self) -> Iterator[CatalogReader]:
        """A catalog reader at this past version."""
        yield CatalogReader(self._snap)

    @checked
    def resolving(self) -> AbstractContextManager[CatalogReader]:
        """As :meth:`reading`."""
        return self.reading()

    @checked
    def submit(self, op: Op) -> Any:
        """Refuse ``op``: a past version takes no writes.

        Raises:
            TypeError: ``op`` is not an op.
            ReadOnlyError: always.
        """
        raise ReadOnlyError(f"lakehouse version {self.version} is read-only (a view from lake.at(): write through the lakehouse)")

    @checked
    def check_writable(self) -> None:
        """Refuse writes: a past version takes none.

        Raises:
            ReadOnlyError: always.
        """
        raise ReadOnlyError(f"lakehouse version {self.version} is read-only (a view from lake.at(): write through the lakehouse)")

    @checked
    def close(self) -> None:
        """Release the snapshot this view reads."""
        self._snap.close()

    def __enter__(self) -> PastLakehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def at(ctx: LakeContext, version: int | None = None, timestamp: float | None = None) -> PastLakehouse:
    """The lakehouse as of ``version`` or storage time ``timestamp``, or with neither as of now (see ``Lakehouse.at``).

    Raises:
        TypeError: both ``version`` and ``timestamp`` given.
        SnapshotTooOldError: the version or time is past the lakehouse's retention.
    """
    if version is None and timestamp is None:
        # Now: one snapshot of the store, taken as the handle reads (a default
        # handle's is linearizable: one freshness check, which every read
        # through the view then shares: a load and its plan, several tables).
        snapshot = ctx.store.snapshot()
    else:
        snapshot = ctx.store.at(version=version, timestamp=timestamp)
    try:
        retention.check_readable(ctx.store, int(snapshot.version))
    except BaseException:
        snapshot.close()
        raise
    return PastLakehouse(ctx, snapshot)


@dataclass(frozen=True)
class HistoryEntry:
    """One lakehouse version: when the storage recorded it and what it did."""

    version: int
    timestamp: float
    operations: list[dict[str, Any]]


def history(ctx: LakeContext, tree: LakeTree, limit: int | None, table: str | None) -> list[HistoryEntry]:
    """Versions newest first with their operations (see ``Lakehouse.history``); ``table`` is loaded from ``tree``.

    Versions below the lakehouse's data floor are not listed: they may have
    lost data files (:mod:`catalog.retention`).

    Raises:
        ValueError: ``limit`` is not a non-negative int or None.
        NoSuchTableError: ``table`` does not exist.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a non-negative int or None, got {limit!r}")
    table_id = tree.load_table(table).id if table is not None else None
    data_floor = retention.floor(ctx.store)  # older versions may have lost data files: not listed
    out: list[HistoryEntry] = []
    start: int | None = None
    page = 256
    while limit is None or len(out) < limit:
        infos = ctx.store.history(limit=page, start=start)
        if not infos:
            break
        for info in infos:
            if info.version < data_floor:
                return out
            ops = [op for commit in info.commits for op in ((commit.get("summary") or {}).get("ops") or [])]
            if table_id is not None:
                ops = [op for op in ops if op.get("table_id") == table_id]
            if ops:
                out.append(HistoryEntry(info.version, info.timestamp, ops))
                if limit is not None and len(out) >= limit:
                    break
        last = infos[-1].version
        if last <= 0 or len(infos) < page:
            break
        start = last - 1
    return out
