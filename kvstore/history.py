"""Time travel: find old versions by number, storage timestamp or seq, and read them.

:class:`RootIndex` answers questions about the version chain — what a root
file says (its tree, seqs, flush point) and when storage created it — with a
cache, since root files never change once written. Versions are dense and
their storage timestamps grow with the version, so "the newest version
committed at or before T" and "the oldest version whose last seq reaches S"
are binary searches costing ``O(log n)`` HEAD/GET requests. Root files that
GC deleted are the oldest ones, so a missing root counts as "old".

:func:`layers_at` builds what a reader of version N consults:

* if N's last seq is at or above the current tree's ``floor_seq`` (no flush or
  compaction that built it dropped anything N could see), the *current*
  layers read at N's seq are exact: cheap, no I/O;
* otherwise N's own tree (still there while N is inside retention) plus a
  memtable rebuilt from N's unflushed versions.

Whatever is missing — the root, its tree, an SST, an unflushed root — means
retention dropped N: :class:`~kvstore.errors.SnapshotTooOldError`, never a
view with holes.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final

from kvstore.chain import VersionChain
from kvstore.errors import SnapshotTooOldError
from kvstore.format.root import RootFile, oldest_needed_version, root_path
from kvstore.memtable import Memtable
from kvstore.search import last_true
from kvstore.state import EngineState, Layers

# Root facts cached per process (least recently used evicted first). A
# summary costs ~300 bytes, so the cache stays under ~20 MB.
_CACHE_ENTRIES: Final = 65536
# Version infos carry commit descriptors, summaries included (up to 64 KiB
# each, typically ~200 bytes): fewer of them, for history pages.
_INFO_CACHE_ENTRIES: Final = 4096


@dataclass(frozen=True)
class RootSummary:
    """What maintenance needs from one root file.

    Attributes:
        version: the version.
        last_seq: its last seq (a read of this version uses it).
        tree: its tree manifest path, or None before the first flush.
        flushed_upto: versions up to this are in ``tree``.
        delta_sst: path of its delta SST, if the delta was not inline.
    """

    version: int
    last_seq: int
    tree: str | None
    flushed_upto: int
    delta_sst: str | None

    @property
    def oldest_needed(self) -> int:
        """The oldest version whose root a reader of this version needs (its unflushed ones)."""
        return oldest_needed_version(self.tree, self.flushed_upto)

    @classmethod
    def of(cls, root: RootFile) -> RootSummary:
        delta = root.delta_sst["path"] if root.delta_sst is not None else None
        return cls(root.version, root.last_seq, root.tree, root.flushed_upto, delta)


@dataclass(frozen=True)
class VersionInfo:
    """One version of the store, as :meth:`kvstore.Store.history` reports it.

    Attributes:
        version: the version number.
        timestamp: when the storage created its root file (its mtime, in
            seconds since the epoch, on the storage's clock).
        writer: id of the store handle that committed it.
        commits: the commit descriptors of the root file, one per
            transaction or write (``"op"``, ``"seq"``, ``"summary"`` when
            the commit set one, ...) plus one per tree or checkpoint change.
    """

    version: int
    timestamp: float
    writer: str
    commits: list[dict[str, Any]]


class RootIndex:
    """Cached root-file facts and searches over the chain. Thread-safe."""

    def __init__(self, chain: VersionChain) -> None:
        self._chain = chain
        self._lock = threading.Lock()
        self._summaries: OrderedDict[int, RootSummary] = OrderedDict()
        self._mtimes: OrderedDict[int, float] = OrderedDict()
        self._infos: OrderedDict[int, VersionInfo] = OrderedDict()

    def summary(self, version: int) -> RootSummary | None:
        """Facts of root ``version``, or None if it does not exist (any more)."""
        with self._lock:
            cached = self._summaries.get(version)
        if cached is not None:
            return cached
        root = self._chain.try_read_root(version)
        if root is None:
            return None
        summary = RootSummary.of(root)
        self._remember(self._summaries, version, summary)
        return summary

    def info(self, version: int) -> VersionInfo | None:
        """What :class:`VersionInfo` says of ``version``, or None if its root is gone.

        One GET and one HEAD the first time, then cached. Callers get their
        own copy of the descriptors, so changing them never reaches the cache.
        """
        with self._lock:
            cached = self._infos.get(version)
        if cached is None:
            root = self._chain.try_read_root(version)
            mtime = self.mtime(version) if root is not None else None
            if root is None or mtime is None:
                return None
            self._remember(self._summaries, version, RootSummary.of(root))
            cached = VersionInfo(version, mtime, root.writer_id, root.commits)
            self._remember(self._infos, version, cached, _INFO_CACHE_ENTRIES)
        return VersionInfo(cached.version, cached.timestamp, cached.writer, copy.deepcopy(cached.commits))

    def mtime(self, version: int) -> float | None:
        """Storage timestamp (seconds) of root ``version``, or None if it does not exist."""
        with self._lock:
            cached = self._mtimes.get(version)
        if cached is not None:
            return cached
        try:
            mtime = self._chain.store.head(root_path(version)).mtime
        except FileNotFoundError:
            return None
        self._remember(self._mtimes, version, mtime)
        return mtime

    def forget(self, versions: list[int]) -> None:
        """Drop cached facts of deleted roots."""
        with self._lock:
            for version in versions:
                self._summaries.pop(version, None)
                self._mtimes.pop(version, None)
                self._infos.pop(version, None)

    def _remember(self, cache: OrderedDict[int, Any], version: int, value: object, limit: int = _CACHE_ENTRIES) -> None:
        with self._lock:
            cache[version] = value
            if len(cache) > limit:
                cache.popitem(last=False)

    def newest_at_or_before(self, when: float, head: int, low: int = 0) -> int:
        """The newest version in ``[low, head]`` committed at or before ``when``.

        Missing roots count as old (GC deletes from the oldest up). Returns
        ``low - 1`` when even ``low`` is newer than ``when``. Gallops up from
        ``low``, so a good lower bound makes it cheap.
        """

        def is_old(version: int) -> bool:
            mtime = self.mtime(version)
            return mtime is None or mtime <= when

        return last_true(low, head, is_old)

    def oldest_reaching_seq(self, seq: int, start: int) -> int:
        """The oldest existing version whose last seq is at least ``seq``.

        Requires: version ``start`` exists and reaches ``seq``. Gallops down
        from it, so a start near the answer makes it cheap.
        """

        def reaches(version: int) -> bool:  # False for old (or deleted) versions, then True
            summary = self.summary(version)
            return summary is not None and summary.last_seq >= seq

        # Mirror the versions so the predicate is True-then-False going up.
        return start - last_true(0, start, lambda distance: reaches(start - distance))


def version_at_timestamp(index: RootIndex, when: float, head: int) -> int:
    """The version a reader "as of ``when``" sees: the newest committed at or before it.

    Raises:
        SnapshotTooOldError: that version's root was deleted by retention, or
            every surviving root is newer and older ones were deleted.
        ValueError: ``when`` is before the store's first version.
    """
    version = index.newest_at_or_before(when, head)
    if version < 0:
        raise ValueError(f"timestamp {when} is before the store's first version")
    if index.mtime(version) is None:
        raise SnapshotTooOldError(f"the version as of timestamp {when} was removed by retention")
    return version


def layers_at(state: EngineState, index: RootIndex, version: int) -> tuple[int, Layers]:
    """``(seq, layers)`` that read exactly what version ``version`` held.

    Requires: ``0 <= version <= state.version``.

    Raises:
        SnapshotTooOldError: retention dropped the version (see module docstring).
    """
    summary = index.summary(version)
    if summary is None:
        raise SnapshotTooOldError(f"version {version} was removed by retention (its root file is gone)")
    current = state.view()
    if summary.last_seq >= current.tree.floor_seq:
        return summary.last_seq, current.layers
    try:
        tree = state.read_tree(summary.tree)
        if summary.last_seq < tree.floor_seq:  # cannot happen for a root's own tree; never risk it
            raise SnapshotTooOldError(f"version {version} is below its own tree's retention floor")
        memtable = Memtable()
        for old in range(summary.oldest_needed, version + 1):
            memtable.apply(state.rows_of(state.chain.read_root(old)))
        return summary.last_seq, state.open_layers(tree, memtable)
    except FileNotFoundError as exc:
        raise SnapshotTooOldError(f"version {version} was removed by retention ({exc} is gone)") from exc
