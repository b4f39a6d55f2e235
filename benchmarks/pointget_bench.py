"""Point-get benchmark of one lakekv store, for iterating on the read path.

Loads ``--rows`` keys (16-byte keys, ``--value-bytes`` values) in 1000-row
batches into a local store, flushes and compacts it, then times
``Store.get`` over ``--gets`` uniformly drawn keys twice (the second pass is
reported: hot cache), plus the same keys through ``Store.get`` of an absent
key set (bloom-filter answers). Prints gets/s, p50/p99 and the block cache's
counters, so a thrashing cache shows up as evictions.

Run: ``.venv/bin/python benchmarks/pointget_bench.py [--rows N] [--cache-bytes B]``
(without ``--cache-bytes`` the store's default applies). The peer-relative
figures are in the full harness (``make bench``, W4); this script is for
before/after comparisons of lakekv alone, in one run.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time

import kvstore


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed_gets(db: kvstore.Store, keys: list[bytes]) -> tuple[float, list[float], int]:
    get = db.get
    clock = time.perf_counter
    latencies = []
    missing = 0
    started = clock()
    for key in keys:
        began = clock()
        if get(key) is None:
            missing += 1
        latencies.append(clock() - began)
    return clock() - started, latencies, missing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--gets", type=int, default=100_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--cache-bytes", type=int, default=None)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    value = rng.randbytes(args.value_bytes)
    order = list(range(args.rows))
    rng.shuffle(order)
    path = tempfile.mkdtemp(prefix="lakekv-pointget-")
    options = {"poll_interval_s": 0}
    if args.cache_bytes is not None:
        options["cache_bytes"] = args.cache_bytes
    try:
        with kvstore.open(path, **options) as db:
            for start in range(0, args.rows, 1000):
                batch = kvstore.WriteBatch()
                for i in order[start:start + 1000]:
                    batch.put(b"%016d" % i, value)
                db.write(batch)
            db.flush()
            db.compact()
            keys = [b"%016d" % rng.randrange(args.rows) for _ in range(args.gets)]
            absent = [b"%016dx" % rng.randrange(args.rows) for _ in range(args.gets)]
            timed_gets(db, keys)  # warm-up pass
            before = db.stats()["cache"]
            for name, probe in (("present", keys), ("absent", absent)):
                elapsed, latencies, missing = timed_gets(db, probe)
                print(f"{name:8} {len(probe) / elapsed:12,.0f} gets/s  p50 {percentile(latencies, 0.5) * 1e6:6.2f} µs"
                      f"  p99 {percentile(latencies, 0.99) * 1e6:6.2f} µs  missing {missing:,}")
            after = db.stats()["cache"]
            print(f"cache: {after.entries} entries, {after.bytes / 2**20:.1f} of {after.capacity_bytes / 2**20:.0f} MiB;"
                  f" timed passes: {after.hits - before.hits:,} hits, {after.misses - before.misses:,} misses,"
                  f" {after.evictions - before.evictions:,} evictions")
    finally:
        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    main()
