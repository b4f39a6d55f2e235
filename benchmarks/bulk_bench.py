"""Bulk-write microbenchmark: the commit/apply path of W1 in one process.

Run: ``.venv/bin/python benchmarks/bulk_bench.py [--rows N] [--batch B] [--dir DIR]``

Three measurements, each CPU time of this process (``time.process_time``),
best of ``--repeat``:

* ``memtable.apply``: the rows of ``N / B`` committed batches (sorted as the
  committer sorts them) applied to a fresh :class:`~kvstore.memtable.Memtable`,
  then one full ``iter_rows`` and ``without_upto`` of half of them, and 2000
  short ``iter_rows`` scans of 100 keys;
* ``commit path, inline``: ``Store.write`` of ``N / B`` batches of ``B`` puts
  with ``background_threads=False`` (the committer's work runs in the calling
  thread, flushes and compactions too), fsync off so the number is CPU, not disk;
* ``commit path, threaded``: the default store (committer thread, background
  flush/compaction, fsync on) as the W1 harness opens it; wall rows/s as well,
  and the CPU of the writing thread alone (the commit's critical path: the
  memtable insert runs on a helper thread while the root file is written);
* ``flush``: ``Store.flush()`` of the ``N`` rows committed in ``N / B``
  batches (no background maintenance, fsync off): the work the background
  flush thread does during a bulk load, beside the committer.

Numbers move with the machine's load; compare before/after runs made back
to back, never absolute values across machines.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time

import kvstore
from kvstore.committer import _storage_order
from kvstore.format.rows import PUT
from kvstore.memtable import Memtable


def _batches(rows: int, batch: int, seed: int = 7) -> list[list[tuple[bytes, bytes]]]:
    order = list(range(rows))
    random.Random(seed).shuffle(order)
    value = bytes(range(100))
    return [[(b"key%013d" % i, value) for i in order[s:s + batch]] for s in range(0, rows, batch)]


def bench_memtable(batches: list[list[tuple[bytes, bytes]]], repeat: int) -> None:
    versions = []
    for seq, items in enumerate(batches, start=1):
        rows = [(key, seq, PUT, value, None) for key, value in items]
        rows.sort(key=_storage_order)
        versions.append(rows)
    total = sum(map(len, versions))
    best_apply = best_iter = best_trim = float("inf")
    for _ in range(repeat):
        memtable = Memtable()
        started = time.process_time()
        for rows in versions:
            memtable.apply(rows)
        best_apply = min(best_apply, time.process_time() - started)
        started = time.process_time()
        count = sum(1 for _row in memtable.iter_rows())
        best_iter = min(best_iter, time.process_time() - started)
        assert count == total
        started = time.process_time()
        memtable.without_upto(len(versions) // 2)
        best_trim = min(best_trim, time.process_time() - started)
    print(f"memtable.apply      {total / best_apply:12,.0f} rows/s CPU ({best_apply * 1e6 / len(versions):8.1f} us per batch)")
    print(f"memtable.iter_rows  {total / best_iter:12,.0f} rows/s CPU")
    print(f"memtable.without_upto(half) {best_trim * 1e3:8.1f} ms CPU")
    # Short range scans of the loaded memtable (the first one pays for merging its key order).
    memtable = Memtable()
    for rows in versions:
        memtable.apply(rows)
    rng = random.Random(3)
    count = len(batches) * len(batches[0])
    starts = [b"key%013d" % rng.randrange(count) for _ in range(2000)]
    started = time.process_time()
    scanned = 0
    for start in starts:
        end = b"key%013d" % (int(start[3:]) + 100)
        scanned += sum(1 for _row in memtable.iter_rows(start, end))
    elapsed = time.process_time() - started
    print(f"memtable 100-key scans {elapsed / len(starts) * 1e6:8.1f} us per scan CPU ({scanned / len(starts):.0f} rows each)")


def bench_store(batches: list[list[tuple[bytes, bytes]]], repeat: int, base: str, *, threaded: bool) -> None:
    total = sum(map(len, batches))
    best_cpu = best_wall = best_thread = float("inf")
    for attempt in range(repeat):
        path = f"{base}/store-{threaded}-{attempt}"
        options = {"background_threads": False, "fsync": False} if not threaded else {"fsync": True}
        with kvstore.open(path, poll_interval_s=0, **options) as db:
            write_batches = []
            for items in batches:
                wb = kvstore.WriteBatch()
                for key, value in items:
                    wb.put(key, value)
                write_batches.append(wb)
            cpu, wall, thread = time.process_time(), time.perf_counter(), time.thread_time()
            for wb in write_batches:
                db.write(wb)
            best_cpu = min(best_cpu, time.process_time() - cpu)
            best_wall = min(best_wall, time.perf_counter() - wall)
            best_thread = min(best_thread, time.thread_time() - thread)
        shutil.rmtree(path, ignore_errors=True)
    name = "threaded, fsync" if threaded else "inline, no fsync"
    # The writing thread's own CPU is the commit's critical path: with fsync,
    # the memtable insert runs on a helper thread while the root is written.
    print(f"commit path ({name:16}) {total / best_cpu:12,.0f} rows/s CPU, {total / best_wall:12,.0f} rows/s wall, "
          f"{total / best_thread:12,.0f} rows/s CPU of the writing thread")


def bench_flush(batches: list[list[tuple[bytes, bytes]]], repeat: int, base: str) -> None:
    total = sum(map(len, batches))
    best = float("inf")
    for attempt in range(repeat):
        path = f"{base}/flush-{attempt}"
        with kvstore.open(path, poll_interval_s=0, background_maintenance=False, fsync=False) as db:
            for items in batches:
                db.write(kvstore.WriteBatch().put_many(items))
            started = time.process_time()
            db.flush()
            best = min(best, time.process_time() - started)
        shutil.rmtree(path, ignore_errors=True)
    print(f"flush               {total / best:12,.0f} rows/s CPU ({best * 1e6 / total:.2f} us per row)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default=None, help="directory for the stores (default: a temp dir)")
    parser.add_argument("--only", choices=("memtable", "inline", "threaded", "flush"), default=None)
    args = parser.parse_args()
    batches = _batches(args.rows, args.batch)
    base = tempfile.mkdtemp(prefix="bulk-bench-", dir=args.dir)
    try:
        if args.only in (None, "memtable"):
            bench_memtable(batches, args.repeat)
        if args.only in (None, "inline"):
            bench_store(batches, args.repeat, base, threaded=False)
        if args.only in (None, "threaded"):
            bench_store(batches, args.repeat, base, threaded=True)
        if args.only in (None, "flush"):
            bench_flush(batches, args.repeat, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
