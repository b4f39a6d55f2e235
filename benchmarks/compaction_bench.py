"""Compaction benchmark: sustained batched writes with background flush, compaction and GC.

Run: ``.venv/bin/python benchmarks/compaction_bench.py [--keys 1000000] [--memory] [--dir DIR]``

Writes ``--keys`` puts (keys drawn uniformly from a key space of the same size,
so about 63 % are distinct and the rest are updates) in batches, one commit
per batch, while the store's own background threads flush and compact and the
benchmark runs GC every ``--gc-every`` batches. Reports:

* write amplification: bytes PUT to storage / bytes of keys and values written
  (with the share of root files = the WAL, flush SSTs and compaction SSTs);
* SSTs consulted per point get, p50/p99 (range + bloom checks) and SSTs read
  (a block fetched), sampled during the run and at the end;
* space amplification: bytes stored / bytes of the live keys and values;
* number of objects over the run (bounded, not growing with commits);
* compaction throughput in MB/s (input bytes / compaction wall time).

Numbers vary with the machine and its load; compare runs on one machine.
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
import threading
import time
from collections import Counter
from collections.abc import Iterator

import kvstore
from kvstore.format.root import parse_root_path
from kvstore.objstore import LocalStore, MemoryStore
from kvstore.objstore.base import ObjectMeta, ObjectStore
from kvstore.reader import get_row_traced

MB = 1_000_000


class ByteCounter:
    """Wraps an ObjectStore and counts bytes written per kind of object. Thread-safe."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.url = inner.url
        self._lock = threading.Lock()
        self.written: Counter[str] = Counter()

    def _count(self, path: str, nbytes: int) -> None:
        kind = "roots" if parse_root_path(path) is not None else path.split("/", 1)[0]
        with self._lock:
            self.written[kind] += nbytes

    def get(self, path: str) -> bytes:
        return self.inner.get(path)

    def get_range(self, path: str, start: int, end: int) -> bytes:
        return self.inner.get_range(path, start, end)

    def head(self, path: str) -> ObjectMeta:
        return self.inner.head(path)

    def put(self, path: str, data: bytes) -> None:
        self._count(path, len(data))
        self.inner.put(path, data)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        created = self.inner.put_if_absent(path, data)
        if created:
            self._count(path, len(data))
        return created

    def list(self, prefix: str = "") -> Iterator[ObjectMeta]:
        return self.inner.list(prefix)

    def delete(self, path: str) -> None:
        self.inner.delete(path)

    def close(self) -> None:
        self.inner.close()


def _pct(samples: list[int], q: float) -> int:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _objects(store: ObjectStore) -> tuple[int, int]:
    metas = list(store.list())
    return len(metas), sum(meta.size for meta in metas)


def _probe(db: kvstore.Store, keys: list[bytes], consulted: list[int], read: list[int]) -> None:
    layers, seq = db._state.layers, db.seq
    for key in keys:
        _, checked, fetched = get_row_traced(layers, key, seq)
        consulted.append(checked)
        read.append(fetched)


