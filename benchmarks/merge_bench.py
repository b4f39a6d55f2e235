"""Benchmark the k-way merge iterator: compiled (Cython) against the pure-Python reference.

Workload (the acceptance target of issue #3): 8 sources x 125k rows, 16-byte
keys, 100-byte values, overlapping key ranges. Source 0 plays the memtable
and has the highest seqs; some of its rows were also "flushed" into source 1
(the same ``(key, seq)`` twice), some keys have two versions in one source,
~5% of rows are tombstones and ~5% carry an expiry (half of them already
past). Keys look like YCSB's: ``user`` + 12 digits of a scrambled id.

Rows are materialized the way an SST read does it (Arrow batch -> tuples via
``batch_to_rows``), because memory layout decides how many cache misses the
merge takes: tuples and keys end up at a fixed stride, seq ints scattered.
Each configuration passes the sources as ``iter(list)`` (the general iterator
path; the last line passes the lists themselves, the compiled fast path) and
drains the result with ``deque(maxlen=0)``, so the consumer costs next to
nothing, with the cyclic GC paused while timing as ``timeit`` does. ``rows/s``
counts input rows merged per second, best of ``--repeat`` runs (half as many
for the slow reference). Both implementations must produce the same rows.

Run: ``.venv/bin/python benchmarks/merge_bench.py`` (about a minute).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from cython_ext._merge import merge_rows as merge_cython
from kvstore.format.rows import DELETE, PUT, Row, batch_to_rows, rows_to_batch
from kvstore.iterators.merge_ref import merge_rows as merge_python

MergeFn = Callable[..., Iterator[Row]]

NOW_MS = 1_700_000_000_000
SEQS_PER_SOURCE = 1_000_000  # source i holds seqs in its own band: older sources, lower seqs


def _key(key_id: int) -> bytes:
    """16-byte YCSB-style key: 'user' + 12 digits of a scrambled id."""
    scrambled = (key_id * 2_654_435_761) % 10**12  # Knuth's multiplicative hash: spreads ids
    return b"user%012d" % scrambled


def make_sources(n_sources: int, rows_per_source: int, seed: int = 7) -> list[list[Row]]:
    """Build sorted sources (key asc, seq desc) with overlapping key ranges.

    Args:
        n_sources: Number of sources; index 0 is the newest.
        rows_per_source: Rows in each source.
        seed: Seed for the deterministic generator.

    Returns:
        The sources, each a list of row tuples in storage order.
    """
    rng = random.Random(seed)
    values = [bytes(rng.getrandbits(8) for _ in range(100)) for _ in range(256)]
    keys: dict[int, bytes] = {}
    window = rows_per_source * 4  # each source samples ids from a window overlapping its neighbours
    stride = rows_per_source // 2
    sources: list[list[Row]] = []
    for index in range(n_sources):
        base_seq = (n_sources - index) * SEQS_PER_SOURCE
        seqs = rng.sample(range(base_seq, base_seq + SEQS_PER_SOURCE), rows_per_source)
        n_keys = rows_per_source - rows_per_source // 10  # 10% of rows are a second version
        ids = rng.sample(range(index * stride, index * stride + window), n_keys)
        ids += rng.sample(ids, rows_per_source - n_keys)
        rows: list[Row] = []
        for key_id, seq in zip(ids, seqs):
            key = keys.setdefault(key_id, _key(key_id))
            dice = rng.random()
            if dice < 0.05:
                rows.append((key, seq, DELETE, None, None))
            elif dice < 0.10:
                rows.append((key, seq, PUT, values[seq & 255], NOW_MS + rng.choice((-1, 1)) * 60_000))
            else:
                rows.append((key, seq, PUT, values[seq & 255], None))
        if index == 1:  # rows of the memtable that were also flushed: the same (key, seq) twice
            rows += rng.sample(sources[0], rows_per_source // 50)
        rows.sort(key=lambda row: (row[0], -row[1]))
        # Rebuild the rows the way an SST read materializes them (Arrow batch ->
        # tuples, allocated in storage order): memory layout decides how many
        # cache misses the merge takes, so it must match the engine's.
        sources.append(batch_to_rows(rows_to_batch(rows)))
    return sources


def time_merge(merge: MergeFn, sources: Sequence[list[Row]], as_lists: bool, repeat: int,
               **kwargs: Any) -> tuple[float, int]:
    """Best wall time of ``repeat`` full merges, and the number of rows yielded."""
    best = float("inf")
    for _ in range(repeat):
        inputs = list(sources) if as_lists else [iter(source) for source in sources]
        gc.disable()  # as timeit does: a collection pass over 1M live rows is noise here
        try:
            started = time.perf_counter()
            deque(merge(inputs, now_ms=NOW_MS, **kwargs), maxlen=0)
            best = min(best, time.perf_counter() - started)
        finally:
            gc.enable()
    n_out = sum(1 for _ in merge([iter(source) for source in sources], now_ms=NOW_MS, **kwargs))
    return best, n_out


def _machine() -> str:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    cpu = platform.processor() or platform.machine()
    return f"{platform.python_implementation()} {platform.python_version()}, {cpu}, {os.cpu_count()} cpus, commit {commit}"


def main() -> None:
    """Run every configuration and print rows/s for both implementations and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=8)
    parser.add_argument("--rows", type=int, default=125_000, help="rows per source")
    parser.add_argument("--repeat", type=int, default=5, help="runs per configuration (best is kept)")
    parser.add_argument("--no-sst", action="store_true", help="skip the SST write / point-get numbers (sst_bench.py)")
    args = parser.parse_args()

    sources = make_sources(args.sources, args.rows)
    reverse_sources = [sorted(source, key=lambda row: (row[0], row[1]), reverse=True) for source in sources]
    n_in = sum(map(len, sources))
    middle_seq = (args.sources // 2) * SEQS_PER_SOURCE  # compaction floor: half the runs are above it
    # A reader that started while the memtable (source 0) was half written:
    # its newer half is invisible, as in a real snapshot read.
    snapshot_seq = args.sources * SEQS_PER_SOURCE + SEQS_PER_SOURCE // 2
    configs: list[tuple[str, list[list[Row]], bool, dict[str, Any]]] = [
        ("read, forward", sources, False, {}),
        ("read, reverse", reverse_sources, False, {"reverse": True}),
        ("read, forward, snapshot + range", sources, False,
         {"snapshot_seq": snapshot_seq, "start": b"user2", "end": b"user8"}),
        ("compaction", sources, False, {"mode": "compaction", "floor_seq": middle_seq}),
        ("compaction, last run", sources, False, {"mode": "compaction", "floor_seq": middle_seq, "last_run": True}),
        ("read, forward, list sources", sources, True, {}),
    ]
    print(f"merge_bench: {args.sources} sources x {args.rows:,} rows = {n_in:,} rows in; {_machine()}")
    print(f"{'configuration':34} {'rows out':>10} {'python rows/s':>14} {'cython rows/s':>14} {'ratio':>7}")
    for name, data, as_lists, kwargs in configs:
        expected = list(merge_python([iter(source) for source in data], now_ms=NOW_MS, **kwargs))
        if list(merge_cython(list(data), now_ms=NOW_MS, **kwargs)) != expected:
            raise SystemExit(f"{name}: the implementations disagree")
        t_py, n_out = time_merge(merge_python, data, as_lists, max(1, args.repeat // 2), **kwargs)
        t_cy, _ = time_merge(merge_cython, data, as_lists, args.repeat, **kwargs)
        print(f"{name:34} {n_out:>10,} {n_in / t_py:>14,.0f} {n_in / t_cy:>14,.0f} {t_py / t_cy:>6.1f}x")
    if not args.no_sst:
        # The issue asks for SST write MB/s and cached point-get p50 beside the
        # merge numbers; sst_bench.py measures them (1M rows, memory store).
        print(flush=True)
        subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "sst_bench.py")], check=True)


if __name__ == "__main__":
    main()
