"""Racing put_if_absent: exactly one winner per name, and the winner's bytes stored.

Writers are 8 threads in this process plus, where the store can be shared
across processes (local files, LMDB commit store over local files), 4 spawned
processes that open the store by URL themselves. All writers of a round wait
on one barrier, so their calls really overlap.
"""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest

from kvstore.objstore import ObjectStore, open_store

THREADS = 8
PROCESSES = 4
BARRIER_TIMEOUT_S = 120  # process start-up on a loaded machine, not a timing assertion


def payload(writer: str, round_no: int) -> bytes:
    return f"{writer}@round{round_no};".encode() * 50


def name(round_no: int) -> str:
    return f"_race/{round_no:04d}.ipc"


def process_writer(url: str, options: dict[str, Any], rounds: int, writer: str, barrier: Any, results: Any) -> None:
    """Runs in a spawned process: open the store by URL and race every round."""
    store = open_store(url, **options)
    try:
        for round_no in range(rounds):
            barrier.wait(BARRIER_TIMEOUT_S)
            results.put((writer, round_no, store.put_if_absent(name(round_no), payload(writer, round_no))))
    finally:
        store.close()


def race(store: ObjectStore, rounds: int, *, processes: int = 0, url: str = "", options: dict[str, Any] | None = None) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(THREADS + processes) if processes else threading.Barrier(THREADS)
    results = ctx.Queue() if processes else None
    workers = [
        ctx.Process(target=process_writer, args=(url, options or {}, rounds, f"p{i}", barrier, results), daemon=True)
        for i in range(processes)
    ]
    for proc in workers:
        proc.start()
    outcomes: list[tuple[str, int, bool]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def thread_writer(writer: str) -> None:
        try:
            for round_no in range(rounds):
                barrier.wait(BARRIER_TIMEOUT_S)
                won = store.put_if_absent(name(round_no), payload(writer, round_no))
                with lock:
                    outcomes.append((writer, round_no, won))
        except BaseException as exc:  # re-raised in the main thread below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=thread_writer, args=(f"t{i}",)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    if results is not None:
        # Threads finished every round, so every process passed every barrier
        # too: all results are coming (or a process died, and get times out).
        outcomes += [results.get(timeout=BARRIER_TIMEOUT_S) for _ in range(processes * rounds)]
    for proc in workers:
        proc.join(BARRIER_TIMEOUT_S)
        assert proc.exitcode == 0, f"writer process exited with {proc.exitcode}"

    assert len(outcomes) == (THREADS + processes) * rounds
    for round_no in range(rounds):
        winners = [w for w, r, won in outcomes if r == round_no and won]
        assert len(winners) == 1, f"round {round_no}: winners {winners}"
        assert store.get(name(round_no)) == payload(winners[0], round_no), f"round {round_no}: loser's bytes stored"
    assert [m.path for m in store.list("_race/")] == [name(r) for r in range(rounds)]


def test_race_memory_threads(store_factory) -> None:
    race(store_factory("memory"), rounds=50)


def test_race_lmdb_over_memory_threads(store_factory) -> None:
    race(store_factory("lmdb"), rounds=50)


def test_race_local_threads_and_processes(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "store"))
    try:
        race(store, rounds=50, processes=PROCESSES, url=store.url)
    finally:
        store.close()
    # Every temp file was cleaned up: losers unlink theirs, winners' became links.
    assert list((tmp_path / "store" / ".tmp").iterdir()) == []


def test_race_lmdb_over_local_threads_and_processes(tmp_path: Path) -> None:
    # The inner store refuses conditional create: only the LMDB claim decides.
    options = {"conditional_create": False}
    store = open_store(str(tmp_path / "inner"), commit_store=f"lmdb:{tmp_path / 'lmdb'}", **options)
    try:
        race(store, rounds=50, processes=PROCESSES, url=store.url, options=options)
        assert list(store.inner.list("_staging/")) == []  # type: ignore[attr-defined]
    finally:
        store.close()


@pytest.mark.s3
def test_race_seaweedfs_threads(store_factory) -> None:
    race(store_factory("s3"), rounds=10)
