"""Size-tiered compaction planning: a pure function from a tree to a task.

The tree is a stack of *tiers*, newest first: every L0 SST is a tier of its
own (their key ranges overlap), then every sorted run. A compaction always
takes a contiguous slice of tiers and replaces it with one run, which keeps
the newest-first order intact (see :mod:`kvstore.compaction.edit`).

Rules, checked in order (RocksDB's "universal" compaction, simplified):

1. **Space amplification.** If everything newer than the oldest run is at
   least ``max_space_amplification`` times the oldest run, merge all tiers
   into one bottom run: that is where tombstones and obsolete versions are
   finally dropped, so this bounds the space they waste.
2. **L0 trigger**, by bytes (:func:`l0_due`). Merge all of L0 once it holds
   ``l0_compaction_bytes``; or ``l0_compaction_trigger`` SSTs while they hold
   under ``l0_compaction_bytes / l0_compaction_trigger`` (small flushes:
   cheap to merge, and every L0 SST is one more probe per point get); or
   :data:`L0_MAX_FILES_FACTOR` times that many SSTs, whatever their size.
   Merging costs bytes and an L0 SST costs a probe whatever its size, so a
   bulk load's large L0 SSTs wait until they are worth a rewrite: a 1M-row
   load (about 150 MB of L0) is written once by its flushes instead of
   once more by a compaction midway. The merge pulls in the next runs while
   each is at most ``1 + compaction_size_ratio`` times what is gathered so
   far. Runs then grow geometrically and each row is rewritten O(log n)
   times.
3. **Run count.** With more than ``max_sorted_runs`` runs, merge the newest
   runs (the smallest, since runs grow with age) down to the limit.

With rules 2 and 3 a point get consults at most about
``L0_MAX_FILES_FACTOR * l0_compaction_trigger + max_sorted_runs`` SSTs, and
``l0_compaction_trigger + max_sorted_runs`` while L0 is small.

Planning never does I/O; the runner (:mod:`kvstore.compaction.runner`)
executes the task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kvstore.format.tree import SSTDict, TreeManifest
from kvstore.options import MiB, StoreOptions

# L0 is merged at this many times ``l0_trigger`` SSTs whatever their bytes:
# the bound on L0 probes per point get while large SSTs wait for the budget.
L0_MAX_FILES_FACTOR: Final = 3


@dataclass(frozen=True)
class CompactionPolicy:
    """The knobs of :func:`plan` (a subset of the store options)."""

    l0_trigger: int = 4
    l0_bytes: int = 256 * MiB
    size_ratio: float = 1.0
    max_runs: int = 4
    max_space_amplification: float = 2.0

    def __post_init__(self) -> None:
        if self.l0_trigger < 1 or self.max_runs < 1 or self.l0_bytes < 1:
            raise ValueError("l0_trigger, l0_bytes and max_runs must be >= 1")
        if self.size_ratio < 0 or self.max_space_amplification <= 0:
            raise ValueError("size_ratio must be >= 0 and max_space_amplification > 0")

    @classmethod
    def from_options(cls, options: StoreOptions) -> CompactionPolicy:
        return cls(
            l0_trigger=options.l0_compaction_trigger,
            l0_bytes=options.l0_compaction_bytes,
            size_ratio=options.compaction_size_ratio,
            max_runs=options.max_sorted_runs,
            max_space_amplification=options.max_space_amplification,
        )


@dataclass(frozen=True)
class CompactionTask:
    """Merge these inputs into one run.

    Attributes:
        l0: consumed L0 SSTs, newest first (the oldest suffix of the tree's L0).
        runs: consumed runs, newest first (a contiguous window of the tree's runs).
        last_run: the output is the bottom-most run (no older data below it),
            so tombstones and expired rows at or below the floor can go.
        reason: which rule chose the task (for logs and stats).
    """

    l0: tuple[SSTDict, ...]
    runs: tuple[tuple[SSTDict, ...], ...]
    last_run: bool
    reason: str

    def input_paths(self) -> frozenset[str]:
        return frozenset(info["path"] for info in (*self.l0, *(i for run in self.runs for i in run)))

    def input_bytes(self) -> int:
        return sum(info["size"] for info in (*self.l0, *(i for run in self.runs for i in run)))


def _size(ssts: tuple[SSTDict, ...]) -> int:
    return sum(info["size"] for info in ssts)


def plan_full(tree: TreeManifest) -> CompactionTask | None:
    """Merge everything into one bottom run; None if the tree is empty.

    A single run is compacted again too: that drops the tombstones and
    obsolete versions that have fallen below the retention floor since.
    """
    if not tree.l0 and not tree.runs:
        return None
    return CompactionTask(tree.l0, tree.runs, last_run=True, reason="full")


def l0_due(files: int, size: int, policy: CompactionPolicy) -> bool:
    """Whether ``files`` L0 SSTs holding ``size`` bytes are due for a merge (rule 2).

    >>> policy = CompactionPolicy(l0_trigger=4, l0_bytes=400)
    >>> l0_due(4, 99, policy), l0_due(4, 100, policy), l0_due(2, 400, policy), l0_due(12, 100, policy)
    (True, False, True, True)
    """
    if files >= L0_MAX_FILES_FACTOR * policy.l0_trigger:
        return True
    if size >= policy.l0_bytes:
        return files >= min(2, policy.l0_trigger)  # one SST alone gains nothing from a merge
    return files >= policy.l0_trigger and size * policy.l0_trigger < policy.l0_bytes


def plan(tree: TreeManifest, policy: CompactionPolicy) -> CompactionTask | None:
    """The compaction ``tree`` needs now, or None when it is in shape.

    >>> sst = lambda name, size: {"path": name, "size": size}
    >>> tree = TreeManifest(l0=tuple(sst(f"l{i}", 10) for i in range(4)), runs=((sst("r0", 35),), (sst("r1", 500),)))
    >>> task = plan(tree, CompactionPolicy(l0_trigger=4))
    >>> [i["path"] for i in task.l0], len(task.runs), task.last_run, task.reason
    (['l0', 'l1', 'l2', 'l3'], 1, False, 'l0')
    """
    l0, runs = tree.l0, tree.runs
    tiers = [_size((info,)) for info in l0] + [_size(run) for run in runs]
    l0_size = _size(l0)
    due = bool(l0) and l0_due(len(l0), l0_size, policy)
    if len(tiers) < 2 and not due:
        return None
    if runs and len(tiers) >= 2:
        newer = sum(tiers[:-1])
        if newer >= policy.max_space_amplification * max(1, tiers[-1]):
            return CompactionTask(l0, runs, last_run=True, reason="space")
    if due:
        gathered = l0_size
        taken = 0
        for run in runs:
            if _size(run) > gathered * (1.0 + policy.size_ratio):
                break
            gathered += _size(run)
            taken += 1
        return CompactionTask(l0, runs[:taken], last_run=taken == len(runs), reason="l0")
    if len(runs) > policy.max_runs:
        # The L0 SSTs stay: they are newer than every run, so the merged
        # run can take the place of run 0 behind them.
        count = len(runs) - policy.max_runs + 1
        return CompactionTask((), runs[:count], last_run=count == len(runs), reason="runs")
    return None
