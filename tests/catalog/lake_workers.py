"""Worker processes for the catalog concurrency tests (spawn-importable).

Every worker opens the lakehouse by URL, waits on a shared start event so the
processes really overlap, and reports what it committed: the version each
call returned and what that call wrote, so the test can replay the history.
A worker's failure comes back as its traceback (catalog conflict errors do not
survive pickling with their fields, and the test wants the whole story).
"""

from __future__ import annotations

import multiprocessing
import queue
import random
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import pyarrow.compute as pc

import catalog
from catalog import RetryableConflictError
from lake_peer import rows

SPAWN = multiprocessing.get_context("spawn")


def run_processes(
    targets: list[tuple[Callable[..., Any], tuple[Any, ...]]], timeout_s: float = 300, duration_s: float | None = None
) -> list[Any]:
    """Run each ``target(*args, start, stop)`` in its own process; return their results in order.

    ``start`` is set once every process is up. ``stop`` is set once every
    process but the last has finished (so the last one can run "meanwhile"),
    or, with ``duration_s``, once the run has lasted that long (its length is
    a parameter, not a wait for something); at once when a worker fails.
    ``timeout_s`` bounds each wait for a result after that.
    """
    results: Any = SPAWN.Queue()
    start, stop = SPAWN.Event(), SPAWN.Event()
    procs = [
        SPAWN.Process(target=_report, args=(i, fn, args, start, stop, results), daemon=True)
        for i, (fn, args) in enumerate(targets)
    ]
    for proc in procs:
        proc.start()
    start.set()
    out: dict[int, Any] = {}
    deadline = None if duration_s is None else time.monotonic() + duration_s
    try:
        while len(out) < len(procs):
            timed = deadline is not None and not stop.is_set()
            try:
                index, status, value = results.get(timeout=max(0.0, deadline - time.monotonic()) if timed else timeout_s)
            except queue.Empty:
                if not timed:
                    raise AssertionError(f"workers {sorted(set(range(len(procs))) - set(out))} did not finish") from None
                stop.set()
                continue
            if status != "ok":
                raise AssertionError(f"worker {index} failed:\n{value}")
            out[index] = value
            if deadline is None and all(i in out for i in range(len(procs) - 1)):
                stop.set()
    finally:
        stop.set()
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
                proc.join()
    return [out[i] for i in range(len(procs))]


def _report(index: int, fn: Callable[..., Any], args: tuple[Any, ...], start: Any, stop: Any, results: Any) -> None:
    try:
        value = fn(*args, start, stop)
    except BaseException:  # noqa: BLE001 - sent to the test, which fails with it
        results.put((index, "error", traceback.format_exc()))
        return
    results.put((index, "ok", value))


# -- acceptance 2: appends beside property changes ----------------------------------------


def appender(url: str, options: dict[str, Any], table: str, worker: int, count: int, start: Any, stop: Any) -> list[tuple[int, list[int]]]:
    """``count`` appends of 3 rows each; returns ``(version, ids)`` per append."""
    start.wait(60)
    out = []
    with catalog.open(url, **options) as lake:
        t = lake.load_table(table)
        for i in range(count):
            ids = [worker * 1000 + i * 3 + j for j in range(3)]
            out.append((t.append(rows(ids, f"w{worker}")), ids))
    return out


def property_changer(url: str, options: dict[str, Any], table: str, start: Any, stop: Any) -> list[int]:
    """Change the table's properties until the appenders finish (at least once); returns the versions."""
    start.wait(60)
    versions = []
    with catalog.open(url, **options) as lake:
        t = lake.load_table(table)
        while True:
            n = len(versions)
            updates = {"round": str(n), f"key-{n % 3}": str(n)}
            versions.append(t.update_properties(updates=updates))
            # A brief pause: changing properties beside the appends, not
            # starving them (a props commit is much cheaper than an append).
            if stop.wait(0.05):
                return versions


# -- the mixed run -------------------------------------------------------------------------


@dataclass(frozen=True)
class Logged:
    """One committed operation as its writer saw it (what it wrote, not what it read)."""

    version: int
    worker: int
    table: str
    kind: str  # "append" | "overwrite" | "delete"
    ids: tuple[int, ...]  # rows written (tag: the op's own label)
    tag: str
    where: tuple[int, int] | None  # [lo, hi) filter on id; None = every row
    retries: int
    seen: int  # the handle's version just before the call that returned ``version``


def id_range(lo: int, hi: int) -> pc.Expression:
    return (pc.field("id") >= lo) & (pc.field("id") < hi)


def logged_write(
    lake: catalog.Lakehouse,
    worker: int,
    table: str,
    kind: str,
    ids: tuple[int, ...],
    tag: str,
    where: tuple[int, int] | None,
) -> Logged:
    """One append, overwrite (whole, or of ``where``) or delete of ``where``, retried on RetryableConflictError."""
    retries = 0
    while True:
        t = lake.load_table(table)  # fresh each attempt: a retry redoes the work on new data
        # A quiet handle's view moves only by its own commits and refreshes, so
        # a call that returns this version committed nothing (a no-op).
        seen = lake.version
        try:
            if kind == "append":
                version = t.append(rows(list(ids), tag))
            elif kind == "overwrite":
                version = t.overwrite(rows(list(ids), tag), filter=None if where is None else id_range(*where))
            else:
                assert where is not None
                version = t.delete(id_range(*where))
            return Logged(version, worker, table, kind, ids, tag, where, retries, seen)
        except RetryableConflictError:
            retries += 1
            lake.refresh()


def mixed_writer(
    url: str, options: dict[str, Any], tables: list[str], worker: int, ops: int, seed: int, start: Any, stop: Any
) -> list[Logged]:
    """Random appends, overwrites (whole or filtered) and deletes; retries RetryableConflictError."""
    rng = random.Random(seed)
    start.wait(60)
    log: list[Logged] = []
    with catalog.open(url, **options) as lake:
        for n in range(ops):
            table = rng.choice(tables)
            roll = rng.random()
            tag = f"w{worker}-{n}"
            lo = rng.randrange(0, 90, 10)
            if roll < 0.5:
                kind, where, ids = "append", None, tuple(rng.randrange(100) for _ in range(rng.randint(1, 4)))
            elif roll < 0.65:
                kind, where, ids = "overwrite", None, tuple(rng.randrange(100) for _ in range(rng.randint(0, 3)))
            elif roll < 0.8:
                kind, where = "overwrite", (lo, lo + 20)
                ids = tuple(rng.randrange(lo, lo + 20) for _ in range(rng.randint(1, 3)))
            else:
                kind, where, ids = "delete", (lo, lo + 20), ()
            log.append(logged_write(lake, worker, table, kind, ids, tag, where))
    return log


def compactor(url: str, options: dict[str, Any], tables: list[str], start: Any, stop: Any) -> list[Logged]:
    """Compact every table in turn until the writers finish, and once more after; retries on conflicts."""
    start.wait(60)
    log: list[Logged] = []
    with catalog.open(url, **options) as lake:
        while True:
            last_round = stop.is_set()  # one more round after the writers finished
            lake.refresh()  # a quiet handle sees the writers' files only when it asks
            for table in tables:
                retries = 0
                while True:
                    seen = lake.version
                    try:
                        report = lake.compact_table(table, target_file_bytes=1 << 20)
                        break
                    except RetryableConflictError:  # an input file was rewritten meanwhile
                        retries += 1
                        lake.refresh()
                if report.version is not None:
                    log.append(Logged(report.version, -1, table, "compact", (), "", None, retries, seen))
            if last_round:
                return log
            stop.wait(0.05)
