"""Engine benchmarks: durable commits, gets, scans, open time.

Run: ``.venv/bin/python benchmarks/engine_bench.py [--quick] [--dir DIR]``

* sequential durable commits on a local store with fsync: p50/p99 latency
* commits/s with 1, 8 and 64 threads (group commit)
* memtable point gets (Store.get) and scans (row and batch forms)
* open time vs number of unflushed versions

Prints one line per measurement; numbers vary with the machine and its load,
so compare ratios measured in the same run, never absolute values across runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time

import kvstore
from kvstore.objstore import CountingStore, open_store


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench_sequential_commits(base: str, n: int) -> None:
    with kvstore.open(os.path.join(base, "seq"), poll_interval_s=0, fsync=True) as db:
        latencies = []
        value = b"v" * 100
        for i in range(n):
            t0 = time.perf_counter()
            db.put(b"key%08d" % i, value)
            latencies.append(time.perf_counter() - t0)
    print(
        f"sequential durable commits (fsync): n={n} p50={_pct(latencies, 0.5) * 1e3:.3f} ms "
        f"p99={_pct(latencies, 0.99) * 1e3:.3f} ms  {n / sum(latencies):,.0f} commits/s"
    )


def bench_concurrent_commits(base: str, threads: int, per_thread: int, fsync: bool = True) -> None:
    path = os.path.join(base, f"conc{threads}-{int(fsync)}")
    objects = CountingStore(open_store(path, fsync=fsync))
    with kvstore.open(objects, poll_interval_s=0) as db:
        objects.reset()
        latencies: list[list[float]] = [[] for _ in range(threads)]
        barrier = threading.Barrier(threads + 1)
        value = b"v" * 100

        def worker(tid: int) -> None:
            out = latencies[tid]
            barrier.wait()
            for i in range(per_thread):
                t0 = time.perf_counter()
                db.put(b"t%03dk%07d" % (tid, i), value)
                out.append(time.perf_counter() - t0)

        pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
        for thread in pool:
            thread.start()
        barrier.wait()
        t0 = time.perf_counter()
        for thread in pool:
            thread.join()
        elapsed = time.perf_counter() - t0
        stats = db.stats()
    flat = [x for xs in latencies for x in xs]
    total = threads * per_thread
    counts = objects.counts
    puts = counts["put"] + counts["put_if_absent"]
    print(
        f"{threads:>2} threads durable commits (fsync={fsync}): {total / elapsed:,.0f} commits/s "
        f"p50={_pct(flat, 0.5) * 1e3:.2f} ms p99={_pct(flat, 0.99) * 1e3:.2f} ms "
        f"groups={stats['groups_committed']} ({total / max(1, stats['groups_committed']):.1f} commits/group) "
        f"PUTs/commit={puts / total:.3f} (root {counts['put_if_absent']}, hint {counts['put']})"
    )


def bench_reads(n_keys: int, n_gets: int) -> None:
    with kvstore.open(f"memory://bench-{random.random()}", poll_interval_s=0) as db:
        batch = kvstore.WriteBatch()
        for i in range(n_keys):
            batch.put(b"key%012d" % i, b"v" * 100)
            if len(batch) == 10_000:
                db.write(batch)
                batch = kvstore.WriteBatch()
        if len(batch):
            db.write(batch)
        keys = [b"key%012d" % random.randrange(n_keys) for _ in range(n_gets)]
        get = db.get
        t0 = time.perf_counter()
        for key in keys:
            get(key)
        elapsed = time.perf_counter() - t0
        print(f"memtable get: {n_gets / elapsed:,.0f} gets/s ({elapsed / n_gets * 1e6:.2f} us/get, {n_keys:,} keys)")
        t0 = time.perf_counter()
        rows = sum(1 for _ in db.scan())
        elapsed = time.perf_counter() - t0
        print(f"scan (rows): {rows / elapsed:,.0f} rows/s over {rows:,} keys")
        t0 = time.perf_counter()
        rows = sum(b.num_rows for b in db.scan_batches(batch_rows=8192))
        elapsed = time.perf_counter() - t0
        print(f"scan (Arrow batches): {rows / elapsed:,.0f} rows/s over {rows:,} keys")


def bench_open(base: str, versions: int) -> None:
    path = os.path.join(base, f"open{versions}")
    with kvstore.open(path, poll_interval_s=0, fsync=False) as db:
        pending = []
        lock = threading.Lock()

        def writer(tid: int) -> None:
            for i in range(versions // 8):
                db.put(b"k%d-%d" % (tid, i), b"v" * 50)
                with lock:
                    pending.append(1)

        pool = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        unflushed = db.version
    t0 = time.perf_counter()
    with kvstore.open(path, create=False, poll_interval_s=0) as db:
        elapsed = time.perf_counter() - t0
        rows = db.stats()["memtable_rows"]
    print(f"open with {unflushed:,} unflushed versions ({rows:,} rows): {elapsed * 1e3:.0f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for smoke tests")
    parser.add_argument("--dir", help="directory for local stores (default: a temp dir)")
    args = parser.parse_args(argv)
    base = args.dir or tempfile.mkdtemp(prefix="lakekv-bench-")
    scale = 0.05 if args.quick else 1.0
    print(f"# engine_bench  python {platform.python_version()}  {os.cpu_count()} cores  {platform.machine()}  dir={base}")
    try:
        bench_sequential_commits(base, max(50, int(2000 * scale)))
        for threads in (1, 8, 64):
            bench_concurrent_commits(base, threads, max(20, int(40_000 * scale) // threads))
        bench_concurrent_commits(base, 64, max(20, int(40_000 * scale) // 64), fsync=False)
        bench_reads(max(10_000, int(1_000_000 * scale)), max(10_000, int(500_000 * scale)))
        for versions in (100, 1000, 10_000):
            bench_open(base, max(16, int(versions * scale)))
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
