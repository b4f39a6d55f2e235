"""Object-store backend benchmark: PUT, GET and conditional PUT per backend.

For each backend (memory, local with and without fsync, the LMDB commit store
over local files, SeaweedFS S3 on 127.0.0.1) it reports latency p50/p99 and
throughput, single-threaded and with 8 threads. Every operation uses a fresh
object name, as lakekv's writers do (SSTs and root files are never rewritten).

Run: ``.venv/bin/python benchmarks/objstore_bench.py [--quick] [--size BYTES]``.
SeaweedFS is skipped with a note when its ``weed`` binary is not installed.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from kvstore.objstore import LmdbCommitStore, LocalStore, MemoryStore, ObjectStore, open_store
from kvstore.testing.seaweed import SeaweedServer, find_weed

THREADS = 8


@dataclass(frozen=True)
class Result:
    """One row of the report."""

    backend: str
    threads: int
    op: str
    p50_ms: float
    p99_ms: float
    ops_per_s: float


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _run(op: Callable[[str], object], names: list[str], threads: int) -> tuple[list[float], float]:
    """Run ``op`` once per name on ``threads`` threads; return latencies and wall time."""
    latencies: list[float] = []
    lock = threading.Lock()
    chunks = [names[i::threads] for i in range(threads)]
    barrier = threading.Barrier(threads + 1)

    def worker(chunk: list[str]) -> None:
        local: list[float] = []
        barrier.wait()
        for name in chunk:
            started = time.perf_counter()
            op(name)
            local.append(time.perf_counter() - started)
        with lock:
            latencies.extend(local)

    pool = [threading.Thread(target=worker, args=(chunk,)) for chunk in chunks]
    for t in pool:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in pool:
        t.join()
    return latencies, time.perf_counter() - started


def bench_backend(label: str, store: ObjectStore, samples: int, size: int) -> Iterator[Result]:
    data = os.urandom(size)
    for threads in (1, THREADS):
        run_id = uuid.uuid4().hex[:8]
        names = [f"bench/{run_id}/{i:06d}" for i in range(samples * threads)]
        ops: list[tuple[str, Callable[[str], object]]] = [
            ("PUT", lambda name: store.put(name, data)),
            ("GET", store.get),
            ("conditional PUT", lambda name: store.put_if_absent(name + ".c", data)),
        ]
        for op_name, op in ops:
            latencies, wall = _run(op, names, threads)
            yield Result(label, threads, op_name, _percentile(latencies, 0.5) * 1e3,
                         _percentile(latencies, 0.99) * 1e3, len(latencies) / wall)
        for name in names:
            store.delete(name)
            store.delete(name + ".c")


@contextmanager
def backends(stack: ExitStack, with_s3: bool) -> Iterator[list[tuple[str, ObjectStore]]]:
    """Yield (label, fresh store) pairs; everything is cleaned up on exit."""
    tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="lakekv-bench-"))
    stores: list[tuple[str, ObjectStore]] = [
        ("memory", MemoryStore()),
        ("local fsync", LocalStore(os.path.join(tmp, "fsync"), fsync=True)),
        ("local no-fsync", LocalStore(os.path.join(tmp, "nofsync"), fsync=False)),
        ("lmdb over local", LmdbCommitStore(LocalStore(os.path.join(tmp, "lmdb-data"), conditional_create=False),
                                            os.path.join(tmp, "lmdb"))),
    ]
    if with_s3:
        server = stack.enter_context(SeaweedServer(os.path.join(tmp, "seaweedfs")))
        url, options = server.new_url()
        stores.append(("seaweedfs s3", open_store(url, **options)))
    try:
        yield stores
    finally:
        for _, store in stores:
            store.close()


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
                             cwd=os.path.dirname(os.path.abspath(__file__)))
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"unknown ({type(exc).__name__})"
    return out.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 instead of 1000 ops per figure")
    parser.add_argument("--size", type=int, default=4096, help="object size in bytes (default 4096)")
    parser.add_argument("--no-s3", action="store_true", help="skip the SeaweedFS backend")
    args = parser.parse_args(argv)
    samples = 100 if args.quick else 1000
    with_s3 = not args.no_s3
    if with_s3:
        try:
            find_weed()
        except RuntimeError as exc:
            print(f"note: skipping SeaweedFS: {exc}")
            with_s3 = False
    print(f"lakekv object-store benchmark: commit {_commit()}, {time.strftime('%Y-%m-%d %H:%M:%S')}")
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"{args.size}-byte objects, fresh name per op; {samples} ops per thread per figure\n")
    print(f"{'backend':<17} {'threads':>7}  {'op':<16} {'p50 ms':>9} {'p99 ms':>9} {'ops/s':>10}")
    with ExitStack() as stack, backends(stack, with_s3) as stores:
        for label, store in stores:
            for row in bench_backend(label, store, samples, args.size):
                print(f"{row.backend:<17} {row.threads:>7}  {row.op:<16} {row.p50_ms:>9.3f} "
                      f"{row.p99_ms:>9.3f} {row.ops_per_s:>10.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
