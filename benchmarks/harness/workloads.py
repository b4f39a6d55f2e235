"""The workloads W1-W7, each a function of (engine, prepared data, sizes).

A workload returns :class:`Measurement` records and never decides what a
good number is. Each one also counts what would make its numbers
meaningless — gets that found nothing, scans that came back short, counter
increments that were lost — so the report and the quick test can tell a fast
engine from a broken one.

Timing: ``time.perf_counter`` around each operation for latencies, and wall
time from the release of a start barrier to the last thread's exit for
rates. Every measured phase stops at its deadline (``phase_seconds``); ``n``
in the results is what really ran.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from harness.data import KEY_BYTES, VALUE_BYTES, unique_keys
from harness.engine import CommitTarget, Engine

LOWER: Final = "lower"
HIGHER: Final = "higher"


@dataclass(frozen=True)
class Metric:
    """How a metric is shown: its label, which direction is better (None: not
    compared) and its format."""

    label: str
    better: str | None
    fmt: str


# Display order is this order.
METRICS: Final[dict[str, Metric]] = {
    "rows_per_s": Metric("rows/s", HIGHER, ",.0f"),
    "commits_per_s": Metric("commits/s", HIGHER, ",.0f"),
    "gets_per_s": Metric("gets/s", HIGHER, ",.0f"),
    # The calling thread's CPU time only: what a get costs, without the time a
    # busy machine kept the thread off a core (an engine whose get waits on
    # I/O or on another thread looks better here than it is).
    "gets_per_cpu_s": Metric("gets per CPU second (calling thread)", HIGHER, ",.0f"),
    "abort_rate": Metric("abort rate", LOWER, ".1%"),
    "p50_ms": Metric("p50 ms", LOWER, ",.3f"),
    "p99_ms": Metric("p99 ms", LOWER, ",.3f"),
    "p50_us": Metric("p50 µs", LOWER, ",.1f"),
    "p99_us": Metric("p99 µs", LOWER, ",.1f"),
    "bytes_written_mb": Metric("MB written", LOWER, ",.1f"),
    "write_amplification": Metric("bytes written ÷ logical bytes", LOWER, ",.2f"),
    "process_write_amplification": Metric("bytes the process wrote ÷ logical bytes", LOWER, ",.2f"),
    "disk_mb": Metric("MB on disk", LOWER, ",.1f"),
    # Informational: what settling cost differs too much in kind (a B-tree
    # sync vs an LSM flush) for a ratio to mean anything.
    "settle_s": Metric("settle s (flush etc.)", None, ",.2f"),
    "n": Metric("n (operations measured)", None, ",.0f"),
}


@dataclass
class Measurement:
    """One engine's figures for one case of one workload.

    ``compare_case`` names the case whose peer figures a ratio should use
    when peers have no figure for this case (lakekv's Arrow scan form is
    compared with the peers' row form). ``checks`` holds sanity counters that
    must be zero for the figures to mean anything.
    """

    workload: str
    case: str
    engine: str
    metrics: dict[str, float] = field(default_factory=dict)
    checks: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    compare_case: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, [], {})}


# -- helpers -------------------------------------------------------------------


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-quantile of ``samples`` by the nearest-rank method.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 0.5), percentile([1.0, 2.0, 3.0, 4.0], 0.99)
    (3.0, 4.0)
    """
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency_metrics(latencies: Sequence[float], unit: str = "ms") -> dict[str, float]:
    """p50/p99 of per-operation latencies (seconds) in ``unit`` ("ms" or "us")."""
    scale = 1e3 if unit == "ms" else 1e6
    return {f"p50_{unit}": percentile(latencies, 0.5) * scale, f"p99_{unit}": percentile(latencies, 0.99) * scale}


def median_round(rounds: Sequence[Measurement], rate: str) -> Measurement:
    """One case measured in several rounds, reported as its median round.

    The round whose ``rate`` is the median (the lower middle one for an even
    count) stands for the case with all its figures, so its rate and
    latencies come from the same commits; ``n`` counts every round's
    operations, and ``checks`` add up over every round, so a lost update in
    any round still fails the run.

    >>> rounds = [Measurement("W3", "c", "e", metrics={"commits_per_s": r, "n": 10}, checks={"lost": 0})
    ...           for r in (300.0, 100.0, 200.0)]
    >>> m = median_round(rounds, "commits_per_s")
    >>> m.metrics["commits_per_s"], m.metrics["n"], m.checks
    (200.0, 30, {'lost': 0})
    """
    if not rounds:
        raise ValueError("no rounds to take the median of")
    if len({(m.workload, m.case, m.engine) for m in rounds}) != 1:
        raise ValueError("rounds of different cases or engines cannot be combined")
    ordered = sorted(rounds, key=lambda m: m.metrics[rate])
    middle = ordered[(len(ordered) - 1) // 2]
    checks: dict[str, int] = {}
    for measured in rounds:
        for name, count in measured.checks.items():
            checks[name] = checks.get(name, 0) + count
    shown = ", ".join(f"{m.metrics[rate]:,.0f}" for m in rounds)
    return Measurement(
        middle.workload, middle.case, middle.engine,
        metrics={**middle.metrics, "n": sum(m.metrics["n"] for m in rounds)},
        checks=checks,
        notes=[*middle.notes, f"median of {len(rounds)} rounds by {METRICS[rate].label} ({shown})"],
        compare_case=middle.compare_case,
    )


@dataclass
class ThreadTally:
    """What one worker thread did."""

    latencies: list[float] = field(default_factory=list)
    committed: int = 0
    aborted: int = 0


def run_threads(threads: int, seconds: float, body: Callable[[int, float, ThreadTally], None]) -> tuple[list[ThreadTally], float]:
    """Run ``body(thread_index, deadline, tally)`` on ``threads`` threads at once.

    All threads start together at a barrier; the wall time runs from its
    release to the last thread's exit. An exception in any thread is re-raised
    here after all have stopped, so a failed engine never yields a figure.
    """
    tallies = [ThreadTally() for _ in range(threads)]
    errors: list[BaseException] = []
    started: list[float] = []
    barrier = threading.Barrier(threads + 1, action=lambda: started.append(time.perf_counter()))

    def worker(index: int) -> None:
        barrier.wait()
        try:
            body(index, started[0] + seconds, tallies[index])
        except BaseException as exc:  # re-raised by the caller below
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(i,), name=f"bench-{i}") for i in range(threads)]
    for thread in pool:
        thread.start()
    barrier.wait()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - started[0]
    if errors:
        raise errors[0]
    return tallies, elapsed


