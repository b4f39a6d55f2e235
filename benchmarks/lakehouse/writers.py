"""Small appends: the caller-level retry loop, and writer processes that run it
concurrently on one table.

Every system gets the same loop: append, and on any failure count it
(conflict or other error, by the system's own error types), back off a
random, growing delay and try the same rows again, up to ``max_attempts``.
pyiceberg needs this loop to survive concurrency at all; lakekv and DuckLake
retry conflicts internally, so for them a failure here is one that reached
the caller. An append that never lands is counted as given up; the row count
checked afterwards must equal the landed appends exactly.
"""

from __future__ import annotations

import cProfile
import multiprocessing
import queue
import random
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lakehouse import data
from lakehouse.system import System, make_system

BACKOFF_S = 0.005  # base of the jittered back-off after a failed attempt
ERROR_SAMPLE_CHARS = 160
BARRIER_TIMEOUT_S = 120.0  # a writer that cannot start breaks the barrier instead of hanging the others


@dataclass
class AppendStats:
    committed: int = 0
    conflicts: int = 0
    other_errors: int = 0
    gave_up: int = 0
    # Retries the catalog made by itself (None: it does not expose them).
    internal_retries: int | None = None
    # Appends left unstarted because the phase ran out of time.
    not_started: int = 0
    started: float = 0.0   # time.time() of the first attempt
    finished: float = 0.0  # time.time() after the last one
    errors: dict[str, int] = field(default_factory=dict)  # "Type: message" -> count

    @property
    def attempts(self) -> int:
        return self.committed + self.conflicts + self.other_errors

    def merge(self, other: AppendStats) -> None:
        self.committed += other.committed
        self.conflicts += other.conflicts
        self.other_errors += other.other_errors
        self.gave_up += other.gave_up
        self.not_started += other.not_started
        if other.internal_retries is not None:
            self.internal_retries = (self.internal_retries or 0) + other.internal_retries
        self.started = min(self.started, other.started) if self.started else other.started
        self.finished = max(self.finished, other.finished)
        self.errors = dict(Counter(self.errors) + Counter(other.errors))


def append_loop(system: System, table: str, first_id: int, appends: int, rows_per_append: int,
                max_attempts: int, seed: int, seconds: float) -> AppendStats:
    """Append ``appends`` batches of ``rows_per_append`` rows (ids from
    ``first_id``), each as one commit, retrying failures as described above.
    No new append starts after ``seconds``; the rest count as not started."""
    rng = random.Random(seed)
    stats = AppendStats(started=time.time())
    retries_before = system.internal_retries()
    stop_at = time.monotonic() + seconds
    errors: Counter[str] = Counter()
    for index in range(appends):
        if time.monotonic() > stop_at:
            stats.not_started = appends - index
            break
        rows = data.rows(first_id + index * rows_per_append, rows_per_append, rng)
        for attempt in range(1, max_attempts + 1):
            try:
                system.append(table, rows)
            except Exception as error:  # every failure is counted and reported, then retried
                if system.is_conflict(error):
                    stats.conflicts += 1
                else:
                    stats.other_errors += 1
                errors[f"{type(error).__name__}: {str(error)[:ERROR_SAMPLE_CHARS]}"] += 1
                time.sleep(rng.uniform(0, BACKOFF_S * attempt))
                continue
            stats.committed += 1
            break
        else:
            stats.gave_up += 1
    stats.finished = time.time()
    stats.errors = dict(errors)
    retries_after = system.internal_retries()
    if retries_before is not None and retries_after is not None:
        stats.internal_retries = retries_after - retries_before
    return stats


def _writer_main(key: str, root: str, table: str, writer: int, appends: int, rows_per_append: int,
                 max_attempts: int, seed: int, seconds: float, profile_path: str | None, barrier: Any,
                 results: Any) -> None:
    """One writer process: open a handle, wait for the others, append, report
    (with ``profile_path``, the appends run under cProfile, dumped there)."""
    system = make_system(key, Path(root))
    try:
        system.open()
        barrier.wait(timeout=BARRIER_TIMEOUT_S)
        # Writers use disjoint id ranges so the final content is checkable.
        first_id = (writer + 1) * 10**9
        profiler = cProfile.Profile() if profile_path else None
        if profiler is not None:
            profiler.enable()
        stats = append_loop(system, table, first_id, appends, rows_per_append, max_attempts, seed + writer, seconds)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(f"{profile_path}.{writer}")
        results.put((writer, asdict(stats), None))
    except BaseException as error:  # reported to the parent, which records the failure
        results.put((writer, None, f"{type(error).__name__}: {error}"))
        raise
    finally:
        system.close()


def concurrent_appends(key: str, root: Path, table: str, writers: int, appends: int, rows_per_append: int,
                       max_attempts: int, seed: int, seconds: float, profile_prefix: str | None = None) -> AppendStats:
    """Run ``writers`` processes appending to ``table`` at once, each starting
    no append after ``seconds``; the merged stats span from the first
    writer's start to the last one's end. With ``profile_prefix``, each
    writer dumps a cProfile of its appends to ``<prefix>.<writer>``."""
    timeout_s = seconds + BARRIER_TIMEOUT_S + 120  # start-up, then the last appends' retries
    context = multiprocessing.get_context("spawn")  # fresh interpreters: no inherited DB handles or threads
    barrier = context.Barrier(writers)
    results = context.Queue()
    processes = [
        context.Process(
            target=_writer_main,
            args=(key, str(root), table, writer, appends, rows_per_append, max_attempts, seed, seconds,
                  profile_prefix, barrier, results),
            name=f"{key}-writer-{writer}",
        )
        for writer in range(writers)
    ]
    for process in processes:
        process.start()
    merged = AppendStats()
    failures = []
    deadline = time.monotonic() + timeout_s
    reported = 0
    try:
        while reported < writers:
            try:
                writer, stats, failure = results.get(timeout=0.5)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{key} writers did not finish within {timeout_s:.0f} s") from None
                if not any(process.is_alive() for process in processes):
                    # Whoever has not reported died before it could (e.g. at start-up).
                    failures.append(f"{writers - reported} writer(s) exited without a report")
                    break
                continue
            reported += 1
            if failure is not None:
                failures.append(f"writer {writer}: {failure}")
            else:
                merged.merge(AppendStats(**stats))
    finally:
        for process in processes:
            process.join(timeout=max(0.1, deadline - time.monotonic()))
            if process.is_alive():
                process.terminate()  # a hung writer: stopped by its own handle, never by name
                process.join()
    if failures:
        raise RuntimeError(f"{len(failures)} {key} writer process(es) failed: " + "; ".join(failures))
    return merged
