"""``lakekv doctor``: is this object store safe to commit to, and how fast is it?

lakekv's correctness rests on one primitive: a conditional create with
exactly one winner. Object stores differ (some ignore ``If-None-Match``, some
proxies strip it, some filesystems lack atomic links), so the doctor races
real writers against a scratch prefix of the store and checks the outcome,
checks the read primitives byte for byte, and measures latency.

Everything happens under ``_doctor/<uuid>/``, which is deleted afterwards.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TextIO

from kvstore.errors import CheckFailedError
from kvstore.objstore.base import ObjectStore
from kvstore.objstore.factory import open_store

_BARRIER_TIMEOUT_S = 120.0  # generous: process start-up on a loaded machine
_SAMPLE_SIZE = 4096  # bytes per latency sample, about one small root file



def _payload(writer: str, round_no: int) -> bytes:
    # Distinct per writer and round, so "the stored bytes are the winner's"
    # cannot pass by accident.
    return f"{writer}:round-{round_no}:".encode() * 16


def _race_threads(store: ObjectStore, prefix: str, threads: int, rounds: int) -> str:
    with ThreadPoolExecutor(threads) as pool:
        for round_no in range(rounds):
            path = f"{prefix}race-threads/{round_no}"
            barrier = threading.Barrier(threads)

            def attempt(writer: int, path: str = path, barrier: threading.Barrier = barrier, r: int = round_no) -> bool:
                barrier.wait(_BARRIER_TIMEOUT_S)
                return store.put_if_absent(path, _payload(f"thread-{writer}", r))

            results = list(pool.map(attempt, range(threads)))
            winners = [f"thread-{w}" for w, won in enumerate(results) if won]
            _check_round(store, path, round_no, winners)
    return f"{threads} threads x {rounds} rounds: exactly one winner, winner's bytes stored"


def _check_round(store: ObjectStore, path: str, round_no: int, winners: list[str]) -> None:
    if len(winners) != 1:
        raise CheckFailedError(f"round {round_no}: {len(winners)} writers won put_if_absent on {path!r}: {winners}")
    stored = store.get(path)
    if stored != _payload(winners[0], round_no):
        raise CheckFailedError(f"round {round_no}: {path!r} does not hold the bytes of its winner {winners[0]}")


def _process_writer(
    url: str, options: dict[str, Any], prefix: str, rounds: int, writer: int, barrier: Any, results: Any
) -> None:
    """Body of one racing process: open the store by URL, race every round."""
    store = open_store(url, **options)
    try:
        for round_no in range(rounds):
            barrier.wait(_BARRIER_TIMEOUT_S)
            try:
                won = store.put_if_absent(f"{prefix}race-processes/{round_no}", _payload(f"process-{writer}", round_no))
                results.put((writer, round_no, won, None))
            except Exception as exc:  # report to the parent instead of dying silently
                results.put((writer, round_no, False, f"{type(exc).__name__}: {exc}"))
    finally:
        store.close()


def _collect(results: Any, workers: list[Any], expected: int) -> list[tuple[int, int, bool, str | None]]:
    """Gather ``expected`` outcomes, failing fast if the writers die or stall."""
    outcomes: list[tuple[int, int, bool, str | None]] = []
    last_progress = time.monotonic()
    while len(outcomes) < expected:
        alive = any(proc.is_alive() for proc in workers)
        stalled = time.monotonic() - last_progress > _BARRIER_TIMEOUT_S
        try:
            # With no live writer left, one last wait drains what the dead
            # ones flushed before exiting; then nothing more can come.
            outcomes.append(results.get(timeout=0.5 if alive and not stalled else 2.0))
            last_progress = time.monotonic()
        except queue.Empty as exc:
            if alive and not stalled:
                continue
            codes = [proc.exitcode for proc in workers]
            raise CheckFailedError(f"writer processes {'stalled' if alive else 'exited early'} after "
                              f"{len(outcomes)}/{expected} results (exit codes {codes})") from exc
    return outcomes


def _race_processes(store: ObjectStore, url: str, options: dict[str, Any], prefix: str, processes: int, rounds: int) -> str:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(processes)
    results = ctx.Queue()
    workers = [
        ctx.Process(target=_process_writer, args=(url, options, prefix, rounds, w, barrier, results), daemon=True)
        for w in range(processes)
    ]
    for proc in workers:
        proc.start()
    try:
        outcomes = _collect(results, workers, processes * rounds)
    except CheckFailedError:
        for proc in workers:
            proc.kill()  # survivors would wait at the barrier for a dead peer; ours, by handle
        raise
    finally:
        for proc in workers:
            proc.join(timeout=_BARRIER_TIMEOUT_S)
    errors = [error for _, _, _, error in outcomes if error]
    if errors:
        raise CheckFailedError(f"{len(errors)} put_if_absent calls failed in writer processes; first: {errors[0]}")
    for round_no in range(rounds):
        winners = [f"process-{w}" for w, r, won, _ in outcomes if r == round_no and won]
        _check_round(store, f"{prefix}race-processes/{round_no}", round_no, winners)
    return f"{processes} processes x {rounds} rounds: exactly one winner, winner's bytes stored"


def _check_primitives(store: ObjectStore, prefix: str) -> str:
    data = bytes(range(256)) * 41  # every byte value; 10496 bytes
    path = f"{prefix}object"
    store.put(path, data)
    if store.get(path) != data:
        raise CheckFailedError("get did not return the bytes put")
    meta = store.head(path)
    if meta.size != len(data):
        raise CheckFailedError(f"head reports size {meta.size}, expected {len(data)}")
    n = len(data)
    for start, end in ((0, 1), (1, 4097), (n - 5, n), (n - 5, n + 100), (n + 10, n + 20), (7, 7)):
        got = store.get_range(path, start, end)
        if got != data[start:end]:
            raise CheckFailedError(f"get_range({start}, {end}) returned {len(got)} wrong bytes")
    if store.put_if_absent(path, b"other") or store.get(path) != data:
        raise CheckFailedError("put_if_absent on an existing object did not return False or overwrote it")
    names = [f"{prefix}list/{name}" for name in ("b", "a", "c/d")]
    for name in names:
        store.put(name, b"x")
    listed = [m.path for m in store.list(f"{prefix}list/")]
    if listed != sorted(names):
        raise CheckFailedError(f"list returned {listed}, expected {sorted(names)}")
    store.delete(path)
    store.delete(path)  # deleting a missing object must be fine
    for probe in (store.get, store.head):
        try:
            probe(path)
        except FileNotFoundError:
            continue
        raise CheckFailedError(f"{probe.__name__} of a deleted object did not raise FileNotFoundError")
    skew = meta.mtime - time.time()
    note = f"; storage clock differs from ours by {skew:+.0f}s" if abs(skew) > 300 else ""
    return f"get/get_range/head/list/delete/put_if_absent byte-exact{note}"


def _measure(store: ObjectStore, prefix: str, samples: int) -> list[tuple[str, list[float]]]:
    data = os.urandom(_SAMPLE_SIZE)
    names = [f"{prefix}bench/{i}" for i in range(samples)]
    ops: list[tuple[str, Callable[[str], object]]] = [
        ("PUT", lambda name: store.put(name, data)),
        ("GET", store.get),
        ("conditional PUT", lambda name: store.put_if_absent(name + ".c", data)),
    ]
    timings = []
    for label, op in ops:
        latencies = []
        for name in names:
            started = time.perf_counter()
            op(name)
            latencies.append(time.perf_counter() - started)
        timings.append((label, latencies))
    return timings


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_doctor(
    url: str | ObjectStore,
    *,
    threads: int = 8,
    processes: int = 4,
    rounds: int = 20,
    samples: int = 200,
    out: TextIO | None = None,
    options: Mapping[str, Any] | None = None,
) -> bool:
    """Check a store's primitives and conditional-create race; print a report.

    Args:
        url: store URL (see :func:`open_store`), or an open store, in which
            case the process race is skipped (other processes cannot reach it).
        threads: racing threads per round.
        processes: racing processes per round (0 skips; also skipped for
            ``memory://``, which is per process).
        rounds: race rounds, each on a fresh object name.
        samples: operations per latency measurement (0 skips).
        out: where the report goes; ``sys.stdout`` (looked up at call time) if None.
        options: ``open_store`` options, also used by the racing processes.

    Returns:
        True if every check passed: the store is safe for lakekv.
    """
    for name, value, low in (("threads", threads, 1), ("processes", processes, 0), ("rounds", rounds, 1), ("samples", samples, 0)):
        if not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    out = sys.stdout if out is None else out
    opts = dict(options or {})
    store = open_store(url, **opts) if isinstance(url, str) else url
    prefix = f"_doctor/{uuid.uuid4().hex}/"
    print(f"lakekv doctor: {store.url}\n  scratch prefix {prefix}", file=out)
    checks: list[tuple[str, Callable[[], str]]] = [
        ("primitives", lambda: _check_primitives(store, prefix)),
        ("race/threads", lambda: _race_threads(store, prefix, threads, rounds)),
    ]
    if isinstance(url, str) and processes and not url.startswith("memory://"):
        checks.append(("race/processes", lambda: _race_processes(store, url, opts, prefix, processes, rounds)))
    else:
        print("  [skip] race/processes: needs a URL other processes can open (not memory://)", file=out)
    safe = True
    try:
        for name, check in checks:
            try:
                detail = check()
            except Exception as exc:  # any failure, expected or not, makes the store unsafe: report it
                safe = False
                print(f"  [FAIL] {name}: {type(exc).__name__}: {exc}", file=out)
                continue
            print(f"  [ok]   {name}: {detail}", file=out)
        if samples:
            try:
                _report_latency(store, prefix, samples, out)
            except Exception as exc:  # a store that fails under load is not safe either
                safe = False
                print(f"  [FAIL] latency: {type(exc).__name__}: {exc}", file=out)
    finally:
        leftovers = list(store.list(prefix))
        for meta in leftovers:
            store.delete(meta.path)
        print(f"  cleaned up {len(leftovers)} scratch objects", file=out)
        if isinstance(url, str):
            store.close()
    print(f"verdict: {'SAFE' if safe else 'UNSAFE: do not use this store with lakekv'}", file=out)
    return safe


def _report_latency(store: ObjectStore, prefix: str, samples: int, out: TextIO) -> None:
    print(f"  latency, {samples} sequential ops of {_SAMPLE_SIZE} bytes:", file=out)
    print(f"    {'op':<16} {'p50 ms':>9} {'p99 ms':>9} {'ops/s':>9}", file=out)
    for label, latencies in _measure(store, prefix, samples):
        p50, p99 = _percentile(latencies, 0.50) * 1e3, _percentile(latencies, 0.99) * 1e3
        rate = len(latencies) / sum(latencies) if sum(latencies) > 0 else float("inf")
        print(f"    {label:<16} {p50:>9.3f} {p99:>9.3f} {rate:>9.0f}", file=out)