# -- W1 ------------------------------------------------------------------------


def w1_bulk_load(
    engine: Engine, batches: Sequence[Sequence[tuple[bytes, bytes]]], device_written: Callable[[], int] | None,
    process_written: Callable[[], int] | None = None,
) -> Measurement:
    """Load every batch (one durable commit each), then settle the engine.

    Bytes written are the block device's write counter across ``os.sync()``
    calls before and after load and settle: everything the engine made the
    disk write (WAL, SSTs, B-tree pages, journal), background threads
    included. (``/proc/self/io`` is not used: with large folios it counts a
    whole folio per small random write and overstated LMDB's writes 5×.)
    The device counter also counts other processes writing to the same
    disk; ``process_written`` (``/proc/self/io``) counts only this process
    (no journal; it overstates small random page writes) and is reported
    beside it, so a busy neighbour shows as a gap between the two.
    Never capped: a half-loaded store would make W4/W5 meaningless.
    """
    rows = sum(len(batch) for batch in batches)
    logical = rows * (KEY_BYTES + VALUE_BYTES)
    os.sync()  # earlier engines' writeback must not be counted or compete
    written_before = device_written() if device_written else 0
    process_before = process_written() if process_written else 0
    started = time.perf_counter()
    for batch in batches:
        engine.write_batch(batch)
    load_s = time.perf_counter() - started
    settle_started = time.perf_counter()
    settled = engine.settle()
    settle_s = time.perf_counter() - settle_started
    metrics = {"rows_per_s": rows / load_s, "settle_s": settle_s, "disk_mb": engine.disk_bytes() / 1e6, "n": rows}
    notes = [f"settle: {settled}"]
    if device_written is not None:
        os.sync()
        written = device_written() - written_before
        metrics["bytes_written_mb"] = written / 1e6
        metrics["write_amplification"] = written / logical
    else:
        notes.append("bytes written not measured: the data directory is not on a block device")
    if process_written is not None:
        metrics["process_write_amplification"] = (process_written() - process_before) / logical
    return Measurement(
        "W1", f"bulk load, {rows:,} rows in batches of {len(batches[0]):,}", engine.key, metrics=metrics, notes=notes,
    )


# -- W2, W3, W7: durable single-key commits -------------------------------------


