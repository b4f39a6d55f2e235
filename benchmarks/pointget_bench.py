"""Point-get benchmark of one lakekv store, for iterating on the read path.

Loads ``--rows`` keys (16-byte keys, ``--value-bytes`` values) in 1000-row
batches into a local store, flushes and compacts it, then times
``Store.get`` over ``--gets`` uniformly drawn keys twice (the second pass is
reported: hot cache), plus the same keys through ``Store.get`` of an absent
key set (bloom-filter answers). Prints gets/s, p50/p99 and the block cache's
counters, so a thrashing cache shows up as evictions.

``--peer lmdb`` instead loads W4's rows into lakekv and LMDB through the
harness adapters (``harness.lakekv_engine``, ``harness.lmdb_engine``: the
calls W4 times) and times them on W4's uniform and Zipfian key lists in
alternating passes, so both see the same machine at the same moment; it
prints each pass's rate per CPU second of the calling thread (what a busy
machine disturbs least) and the median ratio. Run it from ``benchmarks/``.

Run: ``.venv/bin/python benchmarks/pointget_bench.py [--rows N] [--cache-bytes B] [--peer lmdb]``
(without ``--cache-bytes`` the store's default applies). The peer-relative
figures of record are in the full harness (``make bench``, W4); this script is
for before/after comparisons in one run.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

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


def lakekv_alone(args: argparse.Namespace) -> None:
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


def beside_lmdb(args: argparse.Namespace) -> None:
    from harness import data
    from harness.lakekv_engine import LakeKV
    from harness.lmdb_engine import LMDB

    batches = data.load_batches(args.rows, 1000, args.seed, data.Values(args.seed))
    cases = {
        "uniform": data.uniform_keys(args.rows, args.gets, args.seed + 1),
        "Zipfian 0.99": data.zipfian_keys(args.rows, args.gets, 0.99, args.seed + 2),
    }
    root = Path(tempfile.mkdtemp(prefix="lakekv-pointget-"))
    engines = [LakeKV(cache_bytes=args.cache_bytes), LMDB()]
    try:
        for engine in engines:
            engine.open(root / engine.key)
            for batch in batches:
                engine.write_batch(batch)
            engine.settle()
        for case, keys in cases.items():
            rates: dict[str, list[float]] = {engine.key: [] for engine in engines}
            for engine in engines:
                engine.timed_gets(keys, float("inf"))  # warm-up pass
            for _ in range(args.passes):
                for engine in engines:
                    cpu = time.thread_time()
                    done, missing = engine.timed_gets(keys, float("inf"))
                    rates[engine.key].append(len(done) / (time.thread_time() - cpu))
                    if missing:
                        raise SystemExit(f"{engine.label}: {missing} keys missing")
            ratios = [a / b for a, b in zip(rates["lakekv"], rates["lmdb"], strict=True)]
            print(f"{case:13} lakekv {statistics.median(rates['lakekv']):11,.0f}  LMDB"
                  f" {statistics.median(rates['lmdb']):11,.0f} gets per CPU s;  lakekv/LMDB per pass:"
                  f" {', '.join(f'{r:.2f}' for r in ratios)} (median {statistics.median(ratios):.2f})")
    finally:
        for engine in engines:
            engine.close()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--gets", type=int, default=100_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--cache-bytes", type=int, default=None)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--peer", choices=["lmdb"], default=None,
                        help="time W4's key lists beside this peer, in alternating passes")
    parser.add_argument("--passes", type=int, default=5, help="timed passes per engine and key list (--peer)")
    args = parser.parse_args()
    if args.peer is not None:
        if args.value_bytes != 100:
            parser.error("--peer uses W4's rows: 100-byte values")
        beside_lmdb(args)
    else:
        lakekv_alone(args)


if __name__ == "__main__":
    main()
