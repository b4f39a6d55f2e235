"""Flush: move the rows of the unflushed versions into L0 SSTs.

Unflushed versions ``a..b`` (``a = tree.flushed_upto + 1``, ``b`` = this
handle's head) have their rows in the memtable: exactly the memtable rows
with ``flushed_seq < seq <= last_seq(b)``. A flush writes them to
``sst/<uuid>.sst``, derives a tree manifest with that SST in front of L0 and
``flushed_upto = b``, and commits it as a tree-only version
(:func:`~kvstore.compaction.install.install_edit`). Every handle that
applies that version swaps in a memtable without the flushed rows
(:meth:`~kvstore.state.EngineState._install_tree`), and opening the store
reads only the versions after ``b``.

A version whose rows are in a delta SST (a large commit, see
:mod:`kvstore.committer`) is not rewritten: its delta SST becomes an L0 SST
as it is (*adopted*), so a bulk load writes each byte once before
compaction. L0 SSTs must stay newest first with disjoint seq ranges (a point
get stops at the first L0 hit), so the memtable rows of the versions between
adopted delta SSTs go to one written SST per gap. The adopted file stays
referenced by its root and, from the flush on, by the tree: GC keeps it while
either survives, and a flush that loses a race does not delete it.

Rows go to the SST writer as Arrow batches the memtable builds from its
apply log (:meth:`~kvstore.memtable.Memtable.flush_batches`, in C): what the
merge iterator in compaction mode would keep with the retention floor, so
versions already superseded below the floor never reach storage; L0 is
never the last run, so tombstones stay.

Two handles flushing the same versions race on the tree: one wins, the other
deletes the SSTs it wrote. A flush rebases over a concurrent compaction (which leaves
``flushed_upto`` alone).
"""

from __future__ import annotations

import itertools
import time
import uuid
from dataclasses import dataclass
from typing import Any

from kvstore.compaction.edit import TreeEdit
from kvstore.errors import EditConflictError
from kvstore.compaction.install import install_edit
from kvstore.format.sst import SSTInfo, write_sst
from kvstore.options import StoreOptions
from kvstore.state import EngineState, UnflushedDeltaSST


@dataclass(frozen=True)
class FlushResult:
    """One committed flush.

    Attributes:
        flushed_upto: versions up to this one are now in the tree.
        flushed_seq: last seq of ``flushed_upto``.
        sst: the newest L0 SST this flush wrote, or None when it wrote none
            (tree-only or checkpoint commits, or only delta SSTs to adopt).
        tree_path: the committed tree manifest.
        written: every L0 SST this flush wrote, oldest first.
        adopted: the delta SSTs it made L0 SSTs without rewriting, oldest first.
    """

    flushed_upto: int
    flushed_seq: int
    sst: SSTInfo | None
    tree_path: str
    written: tuple[SSTInfo, ...] = ()
    adopted: tuple[SSTInfo, ...] = ()


def needs_flush(state: EngineState, options: StoreOptions) -> bool:
    """Whether the unflushed versions or the memtable crossed a flush threshold.

    Lock-free and approximate (it may read the head and tree of neighbouring
    versions); it only decides whether to try.
    """
    unflushed = state.version - state.tree.flushed_upto
    if unflushed <= 0:
        return False
    return unflushed >= options.flush_max_versions or state.layers.memtable.approx_bytes >= options.flush_max_bytes