def durable_commits(
    workload: str, case: str, target: CommitTarget, threads: int, per_thread: int, seconds: float, tag: bytes,
) -> Measurement:
    """``threads`` writers, each committing ``per_thread`` fresh keys one at a time.

    Every key is new (a 16-byte key under ``tag`` and the thread's number),
    so no engine gets an overwrite shortcut; values are 100 random bytes.
    """
    value = random.Random(tag).randbytes(VALUE_BYTES)
    keys = [unique_keys(tag + b"%02d" % t, per_thread) for t in range(threads)]

    def body(index: int, deadline: float, tally: ThreadTally) -> None:
        put = target.put
        clock = time.perf_counter
        out = tally.latencies
        for key in keys[index]:
            began = clock()
            put(key, value)
            ended = clock()
            out.append(ended - began)
            if ended > deadline:
                break
        tally.committed = len(out)

    tallies, elapsed = run_threads(threads, seconds, body)
    latencies = [x for t in tallies for x in t.latencies]
    committed = sum(t.committed for t in tallies)
    return Measurement(
        workload, case, target.key,
        metrics={"commits_per_s": committed / elapsed, **latency_metrics(latencies), "n": committed},
    )


def durable_commits_taking_turns(
    workload: str, case: str, targets: Sequence[CommitTarget], per_target: int, seconds: float, tag: bytes,
    turn: int = 250,
) -> list[Measurement]:
    """:func:`durable_commits` with one writer for several targets, ``turn``
    commits on each in rotation, so they share the disk's state.

    A sequential commit is mostly the disk's fsync, and on a shared VM its
    latency drifts by 2x between runs and within one (writeback left by an
    earlier workload, neighbours): measured minutes apart, the gap between
    lakekv and the new-file floor was noise. Taking turns puts both under the
    same conditions. Each target's rate counts only its own time.
    """
    value = random.Random(tag).randbytes(VALUE_BYTES)
    keys = unique_keys(tag + b"00", per_target)
    latencies: list[list[float]] = [[] for _ in targets]
    busy = [0.0] * len(targets)
    clock = time.perf_counter
    deadline = clock() + seconds * len(targets)
    for start in range(0, per_target, turn):
        if clock() > deadline:
            break
        for index, target in enumerate(targets):
            put, out = target.put, latencies[index]
            began_turn = clock()
            for key in keys[start : start + turn]:
                began = clock()
                put(key, value)
                out.append(clock() - began)
            busy[index] += clock() - began_turn
    return [
        Measurement(
            workload, case, target.key,
            metrics={"commits_per_s": len(out) / busy[index], **latency_metrics(out), "n": len(out)},
            notes=[f"measured taking turns of {turn} commits with {', '.join(t.label for t in targets if t is not target)}"],
        )
        for index, (target, out) in enumerate(zip(targets, latencies))
    ]


def durable_commits_beside_busy_thread(
    workload: str, case: str, target: CommitTarget, per_thread: int, seconds: float, tag: bytes,
) -> Measurement:
    """:func:`durable_commits` with one writer while another thread of the
    process spins in pure Python: what a commit costs when the caller's
    process is not idle (its threads then compete for the GIL)."""
    stop = threading.Event()
    spins = [0]

    def busy() -> None:
        while not stop.is_set():
            total = 0
            for i in range(1000):
                total += i
            spins[0] += 1

    spinner = threading.Thread(target=busy, name="bench-busy", daemon=True)
    spinner.start()
    try:
        measurement = durable_commits(workload, case, target, 1, per_thread, seconds, tag)
    finally:
        stop.set()
        spinner.join()
    measurement.notes.append(f"the busy thread ran {spins[0]:,} loops of 1000 additions meanwhile")
    return measurement


# -- W4: point gets ------------------------------------------------------------


# Timed passes over a W4 key list: the rate is their median, so one pass that a
# neighbour on a shared machine slowed (a pass of 100k gets lasts ~0.2 s)
# does not decide the figure. Slow engines stop early (see w4_point_gets).
W4_PASSES: Final = 5


