"""The engine's in-memory picture of the store at its latest known version.

One ``EngineState`` per open store handle. It knows the latest version this
handle has seen, its last seq, the tree (SST layers) and the memtable holding
the rows of every unflushed version. New versions, ours or other writers',
enter only through :meth:`EngineState.apply_root`, in version order, under
``chain_lock``.

Readers never take the lock: they read ``last_seq`` (a snapshot seq) and the
immutable ``layers`` object. Rows are applied to the memtable *before*
``last_seq`` moves past them, so a reader at seq ``s`` never sees half a
version.

When a version brings a new tree (a flush or compaction, committed by any
handle), :meth:`EngineState._install_tree` swaps in a new ``Layers`` whose
memtable holds only rows newer than the tree's ``flushed_seq``: the flushed
rows now live in an L0 SST. Readers holding the previous ``Layers`` (open
snapshots) keep their complete view; nothing is trimmed in place.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from kvstore.cache import BlockCache
from kvstore.chain import VersionChain
from kvstore.errors import CorruptionError
from kvstore.format.root import RootFile
from kvstore.format.rows import Row
from kvstore.format.sst import SSTInfo, SSTReader
from kvstore.format.tree import TreeManifest, decode_tree
from kvstore.memtable import Memtable
from kvstore.objstore.base import ObjectStore

log = logging.getLogger(__name__)

# Called with every newly applied version and its rows (the oracle listens).
VersionListener = Callable[[RootFile, list[Row]], None]


class SortedRun:
    """SSTs with disjoint key ranges, in key order (one level of the tree)."""

    __slots__ = ("ssts", "_max_keys")

    def __init__(self, ssts: tuple[SSTReader, ...]) -> None:
        self.ssts = ssts
        self._max_keys = [sst.info.max_key for sst in ssts]

    def find(self, key: bytes) -> SSTReader | None:
        """The one SST whose key range holds ``key``, if any (binary search)."""
        index = bisect.bisect_left(self._max_keys, key)
        if index < len(self.ssts) and self.ssts[index].info.min_key <= key:
            return self.ssts[index]
        return None

    def overlapping(self, start: bytes | None, end: bytes | None) -> list[SSTReader]:
        """SSTs that may hold keys in ``[start, end)``, in key order."""
        return [
            sst
            for sst in self.ssts
            if (start is None or sst.info.max_key >= start) and (end is None or sst.info.min_key < end)
        ]


@dataclass(frozen=True)
class Layers:
    """What a reader consults, newest first: memtable, L0 SSTs, sorted runs."""

    memtable: Memtable
    l0: tuple[SSTReader, ...] = ()
    runs: tuple[SortedRun, ...] = ()


@dataclass(frozen=True)
class UnflushedDeltaSST:
    """The delta SST of an applied version the tree does not hold yet.

    A flush adopts it as an L0 SST as it is (:mod:`kvstore.flush`): it holds
    exactly the version's rows, seqs ``first_seq..last_seq``, written by the
    same SST writer a flush uses.
    """

    first_seq: int
    last_seq: int
    info: dict[str, Any]


@dataclass(frozen=True)
class StateView:
    """A consistent picture of the state at one version (see :meth:`EngineState.view`)."""

    version: int
    last_seq: int
    tree_path: str | None
    tree: TreeManifest
    layers: Layers
    # Delta SSTs of the unflushed versions up to ``version``, oldest first.
    delta_ssts: tuple[UnflushedDeltaSST, ...] = ()


class EngineState:
    """See the module docstring. ``chain_lock`` serialises writers of the state."""

    def __init__(self, store: ObjectStore, chain: VersionChain, cache: BlockCache, open_parallelism: int) -> None:
        self.store = store
        self.chain = chain
        self.cache = cache
        self.chain_lock = threading.RLock()
        # (version, last_seq), replaced as one object so lock-free readers
        # always see a matching pair.
        self.head: tuple[int, int] = (-1, 0)
        self.tree_path: str | None = None
        self.tree = TreeManifest()
        self.layers = Layers(Memtable())
        # Delta SSTs of unflushed versions, oldest first; replaced, never mutated.
        self.delta_ssts: tuple[UnflushedDeltaSST, ...] = ()
        # Checkpoint map of the latest version: carried into every new root.
        self.checkpoints: dict[str, dict[str, Any]] = {}
        self.listeners: list[VersionListener] = []
        # Called with the new head seq when the state had to be rebuilt from
        # the latest version (see catch_up): the oracle then refuses older txns.
        self.reload_listeners: list[Callable[[int], None]] = []
        # When this handle last confirmed it had the latest version.
        self.last_sync = time.monotonic()
        self._open_parallelism = max(1, open_parallelism)

    @property
    def version(self) -> int:
        return self.head[0]

    @property
    def last_seq(self) -> int:
        return self.head[1]

    def view(self) -> StateView:
        """Version, tree and layers taken together under the chain lock.

        Flush and compaction plan from this: the tree, the layers and the
        head must belong to the same version.
        """
        with self.chain_lock:
            version, last_seq = self.head
            return StateView(version, last_seq, self.tree_path, self.tree, self.layers, self.delta_ssts)

    # -- loading -------------------------------------------------------------

    def load(self, latest: int) -> None:
        """Initialise from version ``latest``: its tree plus every unflushed version.

        Reads the head root, its tree manifest, the tail of each of the
        tree's SSTs and the root of each unflushed version (at most
        ``flush_max_versions``), nothing older: what open costs follows the
        data and the unflushed tail, never the history. The SST tails and
        the roots are read ``open_parallelism`` at a time (on S3 each is a
        round trip).
        """
        with self.chain_lock:
            head = self.chain.read_root(latest)
            versions = list(range(head.oldest_needed, latest))
            if self._open_parallelism == 1:  # no thread for a cheap handle
                self._install_tree(head.tree)
                roots = [self.chain.read_root(v) for v in versions]
            else:
                with ThreadPoolExecutor(self._open_parallelism) as pool:
                    pending = [pool.submit(self.chain.read_root, v) for v in versions]
                    self._install_tree(head.tree, pool)
                    roots = [future.result() for future in pending]
            self.head = (-1, 0)  # accept the first loaded version without a parent check
            for root in [*roots, head]:
                # Only the head's tree matters (installed above): older
                # unflushed versions may point at trees since replaced.
                self.apply_root(root, install_tree=False)
            self.last_sync = time.monotonic()

    def _install_tree(self, tree_path: str | None, pool: Executor | None = None) -> None:
        if tree_path == self.tree_path:
            return
        try:
            tree = self.read_tree(tree_path)
            memtable = self.layers.memtable
            if tree.flushed_seq > self.tree.flushed_seq:
                # The flushed rows are in the new tree's L0 now: keep only the
                # newer ones, in a new memtable (readers of the old one go on).
                memtable = memtable.without_upto(tree.flushed_seq)
                self.delta_ssts = tuple(d for d in self.delta_ssts if d.first_seq > tree.flushed_seq)
            layers = self.open_layers(tree, memtable, pool)
        except FileNotFoundError as exc:
            # Only possible if GC removed the files of a version this handle
            # had not applied yet, i.e. it fell behind the retention window.
            raise CorruptionError(f"tree {tree_path} or one of its SSTs is missing: {exc}") from exc
        self.tree_path, self.tree = tree_path, tree
        self.layers = layers

    def read_tree(self, tree_path: str | None) -> TreeManifest:
        """Read and verify the manifest at ``tree_path`` (None: the empty tree).

        Raises:
            FileNotFoundError: no such manifest.
            CorruptionError: it fails its checksum.
        """
        return TreeManifest() if tree_path is None else decode_tree(self.store.get(tree_path), tree_path)

    def open_layers(self, tree: TreeManifest, memtable: Memtable, pool: Executor | None = None) -> Layers:
        """Layers over ``tree``'s SSTs (opened through the block cache) and ``memtable``.

        ``pool``: opens the SSTs on its threads (open of the store: each
        uncached SST is a range read of its tail).

        Raises:
            FileNotFoundError: an SST of the tree is missing.
        """
        if pool is None:
            l0 = tuple(self._reader(info) for info in tree.l0)
            runs = tuple(SortedRun(tuple(self._reader(info) for info in run)) for run in tree.runs)
            return Layers(memtable, l0, runs)
        opened = iter(list(pool.map(self._reader, [*tree.l0, *(info for run in tree.runs for info in run)])))
        l0 = tuple(next(opened) for _ in tree.l0)
        runs = tuple(SortedRun(tuple(next(opened) for _ in run)) for run in tree.runs)
        return Layers(memtable, l0, runs)

    def _reader(self, info: dict[str, Any]) -> SSTReader:
        sst = SSTInfo.from_dict(info)
        return SSTReader.open(self.store, sst.path, cache=self.cache, size=sst.size, tail_size=sst.tail_size)

    # -- applying versions ---------------------------------------------------

    def rows_of(self, root: RootFile) -> list[Row]:
        """The delta rows of a version, inline or from its delta SST."""
        if root.delta_sst is not None:
            info = SSTInfo.from_dict(root.delta_sst)
            return list(SSTReader.open(self.store, info.path, cache=None, size=info.size, tail_size=info.tail_size).iter())
        return root.delta_rows()

    def apply_root(
        self, root: RootFile, rows: list[Row] | None = None, *, install_tree: bool = True, in_memtable: bool = False
    ) -> None:
        """Make ``root`` (the next version) current; ``rows`` if the caller has them.

        ``install_tree=False`` keeps the current tree (used while loading).
        ``in_memtable=True``: the caller already applied ``rows`` to the
        memtable (the committer does, while the root file is written).

        Requires: ``chain_lock`` held and ``root.version == self.version + 1``
        (or the first version loaded).
        """
        if self.version >= 0 and root.version != self.version + 1:
            raise CorruptionError(f"version {root.version} applied after {self.version}: the chain has a gap")
        if self.version >= 0 and root.first_seq != self.last_seq + 1:
            raise CorruptionError(
                f"root {root.version} starts at seq {root.first_seq}, expected {self.last_seq + 1}"
            )
        if rows is None:
            rows = self.rows_of(root)
        if not in_memtable:
            self.layers.memtable.apply(rows)
        if root.delta_sst is not None and root.first_seq > self.tree.flushed_seq:
            self.delta_ssts = (*self.delta_ssts, UnflushedDeltaSST(root.first_seq, root.last_seq, root.delta_sst))
        if install_tree:
            self._install_tree(root.tree)
        self.checkpoints = root.checkpoints
        self.head = (root.version, root.last_seq)  # last: readers see the version only once whole
        for listener in self.listeners:
            listener(root, rows)

    def catch_up(self, stale_after_s: float | None = None) -> list[RootFile]:
        """Apply every version other writers committed after ours; return them.

        Tailing probes ``version + 1`` only, which cannot tell "no newer
        version" from "GC deleted it": a handle asleep for longer than the
        retention window plus GC grace could find its successor gone, and a
        commit there would re-create a root nobody reads. So when the handle
        has not confirmed the head for ``stale_after_s`` seconds, a miss is
        double-checked by locating the latest version (hint + galloping); if
        the chain moved on past a gap, the state is rebuilt from the latest.
        """
        applied: list[RootFile] = []
        with self.chain_lock:
            while True:
                root = self.chain.try_read_root(self.version + 1)
                if root is None:
                    break
                self.apply_root(root)
                applied.append(root)
            stale = stale_after_s is not None and time.monotonic() - self.last_sync > stale_after_s
            if stale and not applied:
                latest = self.chain.find_latest()
                if latest is not None and latest > self.version:
                    log.warning(
                        "%s: versions %d..%d were removed by GC while this handle was idle; reloading at %d",
                        self.store.url, self.version + 1, latest, latest,
                    )
                    self._reload(latest)
            self.last_sync = time.monotonic()
        return applied

    def _reload(self, latest: int) -> None:
        # Requires chain_lock. Start over from an empty picture of the store.
        self.tree_path, self.tree = None, TreeManifest()
        self.layers = Layers(Memtable())
        self.delta_ssts = ()
        self.load(latest)
        for listener in self.reload_listeners:
            listener(self.last_seq)
