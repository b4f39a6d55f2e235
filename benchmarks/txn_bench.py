"""Transaction benchmarks: uncontended throughput and behaviour under contention.

Run: ``.venv/bin/python benchmarks/txn_bench.py [--quick]``

* uncontended read-modify-write transactions/s, SNAPSHOT and SERIALIZABLE
  (one thread, and 16 threads on disjoint keys);
* 16 threads of read-modify-write transactions at three contention levels —
  uniform over 100k keys, 99% uniform + 1% on 10 hot keys, one hot key —
  reporting commits/s and abort rate (an abort is a ConflictError; the
  transaction is not retried, so the rate is the raw conflict rate).

Local store, fsync on (durable commits). Compare numbers within one run only.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import sys
import tempfile
import threading
import time

import kvstore
from kvstore.errors import ConflictError


def _rmw(db: kvstore.Store, isolation: str, key: bytes) -> bool:
    txn = db.begin(isolation)
    value = txn.get(key)
    txn.put(key, b"%d" % (int(value or b"0") + 1))
    try:
        txn.commit()
        return True
    except ConflictError:
        return False


def run_threads(db: kvstore.Store, isolation: str, threads: int, per_thread: int, pick) -> tuple[float, int, int]:
    commits = [0] * threads
    aborts = [0] * threads
    barrier = threading.Barrier(threads + 1)

    def worker(tid: int) -> None:
        rng = random.Random(tid)
        barrier.wait()
        for i in range(per_thread):
            if _rmw(db, isolation, pick(rng, tid, i)):
                commits[tid] += 1
            else:
                aborts[tid] += 1

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    barrier.wait()
    t0 = time.perf_counter()
    for thread in pool:
        thread.join()
    return time.perf_counter() - t0, sum(commits), sum(aborts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    n = 300 if args.quick else 3000
    base = tempfile.mkdtemp(prefix="lakekv-txn-bench-")
    print(f"# txn_bench  python {platform.python_version()}  {os.cpu_count()} cores  fsync=on  local store")
    try:
        for isolation in ("snapshot", "serializable"):
            with kvstore.open(os.path.join(base, f"u1-{isolation}"), poll_interval_s=0) as db:
                elapsed, commits, aborts = run_threads(db, isolation, 1, n, lambda rng, t, i: b"k%07d" % i)
            print(f"uncontended, 1 thread,   {isolation:<12}: {commits / elapsed:>8,.0f} txns/s  aborts={aborts}")
            with kvstore.open(os.path.join(base, f"u16-{isolation}"), poll_interval_s=0) as db:
                elapsed, commits, aborts = run_threads(db, isolation, 16, n, lambda rng, t, i: b"t%02dk%07d" % (t, i))
            print(f"uncontended, 16 threads, {isolation:<12}: {commits / elapsed:>8,.0f} txns/s  aborts={aborts}")
        levels = {
            "uniform (100k keys)": lambda rng, t, i: b"k%06d" % rng.randrange(100_000),
            "1% on 10 hot keys": lambda rng, t, i: (b"hot%d" % rng.randrange(10)) if rng.random() < 0.01 else b"k%06d" % rng.randrange(100_000),
            "single hot key": lambda rng, t, i: b"hot",
        }
        for name, pick in levels.items():
            for isolation in ("snapshot", "serializable"):
                with kvstore.open(os.path.join(base, f"c-{name[:6]}-{isolation}"), poll_interval_s=0) as db:
                    elapsed, commits, aborts = run_threads(db, isolation, 16, n // 4, pick)
                rate = aborts / max(1, commits + aborts)
                print(f"contention {name:<20} {isolation:<12}: {commits / elapsed:>8,.0f} commits/s  abort rate {rate:6.1%}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