def flush_once(state: EngineState, committer: Any, floor_seq: int, options: StoreOptions) -> FlushResult | None:
    """Flush every version this handle has seen; None if there is nothing to flush.

    Versions without rows (flushes, compactions, checkpoints) are flushed
    only once ``flush_max_versions`` of them pile up.

    Args:
        state: the engine state to flush from.
        committer: the store's committer.
        floor_seq: the retention floor (versions below it may be dropped).
        options: store options (the GC grace bounds how old outputs may get).

    Raises:
        EditConflictError: another handle flushed these versions first (our SST
            was deleted); the caller may look again.
        StoreError: writing or committing failed.
    """
    view = state.view()
    tree = view.tree
    if view.version <= tree.flushed_upto:
        return None
    floor = min(floor_seq, view.last_seq)
    low, high = tree.flushed_seq, view.last_seq
    adopted = [d for d in view.delta_ssts if low < d.first_seq and d.last_seq <= high]
    # Rows applied after the view (seq > high) may already be in the memtable:
    # they belong to the next flush (snapshot_seq drops them).
    segments = [view.layers.memtable.flush_batches(lo, hi, floor) for lo, hi in _gaps(low, high, adopted)]
    firsts = [next(batches, None) for batches in segments]
    if not adopted and all(first is None for first in firsts) and (
        view.version - tree.flushed_upto < options.flush_max_versions
    ):
        # Only tree-only or checkpoint versions: flushing them would just add
        # one more such version. Worth it only to bound what opening reads.
        return None
    written_at = time.monotonic()
    # Oldest first: each gap between delta SSTs, then the delta SST after it.
    l0: list[dict[str, Any]] = []
    written: list[SSTInfo] = []
    for index, (first, batches) in enumerate(zip(firsts, segments)):
        if first is not None:
            info = write_sst(
                state.store, f"sst/{uuid.uuid4().hex}.sst", itertools.chain((first,), batches),
                compression=options.sst_compression,
            )
            written.append(info)
            l0.append(info.to_dict())
        if index < len(adopted):
            l0.append(adopted[index].info)
    edit = TreeEdit(
        added_l0=tuple(reversed(l0)),
        adopted=frozenset(d.info["path"] for d in adopted),
        expected_flushed_upto=tree.flushed_upto,
        flushed_upto=view.version,
        flushed_seq=view.last_seq,
        floor_seq=floor,
    )
    # Build the trimmed memtable the commit will swap in now, off the chain
    # lock: the commit then adds only the versions applied after this line.
    view.layers.memtable.prepare_without_upto(view.last_seq, state.last_seq)
    descriptor = {
        "op": "flush",
        "flushed_upto": view.version,
        "rows": sum(info.row_count for info in written),
        "adopted": len(adopted),
    }
    path = install_edit(
        state, committer, edit, descriptor=descriptor, written_at=written_at, max_age_s=options.gc_grace_s / 2
    )
    return FlushResult(
        view.version,
        view.last_seq,
        written[-1] if written else None,
        path,
        tuple(written),
        tuple(SSTInfo.from_dict(d.info) for d in adopted),
    )


def _gaps(low: int, high: int, adopted: list[UnflushedDeltaSST]) -> list[tuple[int, int]]:
    """The seq ranges ``(lo, hi]`` of ``(low, high]`` around the adopted delta SSTs, oldest first.

    One more range than delta SSTs; a range may be empty (``lo == hi``).
    """
    gaps = []
    for delta in adopted:
        gaps.append((low, delta.first_seq - 1))
        low = delta.last_seq
    gaps.append((low, high))
    return gaps


def flush_all(
    state: EngineState, committer: Any, floor_seq: int, options: StoreOptions, attempts: int = 8
) -> FlushResult | None:
    """Flush until every version seen at the call is in the tree (by us or a rival).

    Returns:
        Our last flush, or None if nothing needed flushing or a rival did it.

    Raises:
        EditConflictError: rivals kept winning with partial flushes ``attempts`` times.
        StoreError: writing or committing failed.
    """
    target = state.version
    for _ in range(attempts):
        if state.tree.flushed_upto >= target:
            return None
        try:
            return flush_once(state, committer, floor_seq, options)
        except EditConflictError:
            state.catch_up()  # a rival flushed: see how far, then maybe go on
    raise EditConflictError(f"could not flush up to version {target} in {attempts} attempts")
