"""Many writers, many processes, one store: blind writes on overlapping keys.

Each worker process opens the store by URL and runs several threads of
``put``s; every acknowledged write is reported with its seq. Afterwards the
chain must be gap-free, every acknowledged write visible at its seq, and each
key's final value the acknowledged write with the highest seq.
"""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any

import pytest

import kvstore
from kvstore.chain import VersionChain
from kvstore.format.rows import PUT
from kvstore.testing.seams import row_at

KEYSPACE = 40  # small, so writers overlap on keys constantly


def _worker(url: str, options: dict[str, Any], proc: int, threads: int, writes: int, out: Any) -> None:
    acked: list[tuple[bytes, bytes, int]] = []
    lock = threading.Lock()
    with kvstore.open(url, poll_interval_s=0, **options) as db:

        def run(tid: int) -> None:
            for i in range(writes):
                key = b"key%03d" % ((proc * 7 + tid * 3 + i) % KEYSPACE)
                value = b"p%d-t%d-%d" % (proc, tid, i)
                seq = db.put(key, value)
                with lock:
                    acked.append((key, value, seq))

        pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
    out.put(acked)


def run_writers(url: str, options: dict[str, Any], processes: int, threads: int, writes: int) -> list[tuple[bytes, bytes, int]]:
    kvstore.open(url, poll_interval_s=0, **options).close()  # create it once up front
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(url, options, p, threads, writes, queue)) for p in range(processes)]
    for proc in procs:
        proc.start()
    acked = [row for _ in procs for row in queue.get(timeout=600)]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    return acked


def check_history(url: str, options: dict[str, Any], acked: list[tuple[bytes, bytes, int]]) -> None:
    seqs = [seq for _, _, seq in acked]
    assert len(set(seqs)) == len(seqs), "two acknowledged writes share a seq"
    with kvstore.open(url, create=False, poll_interval_s=0, **options) as db:
        chain = VersionChain(db.objects)
        versions = chain.list_versions()
        assert versions == list(range(db.version + 1)), "versions are not gap-free"
        previous_last = 0
        for version in versions:
            root = chain.read_root(version)
            assert root.first_seq == previous_last + 1
            previous_last = root.last_seq
            seq_column = [row[1] for row in root.delta_rows()]
            assert all(root.first_seq <= s <= root.last_seq for s in seq_column)
        assert previous_last == db.seq == max(seqs)
        for key, value, seq in acked:  # each acknowledged row, at its own seq, in the read layers
            assert row_at(db, key, seq) == (key, seq, PUT, value, None), f"acknowledged write {key!r}@{seq} lost"
        final: dict[bytes, tuple[int, bytes]] = {}
        for key, value, seq in acked:
            if key not in final or seq > final[key][0]:
                final[key] = (seq, value)
        for key, (_, value) in final.items():
            assert db.get(key) == value


@pytest.mark.slow
def test_four_processes_four_threads_local(tmp_path) -> None:
    url = str(tmp_path / "store")
    acked = run_writers(url, {"fsync": False}, processes=4, threads=4, writes=150)
    assert len(acked) == 4 * 4 * 150
    check_history(url, {}, acked)


@pytest.mark.slow
@pytest.mark.s3
def test_four_processes_four_threads_seaweedfs(seaweedfs) -> None:
    url, options = seaweedfs.new_url()
    acked = run_writers(url, options, processes=4, threads=4, writes=25)
    assert len(acked) == 4 * 4 * 25
    check_history(url, options, acked)
