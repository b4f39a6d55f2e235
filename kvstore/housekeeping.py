"""The housekeeper: flush, compaction and GC for one store handle.

The part of a :class:`kvstore.store.Store` behind ``flush()``, ``compact()``,
``gc()``, ``retention_floor()`` and ``maintenance_stats()`` (the Store
forwards them here, and copies their documentation). It owns the retention
floor, the root index and the garbage collector, runs compactions itself,
and hands flushes to :mod:`kvstore.flush`. It runs them on request and, with
``background_maintenance``, from two daemon threads:

* **flush thread**: every ``maintenance_interval_s``, flush when the unflushed
  versions or the memtable cross their thresholds;
* **compaction thread**: at the same interval, compact while the planner finds
  work, and run GC every ``gc_interval_s`` (if non-zero).

Two threads, so that a long compaction never holds up a flush (the memtable
would grow meanwhile). Flushes are serialised among themselves, and so are
compactions, by one lock each; a flush and a compaction may overlap and
rebase over each other at commit (:mod:`kvstore.compaction.install`).

Background failures are logged and retried at the next tick: a flaky store
must not kill the threads, and nothing is lost by waiting (unflushed data is
durable in the root chain).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from kvstore.clock import StorageClock
from kvstore.compaction.edit import TreeEdit
from kvstore.compaction.install import install_edit
from kvstore.compaction.planner import CompactionPolicy, CompactionTask, plan, plan_full
from kvstore.compaction.runner import run_compaction
from kvstore.errors import CompactionAbortedError, EditConflictError, StoreError
from kvstore.flush import FlushResult, flush_all, flush_once, needs_flush
from kvstore.gc import GarbageCollector, GCReport
from kvstore.history import RootIndex
from kvstore.options import StoreOptions
from kvstore.retention import Retention, RetentionFloor
from kvstore.state import EngineState
from kvstore.watermark import Watermark

log = logging.getLogger(__name__)

# Compactions one compact() call runs at most: each one shrinks the tree, so
# this only stops a planner bug from looping forever.
_MAX_COMPACTIONS_PER_CALL = 64


@dataclass(frozen=True)
class CompactionResult:
    """One committed compaction.

    Attributes:
        reason: the planner rule that chose it (``space``, ``l0``, ``runs``, ``full``).
        inputs: SSTs merged.
        outputs: SSTs written.
        bytes_read: input bytes.
        bytes_written: output bytes.
        seconds: wall time from planning to commit.
        floor_seq: the retention floor applied.
    """

    reason: str
    inputs: int
    outputs: int
    bytes_read: int
    bytes_written: int
    seconds: float
    floor_seq: int


@dataclass
class MaintenanceStats:
    """Counters since the handle opened (read them via ``Store.maintenance_stats()``)."""

    flushes: int = 0
    # Bytes of the L0 SSTs flushes wrote; adopted delta SSTs are not
    # rewritten, so they count in adopted_ssts and adopted_bytes instead.
    flushed_bytes: int = 0
    adopted_ssts: int = 0
    adopted_bytes: int = 0
    compactions: int = 0
    compaction_bytes_read: int = 0
    compaction_bytes_written: int = 0
    compaction_seconds: float = 0.0
    conflicts: int = 0
    gc_runs: int = 0
    gc_bytes_freed: int = 0
    background_errors: int = 0


class Housekeeper:
    """See the module docstring. Thread-safe.

    ``index`` (the root index) and ``retention`` are shared with the other
    parts that read old versions (:mod:`kvstore.timetravel`).
    """

    def __init__(
        self,
        state: EngineState,
        committer: Any,
        watermark: Watermark,
        options: StoreOptions,
        clock: StorageClock,
        check_open: Callable[[], None],
        reap_leases: Callable[[], object] | None = None,
    ) -> None:
        """``reap_leases``: revokes expired leases (``Store.reap_leases``), run each maintenance interval."""
        self._state = state
        self._reap_leases = reap_leases
        self._committer = committer
        self._options = options
        self._check_open = check_open
        self.index = RootIndex(state.chain)
        self.retention = Retention(state, self.index, watermark, options, clock)
        self.collector = GarbageCollector(state, self.index, self.retention, options, clock)
        self.stats = MaintenanceStats()
        self._policy = CompactionPolicy.from_options(options)
        self._flush_lock = threading.Lock()
        self._compact_lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._last_gc = time.monotonic()  # the first background GC waits one interval

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        """Start the background threads if the options ask for them."""
        if not (self._options.background_maintenance and self._options.background_threads):
            return
        steps: list[tuple[str, Callable[[], object]]] = [("flush", self._flush_tick), ("compact", self._compact_tick)]
        if self._reap_leases is not None:
            steps.append(("leases", self._reap_leases))
        for name, step in steps:
            thread = threading.Thread(target=self._loop, args=(step,), name=f"lakekv-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop the threads; a running compaction aborts and deletes its outputs. Idempotent."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    def _loop(self, step: Callable[[], object]) -> None:
        while not self._stop.wait(self._options.maintenance_interval_s):
            try:
                step()
            except EditConflictError as exc:  # lost a race: the winner did the work
                self._count(conflicts=1)
                log.debug("background maintenance lost a race: %s", exc)
            except CompactionAbortedError:
                return
            except StoreError as exc:
                self._count(background_errors=1)
                log.warning("background maintenance of %s failed (will retry): %s", self._state.store.url, exc)

    def _flush_tick(self) -> None:
        if needs_flush(self._state, self._options):
            self._flush(all_versions=False)

    def _compact_tick(self) -> None:
        self._compact(full=False)
        interval = self._options.gc_interval_s
        if interval > 0 and time.monotonic() - self._last_gc >= interval:
            self._last_gc = time.monotonic()
            self._gc(dry_run=False)

    def _count(self, **increments: float) -> None:
        with self._stats_lock:
            for name, amount in increments.items():
                setattr(self.stats, name, getattr(self.stats, name) + amount)

    # -- the Store's methods ----------------------------------------------------

    def flush(self) -> FlushResult | None:
        """Move every version this handle has seen into an L0 SST now.

        Returns:
            The flush, or None when there was nothing to flush (or another
            handle flushed these versions first).

        Raises:
            StoreClosedError: the store is closed.
            EditConflictError: rivals kept winning with partial flushes.
            StoreError: writing or committing failed.
        """
        self._check_open()
        return self._flush(all_versions=True)

    def compact(self, full: bool = False) -> list[CompactionResult]:
        """Run the compactions the tree needs now; ``full``: merge it all into one run.

        A full compaction also drops tombstones and versions below the
        retention floor everywhere.

        Raises:
            TypeError: ``full`` is not a bool.
            StoreClosedError: the store is closed.
            TreeChangedError: another handle compacted the same SSTs first.
        """
        if not isinstance(full, bool):
            raise TypeError(f"full must be a bool, not {type(full).__name__}")
        self._check_open()
        return self._compact(full)

    def gc(self, dry_run: bool = False) -> GCReport:
        """Delete root files older than retention and files nothing references.

        Args:
            dry_run: only report what would be deleted.

        Raises:
            TypeError: ``dry_run`` is not a bool.
            StoreClosedError: the store is closed.
        """
        if not isinstance(dry_run, bool):
            raise TypeError(f"dry_run must be a bool, not {type(dry_run).__name__}")
        self._check_open()
        return self._gc(dry_run)

    def retention_floor(self) -> RetentionFloor:
        """The current retention floor of this handle and what sets it."""
        self._check_open()
        return self.retention.floor()

    def maintenance_stats(self) -> dict[str, Any]:
        """Flush, compaction and GC counters since the handle opened."""
        self._check_open()
        return dict(vars(self.stats))

    # -- the work (also run by the background threads) ----------------------------

    def _flush(self, all_versions: bool) -> FlushResult | None:
        """Flush the unflushed versions (``all_versions``: until the head seen now is in).

        Raises:
            EditConflictError: (``all_versions`` false) a rival flushed first.
            StoreError: writing or committing failed.
        """
        with self._flush_lock:
            floor = self.retention.floor().seq
            if all_versions:
                result = flush_all(self._state, self._committer, floor, self._options)
            else:
                result = flush_once(self._state, self._committer, floor, self._options)
        if result is not None:
            self._count(
                flushes=1,
                flushed_bytes=sum(info.size for info in result.written),
                adopted_ssts=len(result.adopted),
                adopted_bytes=sum(info.size for info in result.adopted),
            )
        return result

    def _compact(self, full: bool) -> list[CompactionResult]:
        """Compact while the planner finds work (``full``: once, into one bottom run).

        Raises:
            EditConflictError: a rival consumed the same inputs first.
            CompactionAbortedError: the store is closing.
            StoreError: reading, writing or committing failed.
        """
        results: list[CompactionResult] = []
        with self._compact_lock:
            for _ in range(1 if full else _MAX_COMPACTIONS_PER_CALL):
                tree = self._state.view().tree
                task = plan_full(tree) if full else plan(tree, self._policy)
                if task is None:
                    break
                results.append(self._compact_task(task))
        return results

    def _compact_task(self, task: CompactionTask) -> CompactionResult:
        started = time.monotonic()
        floor = self.retention.floor().seq
        try:
            output = run_compaction(
                self._state.store,
                task,
                floor,
                self._options.sst_target_bytes,
                should_stop=self._stop.is_set,
                compression=self._options.sst_compression,
            )
        except FileNotFoundError as exc:
            # An input vanished: a rival compacted it away and GC collected it.
            raise EditConflictError(f"a compaction input is gone: {exc}") from exc
        edit = TreeEdit(
            removed=task.input_paths(),
            added_run=tuple(info.to_dict() for info in output.ssts),
            floor_seq=floor,
        )
        descriptor = {"op": "compact", "reason": task.reason, "inputs": len(task.input_paths())}
        install_edit(
            self._state,
            self._committer,
            edit,
            descriptor=descriptor,
            written_at=output.first_write_at if output.first_write_at is not None else time.monotonic(),
            max_age_s=self._options.gc_grace_s / 2,
        )
        result = CompactionResult(
            reason=task.reason,
            inputs=len(task.input_paths()),
            outputs=len(output.ssts),
            bytes_read=output.bytes_read,
            bytes_written=output.bytes_written,
            seconds=time.monotonic() - started,
            floor_seq=floor,
        )
        self._count(
            compactions=1,
            compaction_bytes_read=output.bytes_read,
            compaction_bytes_written=output.bytes_written,
            compaction_seconds=result.seconds,
        )
        return result

    def _gc(self, dry_run: bool) -> GCReport:
        """One GC pass (see :mod:`kvstore.gc`)."""
        report = self.collector.run(dry_run=dry_run)
        if not dry_run:
            self._count(gc_runs=1, gc_bytes_freed=report.bytes_freed)
        return report
