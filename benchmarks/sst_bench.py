"""SST benchmarks: write throughput, open, point gets (cached / uncached), scans.

Workload: ``--rows`` rows (default 1M) with 16-byte keys and 100-byte random
values, one version per key, default 64 KiB blocks and 10 bloom bits per key.

* write MB/s, from row tuples and from Arrow batches (file bytes / seconds);
* open (tail read + CRC + decode) with the size known;
* point get p50/p99 in µs: cached (every block already in the block cache),
  uncached (``cache=None``: one range GET, CRC, Arrow parse, row decode), and
  absent keys (answered by the bloom filter);
* full scan rows/s, as row tuples (``iter``) and as batches (``iter_batches``);
* ``check_invariants`` time.

Run: ``.venv/bin/python benchmarks/sst_bench.py [--rows N] [--backend memory|local]``.
Numbers vary with the machine and its load; compare ratios within one run.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import TypeVar

import pyarrow as pa

from kvstore.cache import BlockCache
from kvstore.format.rows import PUT, Row, rows_to_batch
from kvstore.format.sst import SSTReader, write_sst
from kvstore.objstore.base import ObjectStore
from kvstore.objstore.memory import MemoryStore

# Batches handed to the batch-form writer: large enough that per-batch costs vanish.
INPUT_BATCH_ROWS = 65_536


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def make_rows(n: int, seed: int) -> list[Row]:
    rng = random.Random(seed)
    value = rng.randbytes(100 * 64)  # slices of one random buffer: cheap, still incompressible
    return [(b"%016d" % (i * 7), 1, PUT, value[(i % 64) * 100 : (i % 64) * 100 + 100], None) for i in range(n)]


T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def bench_gets(reader: SSTReader, keys: list[bytes], label: str) -> None:
    samples = []
    for key in keys:
        start = time.perf_counter()
        reader.get(key)
        samples.append(time.perf_counter() - start)
    print(
        f"point get {label:<26} n={len(keys):>6}  p50={percentile(samples, 0.5) * 1e6:8.1f} µs"
        f"  p99={percentile(samples, 0.99) * 1e6:8.1f} µs"
    )


def open_backend(kind: str) -> tuple[ObjectStore, Callable[[], None]]:
    if kind == "memory":
        return MemoryStore(), lambda: None
    from kvstore.objstore.local import LocalStore  # imported lazily: only this backend needs it

    base = tempfile.mkdtemp(prefix="sst-bench-")
    return LocalStore(base), lambda: shutil.rmtree(base, ignore_errors=True)


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--gets", type=int, default=20_000)
    parser.add_argument("--backend", choices=["memory", "local"], default="memory")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    print(
        f"sst_bench: rows={args.rows} backend={args.backend} python={sys.version.split()[0]} "
        f"pyarrow={pa.__version__} machine={platform.machine()} cpus={os.cpu_count()} commit={git_commit()}"
    )
    rows = make_rows(args.rows, args.seed)
    raw_mb = sum(len(r[0]) + len(r[3] or b"") for r in rows) / 1e6
    batches = [rows_to_batch(rows[i : i + INPUT_BATCH_ROWS]) for i in range(0, len(rows), INPUT_BATCH_ROWS)]
    store, cleanup = open_backend(args.backend)
    try:
        seconds, info = timed(lambda: write_sst(store, "sst/rows.sst", rows))
        print(
            f"write from row tuples      {info.size / 1e6 / seconds:8.1f} MB/s  ({seconds:.2f} s, "
            f"file {info.size / 1e6:.1f} MB, raw key+value {raw_mb:.1f} MB, {info.block_count} blocks)"
        )
        seconds, info = timed(lambda: write_sst(store, "sst/batches.sst", batches))
        print(f"write from Arrow batches    {info.size / 1e6 / seconds:8.1f} MB/s  ({seconds:.2f} s)")
        print(f"tail (index + bloom + footer) {info.tail_size / 1e3:.0f} KB")

        seconds, reader = timed(lambda: SSTReader.open(store, info.path, size=info.size))
        print(f"open (size known)          {seconds * 1e3:8.1f} ms")

        rng = random.Random(args.seed)
        present = [rows[rng.randrange(len(rows))][0] for _ in range(args.gets)]
        absent = [b"%016d" % (rng.randrange(len(rows)) * 7 + 3) for _ in range(args.gets)]

        cached = SSTReader.open(store, info.path, cache=BlockCache(1 << 30), size=info.size)
        for _row in cached.iter():  # warm the cache: every block decoded, rows materialised
            pass
        bench_gets(cached, present, "cached, present key")
        bench_gets(cached, absent, "absent key (bloom)")
        bench_gets(reader, present[: max(1, args.gets // 4)], "uncached, present key")

        seconds, count = timed(lambda: sum(1 for _row in reader.iter()))
        print(f"full scan, row tuples      {count / seconds:12,.0f} rows/s  (uncached, {seconds:.2f} s)")
        seconds, count = timed(lambda: sum(batch.num_rows for batch in reader.iter_batches()))
        print(f"full scan, Arrow batches   {count / seconds:12,.0f} rows/s  (uncached, {seconds:.2f} s)")
        seconds, count = timed(lambda: sum(1 for _row in cached.iter()))
        print(f"full scan, rows, cached    {count / seconds:12,.0f} rows/s  ({seconds:.2f} s)")
        seconds, _none = timed(reader.check_invariants)
        print(f"check_invariants           {seconds:8.2f} s")
    finally:
        cleanup()


if __name__ == "__main__":
    main()
