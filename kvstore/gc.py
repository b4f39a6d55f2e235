"""Garbage collection: delete root files older than retention, then every tree
manifest and SST no remaining root references.

One pass:

1. Catch up, compute the retention floor (:mod:`kvstore.retention`) and the
   oldest version that must stay readable. Its readers need its unflushed
   versions too, so the oldest root to keep is that version's
   ``flushed_upto + 1`` — never later than the newest ``gc_min_roots`` roots.
2. Choose the roots to delete: the oldest ones, in version order, below that
   bound and older than the grace period. Stopping at the first keeper keeps
   the surviving chain dense.
3. Mark: every tree, every SST of those trees and every delta SST referenced
   by a surviving root is live.
4. Sweep: rewrite ``_latest_hint`` to the head first (so it never names a
   deleted root), delete the chosen roots oldest first, then every listed
   ``tree/`` and ``sst/`` object that is not live and older than the grace
   period.

Why the grace period: a flush or compaction writes its SSTs and manifest
before the commit that references them, and a commit writes its delta SST
before its root; until then they look unreferenced. Flush and compaction
refuse to commit outputs older than half the grace period.

Temp files: a backend that publishes through temp files (a local directory's
``.tmp/``) keeps those of writers killed mid-write. The pass deletes the
ones older than the grace period on the same clock whose writer is not
alive on this host (:meth:`~kvstore.objstore.local.LocalStore.stale_temp_files`
says why a live writer's temp file is never taken).

Cost: a pass never lists the roots (a listing holds an entry per retained
version): the surviving roots are a dense run up to the head, since GC
deletes them oldest first, so the oldest is found by probing (``O(log n)``
HEADs) and only the roots below the bound are looked at one by one. The
mark reads the surviving roots in chunks of ``_MARK_CHUNK`` and keeps what
they reference as transitions (the version where the tree changed, each
delta SST), so its memory follows the live files, not the history; the
marks carry over to the next pass of the same handle, which reads only the
roots committed since (roots never change once written). A pass over a
store with 100,000 retained versions used to hold some 290 MB: a listing
of every root, and a summary and a future per root (issue 38).

Crash safety: roots go before the files they reference, so at every point
each surviving root's files exist; leftovers are picked up by the next pass.

A full disk: a pass writes nothing it needs. The clock is read without a
write when its probe cannot be written (:mod:`kvstore.clock`), and when the
hint cannot be rewritten it is deleted instead (readers then find the head
by listing), so GC frees space with 0 bytes free.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from kvstore.clock import StorageClock
from kvstore.errors import ObjectStoreError
from kvstore.format.names import HINT_PATH, is_collectable
from kvstore.format.root import root_path
from kvstore.history import RootIndex, RootSummary
from kvstore.objstore.base import ObjectMeta, TempFileStore
from kvstore.options import StoreOptions
from kvstore.retention import Retention, RetentionFloor
from kvstore.search import last_true
from kvstore.state import EngineState

log = logging.getLogger(__name__)

# Roots read per step of the mark: enough to keep open_parallelism readers
# busy, few enough that their futures and summaries stay a few hundred KB.
_MARK_CHUNK = 256


@dataclass(frozen=True)
class GCReport:
    """What one GC pass deleted (or would delete, with ``dry_run``).

    Attributes:
        dry_run: nothing was deleted.
        head: the latest version when the pass started.
        floor: the retention floor used.
        oldest_kept: the oldest root file that survives.
        deleted_roots: versions whose root files were deleted.
        deleted_trees: tree manifest paths deleted.
        deleted_ssts: SST paths deleted.
        bytes_freed: total size of everything deleted.
        live_files: trees and SSTs still referenced.
        deleted_temp_files: temp files of dead writers deleted (``.tmp/<name>``).
    """

    dry_run: bool
    head: int
    floor: RetentionFloor
    oldest_kept: int
    deleted_roots: tuple[int, ...]
    deleted_trees: tuple[str, ...]
    deleted_ssts: tuple[str, ...]
    bytes_freed: int
    live_files: int
    deleted_temp_files: tuple[str, ...] = ()


@dataclass
class _Marks:
    """What the surviving roots ``first..upto`` reference, as transitions (one handle's, across passes).

    ``trees``: ``(version, tree)`` at the first version of each run of roots
    sharing a tree, ascending; the tree in effect at version ``v`` is the
    last entry at or below ``v``. ``deltas``: ``(version, delta SST)``, ascending.
    """

    first: int
    upto: int
    trees: list[tuple[int, str | None]] = field(default_factory=list)
    deltas: list[tuple[int, str]] = field(default_factory=list)

    def add(self, summary: RootSummary) -> None:
        """Record root ``summary.version`` (the next one above ``upto``)."""
        if not self.trees or self.trees[-1][1] != summary.tree:
            self.trees.append((summary.version, summary.tree))
        if summary.delta_sst is not None:
            self.deltas.append((summary.version, summary.delta_sst))
        self.upto = summary.version

    def drop_below(self, first: int) -> None:
        """Forget roots older than ``first`` (GC deleted them), keeping the tree in effect at ``first``."""
        in_effect = [i for i, (version, _) in enumerate(self.trees) if version <= first]
        if in_effect:
            self.trees = self.trees[in_effect[-1]:]
            self.trees[0] = (first, self.trees[0][1])
        self.deltas = [(version, path) for version, path in self.deltas if version >= first]
        self.first = first

    def files(self) -> tuple[set[str], set[str]]:
        """``(trees, delta SSTs)`` referenced."""
        return {tree for _, tree in self.trees if tree is not None}, {path for _, path in self.deltas}


class GarbageCollector:
    """GC passes for one store handle; serialises its own passes. Thread-safe."""

    def __init__(
        self, state: EngineState, index: RootIndex, retention: Retention, options: StoreOptions, clock: StorageClock
    ) -> None:
        self._state = state
        self._clock = clock
        self._index = index
        self._retention = retention
        self._options = options
        self._lock = threading.Lock()
        # tree path -> SST paths it references; manifests never change.
        self._tree_ssts: dict[str, frozenset[str]] = {}
        # The previous pass's mark, extended by the next one (see _Marks).
        self._marks: _Marks | None = None
        # Readers at once; open_parallelism=0 reads one at a time, as open does.
        self._parallelism = max(1, options.open_parallelism)

    def run(self, dry_run: bool = False) -> GCReport:
        """One pass (see the module docstring).

        Args:
            dry_run: report what would be deleted without deleting anything.

        Raises:
            StoreError: a backend call failed (the pass stops; a later one resumes).
        """
        with self._lock:
            return self._run(dry_run)

    def _run(self, dry_run: bool) -> GCReport:
        state, index, store = self._state, self._index, self._state.store
        state.catch_up()
        head = state.version
        floor = self._retention.floor()
        needed = index.summary(floor.version)
        bound = min(floor.version, needed.oldest_needed if needed is not None else floor.version)
        bound = max(0, min(bound, head - self._options.gc_min_roots + 1))
        # On the storage's clock, with its resolution accounted for: a file
        # passes only if it is certainly older than the grace period.
        cutoff = self._clock.cutoff(self._options.gc_grace_s)

        # No listing of the roots (it would hold an entry per retained
        # version): they form a dense run from the oldest to the head (GC
        # deletes oldest first), so the oldest is found by probing, and only
        # the ones below the bound are looked at one by one.
        oldest = self._oldest_root(head)
        doomed: list[tuple[int, ObjectMeta]] = []
        kept_from = max(oldest, min(bound, head))
        for version in range(oldest, bound):
            try:
                meta = store.head(root_path(version))
            except FileNotFoundError:
                continue  # another handle's pass deleted it meanwhile
            if meta.mtime > cutoff:
                kept_from = version
                break
            doomed.append((version, meta))
        survivors = range(kept_from, head + 1)
        live = self._live_files(survivors)

        garbage = [
            meta
            for prefix in ("tree/", "sst/")
            for meta in store.list(prefix)
            if meta.path not in live and meta.mtime <= cutoff and is_collectable(meta.path)
        ]
        # A flush or compaction may have committed since the roots were
        # listed: its files are young, but never rely on that alone.
        live |= self._files_of_versions_after(head)
        garbage = [meta for meta in garbage if meta.path not in live]
        temp = store.stale_temp_files(cutoff) if isinstance(store, TempFileStore) else []
        report = GCReport(
            dry_run=dry_run,
            head=head,
            floor=floor,
            oldest_kept=survivors[0] if survivors else head,
            deleted_roots=tuple(version for version, _ in doomed),
            deleted_trees=tuple(meta.path for meta in garbage if meta.path.startswith("tree/")),
            deleted_ssts=tuple(meta.path for meta in garbage if meta.path.startswith("sst/")),
            bytes_freed=sum(meta.size for _, meta in doomed) + sum(meta.size for meta in garbage + temp),
            live_files=len(live),
            deleted_temp_files=tuple(meta.path for meta in temp),
        )
        if not dry_run:
            if isinstance(store, TempFileStore):
                for meta in temp:  # first: on a full disk, the space they hold helps the rest
                    store.delete_temp_file(meta.path)
            self._sweep(head, [version for version, _ in doomed], [meta.path for meta in garbage])
        return report

    def _live_files(self, survivors: range) -> set[str]:
        """Trees, their SSTs and delta SSTs referenced by the surviving roots (ascending versions)."""
        trees, live = self._mark(survivors).files()
        with ThreadPoolExecutor(self._parallelism) as pool:
            for tree, ssts in zip(trees, pool.map(self._ssts_of, trees)):
                live.add(tree)
                live.update(ssts)
        self._tree_ssts = {tree: self._tree_ssts[tree] for tree in trees if tree in self._tree_ssts}
        return live

    def _oldest_root(self, head: int) -> int:
        """The oldest version whose root exists (``head``'s does): ``O(log head)`` HEADs."""
        exists = self._state.chain.exists
        return last_true(0, head, lambda version: not exists(version)) + 1

    def _mark(self, survivors: range) -> _Marks:
        """The marks of ``survivors``: the previous pass's, extended by the roots since (or all, read anew)."""
        if not survivors:
            self._marks = None
            return _Marks(0, -1)
        first, last = survivors[0], survivors[-1]
        marks = self._marks
        if marks is not None and marks.first <= first <= marks.upto + 1 and marks.upto <= last:
            marks.drop_below(first)
            todo = range(marks.upto + 1, last + 1)
        else:
            marks = _Marks(first, first - 1)
            todo = survivors
        self._marks = None  # a pass that fails leaves no half-extended marks behind
        chain = self._state.chain

        def summary(version: int) -> RootSummary | None:
            # Straight from the chain: the root index's cache would keep one
            # summary per retained version.
            root = chain.try_read_root(version)
            return RootSummary.of(root) if root is not None else None

        def summaries(versions: range) -> list[RootSummary | None]:
            return [summary(version) for version in versions]

        # Each task reads a run of roots: a future per root cost more than
        # reading it from a local disk.
        per_task = max(1, _MARK_CHUNK // self._parallelism)
        with ThreadPoolExecutor(self._parallelism) as pool:
            for start in range(0, len(todo), _MARK_CHUNK):
                chunk = todo[start : start + _MARK_CHUNK]
                runs = [chunk[i : i + per_task] for i in range(0, len(chunk), per_task)]
                for found in (s for run in pool.map(summaries, runs) for s in run):
                    if found is not None:
                        marks.add(found)
        marks.upto = max(marks.upto, last)
        self._marks = marks
        return marks

    def _files_of_versions_after(self, head: int) -> set[str]:
        """Trees, SSTs and delta SSTs of versions committed after ``head``."""
        state = self._state
        state.catch_up()
        files: set[str] = set()
        for version in range(head + 1, state.version + 1):
            summary = self._index.summary(version)
            if summary is None:
                continue
            if summary.delta_sst is not None:
                files.add(summary.delta_sst)
            if summary.tree is not None:
                files.add(summary.tree)
                files.update(self._ssts_of(summary.tree))
        return files

    def _ssts_of(self, tree_path: str) -> frozenset[str]:
        ssts = self._tree_ssts.get(tree_path)
        if ssts is None:
            ssts = self._tree_ssts[tree_path] = frozenset(self._state.read_tree(tree_path).sst_paths())
        return ssts

    def _sweep(self, head: int, roots: list[int], files: list[str]) -> None:
        store = self._state.store
        if roots:
            # First point the hint past everything about to go: readers start
            # probing there, and a hint naming a deleted root sends them to a
            # full listing.
            try:
                store.put(HINT_PATH, str(head).encode("ascii"))
            except ObjectStoreError as exc:
                # A full disk: no hint beats one naming a deleted root (readers
                # list once; the hint writer puts a new one after a commit).
                log.warning("gc %s: could not rewrite %s (%s); deleting it", store.url, HINT_PATH, exc)
                store.delete(HINT_PATH)
        for version in roots:  # oldest first: the surviving chain stays dense
            store.delete(root_path(version))
        self._index.forget(roots)
        for path in files:
            store.delete(path)
        if roots or files:
            log.info("gc %s: deleted %d roots, %d files", store.url, len(roots), len(files))