def w4_point_gets(engine: Engine, case: str, keys: Sequence[bytes], seconds: float) -> Measurement:
    """Get ``keys`` once untimed (warms every cache the timed pass will touch),
    then again timed, up to :data:`W4_PASSES` times while the timed passes
    together stay within ``seconds``: the hot-cache figure is the median
    pass's rate (and the median pass's rate per CPU second of the calling
    thread); latencies pool every timed pass."""
    engine.timed_gets(keys, time.perf_counter() + seconds)
    rates: list[float] = []
    cpu_rates: list[float] = []
    latencies: list[float] = []
    missing = 0
    phase_started = time.perf_counter()
    while len(rates) < W4_PASSES:
        started, cpu_started = time.perf_counter(), time.thread_time()
        done, missed = engine.timed_gets(keys, started + seconds)
        cpu = time.thread_time() - cpu_started
        rates.append(len(done) / (time.perf_counter() - started))
        if cpu > 0:
            cpu_rates.append(len(done) / cpu)
        latencies.extend(done)
        missing = max(missing, missed)
        if time.perf_counter() - phase_started > seconds:
            break
    rates.sort()
    cpu_rates.sort()
    cpu_metric = {"gets_per_cpu_s": cpu_rates[len(cpu_rates) // 2]} if cpu_rates else {}
    return Measurement(
        "W4", case, engine.key,
        metrics={"gets_per_s": rates[len(rates) // 2], **cpu_metric, **latency_metrics(latencies, "us"),
                 "n": len(latencies)},
        checks={"missing_keys": missing},
        notes=[f"median of {len(rates)} timed pass(es); pass rates {', '.join(f'{r:,.0f}' for r in rates)} gets/s"],
    )


# -- W5: range scans -----------------------------------------------------------


def w5_range_scans(
    engine: Engine, ranges: Sequence[tuple[bytes, bytes]], span: int, seconds: float,
) -> list[Measurement]:
    """Scan each ``[start, end)`` range (``span`` rows) in every form the engine offers."""
    results = []
    for form, scan in engine.scan_forms().items():
        total = short = 0
        started = time.perf_counter()
        deadline = started + seconds
        scans = 0
        for start, end in ranges:
            rows = scan(start, end, span)
            total += rows
            short += rows != span
            scans += 1
            if time.perf_counter() > deadline:
                break
        elapsed = time.perf_counter() - started
        results.append(Measurement(
            "W5", f"range scan of {span:,} keys, {form} form", engine.key,
            metrics={"rows_per_s": total / elapsed, "n": scans},
            checks={"short_scans": short},
            compare_case=None if form == "rows" else f"range scan of {span:,} keys, rows form",
        ))
    return results


# -- W6: read-modify-write transactions ----------------------------------------


def w6_prepare(engine: Engine, levels: Sequence[int], batch_rows: int) -> dict[int, list[bytes]]:
    """Create the counters of every contention level (value ``0``); return them by level."""
    by_level: dict[int, list[bytes]] = {}
    for level, count in enumerate(levels):
        keys = unique_keys(b"c%d-" % level, count)
        by_level[count] = keys
        for start in range(0, count, batch_rows):
            engine.write_batch([(k, b"0") for k in keys[start:start + batch_rows]])
    return by_level


# Counters read back to check for lost updates only up to this many keys:
# reading 100k counters back would cost more than the workload itself, and
# lost updates show up where contention is, on the small levels.
MAX_KEYS_TO_VERIFY: Final = 1000


def w6_transactions(
    engine: Engine, case: str, keys: Sequence[bytes], threads: int, per_thread: int, seconds: float, seed: int,
) -> Measurement:
    """``threads`` threads each run ``per_thread`` SERIALIZABLE increments of a
    counter chosen uniformly from ``keys``; aborts are counted, not retried.

    Afterwards, if ``keys`` is small, the counters are read back: their sum
    must equal the number of commits (``lost_updates`` counts the difference).
    """
    before = sum(int(engine.get(k) or b"0") for k in keys) if len(keys) <= MAX_KEYS_TO_VERIFY else None

    def body(index: int, deadline: float, tally: ThreadTally) -> None:
        rng = random.Random(seed * 1000 + index)
        rmw = engine.rmw
        clock = time.perf_counter
        for _ in range(per_thread):
            began = clock()
            if rmw(keys[rng.randrange(len(keys))]):
                tally.committed += 1
            else:
                tally.aborted += 1
            ended = clock()
            tally.latencies.append(ended - began)
            if ended > deadline:
                break

    tallies, elapsed = run_threads(threads, seconds, body)
    committed = sum(t.committed for t in tallies)
    aborted = sum(t.aborted for t in tallies)
    checks = {}
    if before is not None:
        after = sum(int(engine.get(k) or b"0") for k in keys)
        checks["lost_updates"] = committed - (after - before)
    latencies = [x for t in tallies for x in t.latencies]
    return Measurement(
        "W6", case, engine.key,
        metrics={
            "commits_per_s": committed / elapsed, "abort_rate": aborted / max(1, committed + aborted),
            **latency_metrics(latencies), "n": committed + aborted,
        },
        checks=checks,
    )
