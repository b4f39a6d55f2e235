"""Linearizable reads (kvstore.freshness): a read sees every commit acknowledged
before it began, by any process, without waiting for the follower."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import kvstore
from kvstore.freshness import HeadBeacon, SharedProbe
from kvstore.objstore import LocalStore
from kvstore.testing.seaweed import SeaweedServer
from kvstore.objstore.counting import CountingStore

WRITER = Path(__file__).with_name("freshness_writer.py")
# The reader's follower never runs during a test: only the read's own check can find the writes.
NO_FOLLOWER: dict[str, Any] = {"poll_interval_s": 1000.0, "background_maintenance": False}


def _pairs(url: str, options: dict[str, Any], count: int) -> tuple[int, list[float]]:
    """Another process writes ``count`` times; after each acknowledged write this
    process reads at once. Returns (misses, read latencies in seconds)."""
    with kvstore.open(url, **NO_FOLLOWER, **options) as reader:
        writer = subprocess.Popen(
            [sys.executable, str(WRITER), url, json.dumps(options), str(count)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2],
        )
        assert writer.stdin is not None and writer.stdout is not None
        misses, latencies = 0, []
        try:
            for i in range(count):
                line = writer.stdout.readline()
                assert line.strip() == str(i), f"writer said {line!r}"
                started = time.perf_counter()
                value = reader.get(b"pair")
                latencies.append(time.perf_counter() - started)
                misses += value != str(i).encode()
                writer.stdin.write("next\n")
                writer.stdin.flush()
        finally:
            writer.stdin.close()
            assert writer.wait(60) == 0
    return misses, latencies


def test_a_thousand_writes_in_another_process_are_each_read_at_once_on_a_local_directory(tmp_path: Path) -> None:
    url = (tmp_path / "db").as_uri()
    kvstore.open(url).close()
    misses, _ = _pairs(url, {}, 1000)
    assert misses == 0


def test_writes_in_another_process_are_read_at_once_on_s3(seaweedfs: SeaweedServer) -> None:
    url, options = seaweedfs.new_url()
    kvstore.open(url, **options).close()
    misses, _ = _pairs(url, options, 200)
    assert misses == 0


def test_serializable_reads_are_the_handles_view_and_linearizable_ones_catch_up(tmp_path: Path) -> None:
    url = (tmp_path / "db").as_uri()
    with kvstore.open(url, **NO_FOLLOWER) as a, kvstore.open(url, **NO_FOLLOWER, read_consistency="serializable") as b:
        a.put(b"k", b"1")
        assert b.get(b"k") is None  # b's default is its own view
        assert b.get_with_revision(b"k") == (None, None)
        assert list(b.scan()) == []
        assert b.get(b"k", consistency="linearizable") == b"1"
        seq = a.put(b"k", b"2")
        assert b.get_with_revision(b"k", consistency="linearizable") == (b"2", seq)
        a.put(b"j", b"3")
        assert list(b.scan(consistency="linearizable")) == [(b"j", b"3"), (b"k", b"2")]


def test_transactions_and_snapshots_begin_at_every_acknowledged_commit(tmp_path: Path) -> None:
    url = (tmp_path / "db").as_uri()
    with kvstore.open(url, **NO_FOLLOWER) as a, kvstore.open(url, **NO_FOLLOWER) as b:
        a.put(b"k", b"1")
        with b.transaction() as txn:
            assert txn.get(b"k") == b"1"
        a.put(b"k", b"2")
        assert b.snapshot().get(b"k") == b"2"
        a.put(b"k", b"3")
        assert b.snapshot(fresh=False).get(b"k") == b"2"  # explicitly this handle's view


def test_a_wrapped_store_probes_and_concurrent_readers_share_probes() -> None:
    # A wrapped object store has no beacon: each linearizable read needs a probe
    # that started after it; concurrent readers share them.
    counting = CountingStore(kvstore.objstore.MemoryStore(), record_paths=True)
    with kvstore.open(counting, **NO_FOLLOWER) as db:
        db.put(b"k", b"v")
        def root_requests() -> list[str]:  # the hint writer may touch _latest_hint meanwhile: not counted
            return [op for op, path in counting.paths if path.startswith("_") and path.endswith(".ipc")]

        counting.paths.clear()
        for _ in range(10):
            assert db.get(b"k") == b"v"
        # One GET each (a 404): s3fs answers a HEAD of a missing key with a HEAD and a LIST.
        assert root_requests() == ["get"] * 10
        counting.paths.clear()
        for _ in range(10):
            assert db.get(b"k", consistency="serializable") == b"v"
        assert root_requests() == []


def test_a_shared_probe_answers_each_caller_with_a_probe_that_started_after_it() -> None:
    clock = threading.Lock()
    probes: list[tuple[float, float]] = []

    def probe() -> None:
        start = time.monotonic()
        time.sleep(0.002)
        with clock:
            probes.append((start, time.monotonic()))

    shared = SharedProbe(probe)
    calls: list[tuple[float, float]] = []

    def reader() -> None:
        for _ in range(50):
            arrived = time.monotonic()
            shared.sync()
            with clock:
                calls.append((arrived, time.monotonic()))

    threads = [threading.Thread(target=reader) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 400
    for arrived, returned in calls:
        assert any(arrived <= start and end <= returned for start, end in probes), (arrived, returned)
    assert len(probes) < len(calls)  # shared


def test_a_failed_probe_raises_in_its_caller_and_is_not_taken_as_an_answer() -> None:
    outcomes = iter([OSError("storage down"), None])

    def probe() -> None:
        outcome = next(outcomes)
        if outcome is not None:
            raise outcome

    shared = SharedProbe(probe)
    with pytest.raises(OSError, match="storage down"):
        shared.sync()
    shared.sync()  # a new probe runs; it succeeds
    assert shared.probes == 2


def test_the_beacon_is_shared_by_handles_and_never_lowered(tmp_path: Path) -> None:
    one, two = HeadBeacon(tmp_path / "beacon"), HeadBeacon(tmp_path / "beacon")
    assert one.read() == 0
    one.raise_to(7)
    assert two.read() == 7
    two.raise_to(3)
    assert one.read() == 7
    one.close()
    two.close()


def test_a_read_only_directory_falls_back_to_probing(tmp_path: Path) -> None:
    url = (tmp_path / "db").as_uri()
    with kvstore.open(url) as db:
        db.put(b"k", b"v")
    os.remove(tmp_path / "db" / "_head_beacon")
    assert HeadBeacon.for_directory(tmp_path / "missing-dir") is None
    with kvstore.open(LocalStore(tmp_path / "db"), **NO_FOLLOWER) as db:
        assert db.get(b"k") == b"v"


@pytest.mark.parametrize("bad", [1, b"linearizable", "strict"])
def test_a_bad_consistency_is_refused_before_reading(tmp_path: Path, bad: object) -> None:
    with kvstore.open((tmp_path / "db").as_uri()) as db:
        db.put(b"k", b"v")
        error = TypeError if not isinstance(bad, str) else ValueError
        with pytest.raises(error, match="consistency"):
            db.get(b"k", bad)  # type: ignore[arg-type]
        with pytest.raises(error, match="consistency"):
            db.get_with_revision(b"k", bad)  # type: ignore[arg-type]
        with pytest.raises(error, match="consistency"):
            db.scan(consistency=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="read_consistency"):
        kvstore.open((tmp_path / "db").as_uri(), read_consistency="strict")