def run(args: argparse.Namespace) -> None:
    base = None
    if args.memory:
        inner: ObjectStore = MemoryStore()
    else:
        base = args.dir or tempfile.mkdtemp(prefix="lakekv-compaction-bench-")
        inner = LocalStore(os.path.join(base, "store"), fsync=False)
    store = ByteCounter(inner)
    options = {
        "poll_interval_s": 0,
        "fsync": False,
        "retention_window_s": 0.0,  # no time travel: lets compaction drop old versions and GC collect
        "gc_grace_s": args.grace,
        "gc_interval_s": 0.0,  # GC is driven below, to sample object counts around it
        "maintenance_interval_s": 0.05,
        "sst_target_bytes": args.sst_mb * 1024 * 1024,
    }
    rng = random.Random(42)
    value = b"v" * args.value_size
    user_bytes = 0
    live: dict[int, int] = {}  # key index -> bytes, for space amplification
    order: list[int] = []  # distinct key indexes, to sample existing keys from
    consulted: list[int] = []
    read: list[int] = []
    object_counts: list[int] = []
    batches = args.keys // args.batch
    with kvstore.open(store, **options) as db:  # type: ignore[arg-type]
        started = time.perf_counter()
        for number in range(batches):
            batch = kvstore.WriteBatch()
            for _ in range(args.batch):
                index = rng.randrange(args.keys)
                key = b"key%010d" % index
                batch.put(key, value)
                if index not in live:
                    order.append(index)
                live[index] = len(key) + len(value)
                user_bytes += len(key) + len(value)
            db.write(batch)
            if number % args.gc_every == args.gc_every - 1:
                db.gc()
                object_counts.append(_objects(inner)[0])
                # Existing keys: a miss would consult every candidate SST by design.
                _probe(db, [b"key%010d" % rng.choice(order) for _ in range(200)], consulted, read)
        write_seconds = time.perf_counter() - started
        stats = db.maintenance_stats()
        final_keys = [b"key%010d" % index for index in rng.sample(order, min(20_000, len(order)))]
        end_consulted: list[int] = []
        end_read: list[int] = []
        _probe(db, final_keys, end_consulted, end_read)
        tree = db._state.tree
        db.gc()
        count, stored = _objects(inner)
        # Steady state: once the grace period has passed, GC can take the
        # last roots and replaced SSTs of the run.
        time.sleep(args.grace + 1)
        db.flush()
        db.compact()
        db.gc()
        settled_count, settled_stored = _objects(inner)
    live_bytes = sum(live.values())
    written = store.written
    total_written = sum(written.values())
    print(
        f"# compaction_bench  {args.keys:,} puts in batches of {args.batch} ({len(live):,} distinct keys, "
        f"{args.value_size} B values)  backend={'memory' if args.memory else 'local'}  "
        f"python {platform.python_version()}  {os.cpu_count()} cores  commit {_commit()}"
    )
    print(f"write: {args.keys / write_seconds:,.0f} puts/s, {user_bytes / MB / write_seconds:.1f} MB/s of keys+values")
    print(
        f"write amplification: {total_written / user_bytes:.2f}  (roots/WAL {written['roots'] / user_bytes:.2f}, "
        f"SSTs {written['sst'] / user_bytes:.2f}, trees {written['tree'] / user_bytes:.3f})"
    )
    print(
        f"SSTs consulted per point get: during run p50={_pct(consulted, 0.5)} p99={_pct(consulted, 0.99)} "
        f"max={max(consulted)}; at end p50={_pct(end_consulted, 0.5)} p99={_pct(end_consulted, 0.99)}"
    )
    print(
        f"SSTs read (block fetched) per point get: during run p50={_pct(read, 0.5)} p99={_pct(read, 0.99)}; "
        f"at end p50={_pct(end_read, 0.5)} p99={_pct(end_read, 0.99)}"
    )
    print(
        f"space amplification: {stored / live_bytes:.2f} right after the writes, "
        f"{settled_stored / live_bytes:.2f} once GC's grace period passed "
        f"({stored / MB:.1f} / {settled_stored / MB:.1f} MB stored, {live_bytes / MB:.1f} MB live)"
    )
    tenth = max(1, len(object_counts) // 10)
    print(
        f"objects: every {args.gc_every * tenth} commits {object_counts[::tenth]}; max {max(object_counts)} "
        f"over {batches} commits; {count} after the writes, {settled_count} once the grace period passed; "
        f"tree at end: {len(tree.l0)} L0 + {len(tree.runs)} runs"
    )
    compaction_mb = stats["compaction_bytes_read"] / MB
    print(
        f"compaction: {stats['compactions']} runs, {compaction_mb:.1f} MB read, "
        f"{stats['compaction_bytes_written'] / MB:.1f} MB written, "
        f"{compaction_mb / max(stats['compaction_seconds'], 1e-9):.1f} MB/s; {stats['flushes']} flushes, "
        f"{stats['conflicts']} lost races, {stats['background_errors']} background errors"
    )
    if base is not None and not args.dir:
        shutil.rmtree(base, ignore_errors=True)


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True, cwd=os.path.dirname(__file__)
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000, help="puts to write (default 1,000,000)")
    parser.add_argument("--batch", type=int, default=100, help="puts per commit (default 100)")
    parser.add_argument("--value-size", type=int, default=100, help="value bytes (default 100)")
    parser.add_argument("--gc-every", type=int, default=200, help="run GC every N commits (default 200)")
    parser.add_argument(
        "--grace", type=float, default=15.0, help="GC grace period, seconds; must exceed the longest compaction (default 15)"
    )
    parser.add_argument("--sst-mb", type=int, default=8, help="compaction output SST size, MiB (default 8)")
    parser.add_argument("--memory", action="store_true", help="in-memory store instead of a local directory")
    parser.add_argument("--dir", help="directory for the local store (default: a temp dir, removed after)")
    args = parser.parse_args(argv)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
