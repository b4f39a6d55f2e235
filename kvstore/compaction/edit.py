"""Tree edits: what a flush or compaction changes, re-appliable to a newer tree.

A flush or compaction is computed from one tree manifest (its *base*) but may
be committed on top of a newer one: another handle may have flushed or
compacted meanwhile. Rather than redoing the work, the result is expressed as
a :class:`TreeEdit` (SSTs consumed, SSTs produced, flush bounds) and applied
with :func:`apply_edit` to whatever tree is current at commit time. The edit
applies if everything it consumed is still there, in the same relative
order; otherwise it conflicts and the loser deletes its outputs.

Ordering rules that make the rebase safe (newest data first everywhere):

* a flush prepends its SST to L0, and only on a tree flushed exactly up to
  where its own rows start (``expected_flushed_upto``); two flushes of the
  same versions conflict;
* a compaction consumes the *oldest* L0 SSTs (a suffix of ``l0``) and/or a
  contiguous window of runs; when it consumes L0 SSTs its runs must start at
  the newest run, since nothing may sit between them in age. Its output run
  takes the place of the newest run it consumed (or the front of ``runs``).
  Newer L0 SSTs flushed after it was planned stay in front: they are newer
  than everything it merged.

>>> base = TreeManifest(l0=({"path": "sst/b"}, {"path": "sst/a"}))
>>> edit = TreeEdit(removed=frozenset({"sst/b", "sst/a"}), added_run=({"path": "sst/r"},), floor_seq=7)
>>> newer = TreeManifest(l0=({"path": "sst/c"},) + base.l0)   # a flush landed meanwhile
>>> rebased = apply_edit(newer, edit)
>>> [i["path"] for i in rebased.l0], [[i["path"] for i in run] for run in rebased.runs], rebased.floor_seq
(['sst/c'], [['sst/r']], 7)
"""

from __future__ import annotations

from dataclasses import dataclass

from kvstore.errors import EditConflictError
from kvstore.format.tree import SSTDict, TreeManifest



@dataclass(frozen=True)
class TreeEdit:
    """A flush and/or compaction result, relative to the SSTs it touched.

    Attributes:
        removed: SST paths the compaction consumed (empty for a flush).
        added_l0: SSTs a flush produced, newest first (prepended to L0).
        adopted: paths in ``added_l0`` that are delta SSTs the flush adopted:
            their versions' roots reference them, so they are not this edit's
            outputs and a loser must not delete them.
        added_run: the run a compaction produced (None: no run; an empty
            tuple: every row was dropped, the inputs just disappear).
        expected_flushed_upto: a flush applies only to a tree flushed up to
            exactly this version (None: not a flush).
        flushed_upto: the flush's new ``flushed_upto``.
        flushed_seq: last seq of version ``flushed_upto``.
        floor_seq: the retention floor the result was computed with; the
            tree keeps the maximum it has seen.
    """

    removed: frozenset[str] = frozenset()
    added_l0: tuple[SSTDict, ...] = ()
    adopted: frozenset[str] = frozenset()
    added_run: tuple[SSTDict, ...] | None = None
    expected_flushed_upto: int | None = None
    flushed_upto: int = 0
    flushed_seq: int = 0
    floor_seq: int = 0

    @property
    def is_flush(self) -> bool:
        return self.expected_flushed_upto is not None

    def output_paths(self) -> list[str]:
        """Every SST this edit wrote (what the loser of a race deletes); adopted ones are not."""
        added = (*self.added_l0, *(self.added_run or ()))
        return [info["path"] for info in added if info["path"] not in self.adopted]


def apply_edit(tree: TreeManifest, edit: TreeEdit) -> TreeManifest:
    """Return ``tree`` with ``edit`` applied.

    Raises:
        EditConflictError: a consumed SST is missing or no longer in a position
            the output can replace, or (flush) ``tree`` is not flushed up to
            ``edit.expected_flushed_upto``.
    """
    l0, runs = list(tree.l0), [list(run) for run in tree.runs]
    flushed_upto, flushed_seq = tree.flushed_upto, tree.flushed_seq
    if edit.is_flush:
        if tree.flushed_upto != edit.expected_flushed_upto:
            raise EditConflictError(
                f"tree is flushed up to version {tree.flushed_upto}, the flush expected {edit.expected_flushed_upto}"
            )
        flushed_upto, flushed_seq = edit.flushed_upto, edit.flushed_seq
    if edit.removed:
        l0, runs = _replace_inputs(l0, runs, edit)
    l0 = [*edit.added_l0, *l0]
    return TreeManifest(
        flushed_upto=flushed_upto,
        l0=tuple(l0),
        runs=tuple(tuple(run) for run in runs),
        flushed_seq=flushed_seq,
        floor_seq=max(tree.floor_seq, edit.floor_seq),
    )


def _replace_inputs(
    l0: list[SSTDict], runs: list[list[SSTDict]], edit: TreeEdit
) -> tuple[list[SSTDict], list[list[SSTDict]]]:
    removed = edit.removed
    present = {info["path"] for info in l0} | {info["path"] for run in runs for info in run}
    missing = removed - present
    if missing:
        raise EditConflictError(f"{len(missing)} input SST(s) are gone, e.g. {sorted(missing)[0]}")
    l0_hit = [info["path"] in removed for info in l0]
    first_l0 = l0_hit.index(True) if any(l0_hit) else len(l0)
    if not all(l0_hit[first_l0:]):
        raise EditConflictError("consumed L0 SSTs are not the oldest ones")
    run_hit = []
    for run in runs:
        hits = {info["path"] in removed for info in run}
        if len(hits) > 1:
            raise EditConflictError("a sorted run was only partly consumed")
        run_hit.append(hits == {True})
    hit_indexes = [i for i, hit in enumerate(run_hit) if hit]
    if hit_indexes and hit_indexes != list(range(hit_indexes[0], hit_indexes[-1] + 1)):
        raise EditConflictError("consumed runs are not contiguous")
    if first_l0 < len(l0) and hit_indexes and hit_indexes[0] != 0:
        raise EditConflictError("a run newer than the consumed ones sits between them and L0")
    position = hit_indexes[0] if hit_indexes else 0
    kept_runs = [run for run, hit in zip(runs, run_hit) if not hit]
    if edit.added_run:
        kept_runs.insert(position, list(edit.added_run))
    return l0[:first_l0], kept_runs
