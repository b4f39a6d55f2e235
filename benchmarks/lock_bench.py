"""Durable lock benchmarks (catalog.durable): latency uncontended, throughput under contention.

Run: ``.venv/bin/python benchmarks/lock_bench.py [--quick] [--duration S] [--processes P]``

* uncontended: one durable transaction takes an exclusive lock on a fresh
  node and unlocks it, repeatedly; p50/p99 of the acquire+release pair. Peer
  in the same run: a plain SERIALIZABLE lakekv read-modify-write of one key
  (one KV commit), since a lock acquire is one such commit plus the rules.
* contended: P processes (default 8) loop begin -> waitable exclusive lock on
  ONE node -> wait -> commit, for ``--duration`` seconds; handoffs/s and the
  p50/p99 time from request to acquired. Peer: P processes incrementing one
  key with ``store.run`` (optimistic retries), ops/s.

Local-directory store, fsync on. Compare numbers within one run only.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

import kvstore
from catalog.durable import TransactionManager

OPTIONS: dict[str, Any] = {"poll_interval_s": 0, "background_maintenance": False}


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def uncontended(url: str, n: int) -> tuple[list[float], list[float]]:
    lock_s, kv_s = [], []
    with kvstore.open(url, **OPTIONS) as store:
        manager = TransactionManager(store)
        tx = manager.begin(timeout=3600, title="lock_bench")
        for i in range(n):
            t0 = time.perf_counter()
            tx.lock(f"bench.node{i}", "exclusive")
            tx.unlock(f"bench.node{i}")
            lock_s.append(time.perf_counter() - t0)
        tx.commit()
        for i in range(n):
            t0 = time.perf_counter()
            with store.transaction(fresh=True) as txn:
                value = txn.get(b"k%d" % i)
                txn.put(b"k%d" % i, b"%d" % (int(value or b"0") + 1))
            kv_s.append(time.perf_counter() - t0)
    return lock_s, kv_s


def _lock_worker(url: str, duration: float, start_at: float, out: Any) -> None:
    waits = []
    with kvstore.open(url, **OPTIONS) as store:
        manager = TransactionManager(store, poll_max_s=0.02)
        time.sleep(max(0.0, start_at - time.time()))
        stop = time.monotonic() + duration
        while time.monotonic() < stop:
            tx = manager.begin(timeout=60)
            t0 = time.perf_counter()
            tx.lock("bench.hot", "exclusive", waitable=True).wait(timeout=120)
            waits.append(time.perf_counter() - t0)
            tx.commit()
    out.put(waits)


def _kv_worker(url: str, duration: float, start_at: float, out: Any) -> None:
    done = 0
    with kvstore.open(url, **OPTIONS) as store:
        time.sleep(max(0.0, start_at - time.time()))
        stop = time.monotonic() + duration

        def bump(txn: kvstore.Transaction) -> None:
            txn.put(b"hot", b"%d" % (int(txn.get(b"hot") or b"0") + 1))

        while time.monotonic() < stop:
            store.run(bump, retries=1000)
            done += 1
    out.put([0.0] * done)


def contended(url: str, processes: int, duration: float, target: Any) -> tuple[int, list[float]]:
    kvstore.open(url, **OPTIONS).close()
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    start_at = time.time() + 5.0  # all workers imported and connected before the clock starts
    procs = [ctx.Process(target=target, args=(url, duration, start_at, queue)) for _ in range(processes)]
    for proc in procs:
        proc.start()
    samples = [s for _ in procs for s in queue.get(timeout=duration + 600)]
    for proc in procs:
        proc.join(timeout=60)
    return len(samples), samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations, 5 s contention")
    parser.add_argument("--duration", type=float, default=None, help="contention run length in seconds (default 20)")
    parser.add_argument("--processes", type=int, default=8)
    args = parser.parse_args(argv)
    n = 100 if args.quick else 500
    duration = args.duration if args.duration is not None else (5.0 if args.quick else 20.0)
    base = tempfile.mkdtemp(prefix="lakekv-lock-bench-")
    print(f"# lock_bench  python {platform.python_version()}  {os.cpu_count()} cores  fsync=on  local store")
    try:
        lock_s, kv_s = uncontended(os.path.join(base, "uncontended"), n)
        p50, p99 = _percentile(lock_s, 0.5), _percentile(lock_s, 0.99)
        k50, k99 = _percentile(kv_s, 0.5), _percentile(kv_s, 0.99)
        print(f"uncontended lock+unlock  : p50 {p50 * 1e3:7.2f} ms  p99 {p99 * 1e3:7.2f} ms  (n={n})")
        print(f"peer: KV rmw txn         : p50 {k50 * 1e3:7.2f} ms  p99 {k99 * 1e3:7.2f} ms")
        print(f"ratio lock+unlock / KV txn (p50): {p50 / k50:5.2f}x  (a pair is two KV commits)")
        count, waits = contended(os.path.join(base, "locks"), args.processes, duration, _lock_worker)
        kv_count, _ = contended(os.path.join(base, "kv"), args.processes, duration, _kv_worker)
        print(
            f"{args.processes} processes, one waitable exclusive lock: {count / duration:7.1f} handoffs/s  "
            f"request->acquired p50 {statistics.median(waits) * 1e3:7.1f} ms  p99 {_percentile(waits, 0.99) * 1e3:7.1f} ms"
        )
        print(f"peer: {args.processes} processes, one KV counter (store.run): {kv_count / duration:7.1f} ops/s")
        print(f"ratio lock handoffs / KV increments: {count / max(1, kv_count):5.2f}x  (a handoff is >= 3 KV commits)")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
