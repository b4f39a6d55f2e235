"""Acceptance 3: a multi-table load by 3 processes attached to one durable
transaction, committed by a 4th; and the same with the committer killed and
the transaction left to expire."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path

import pyarrow as pa
import pytest

import catalog
from durable_workers import LAKE_OPTIONS, SkewedClock, append_in_transaction, attach_and_hang, commit_transaction

TABLES = ("sales.t1", "sales.t2", "sales.t3")


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = str(tmp_path / "lake")
    with catalog.open(url, **LAKE_OPTIONS) as lake:
        lake.create_namespace("sales")
        for name in TABLES:
            lake.create_table(name, pa.schema([("id", pa.int64()), ("day", pa.string())]))
    return url


def _run(target: object, *args: object) -> None:
    proc = multiprocessing.get_context("spawn").Process(target=target, args=args)
    proc.start()
    proc.join(timeout=300)
    assert proc.exitcode == 0, f"{target} failed with exit code {proc.exitcode}"


def _counts(lake: catalog.Lakehouse, version: int | None = None) -> list[int]:
    lake.refresh()
    if version is None:
        return [lake.load_table(t).scan().count() for t in TABLES]
    with lake.at(version=version) as past:
        return [past.load_table(t).scan().count() for t in TABLES]


def _staged_files(lake: catalog.Lakehouse) -> set[str]:
    return {m.path for t in TABLES for m in lake.objects.list(f"data/{lake.load_table(t).id}/")}


def test_three_writers_one_committer(url: str) -> None:
    with catalog.open(url, **LAKE_OPTIONS) as lake:
        tx = lake.begin_durable(timeout=600, title="multi-table load")
        ctx = multiprocessing.get_context("spawn")
        writers = [ctx.Process(target=append_in_transaction, args=(url, tx.id, t, 10 * (i + 1))) for i, t in enumerate(TABLES)]
        for proc in writers:
            proc.start()
        for proc in writers:
            proc.join(timeout=300)
            assert proc.exitcode == 0
        assert _counts(lake) == [0, 0, 0]  # staged in three processes, visible to no reader
        assert len(_staged_files(lake)) >= 3
        assert {lock.node for lock in lake.durable.manager.attach(tx.id).locks()} == set(TABLES)
        _run(commit_transaction, url, tx.id)
        assert _counts(lake) == [10, 20, 30]
        version = lake.version
        assert _counts(lake, version - 1) == [0, 0, 0]  # all three tables changed in one version
        assert tx.state == "committed"


def test_committer_killed_transaction_expires(url: str) -> None:
    with catalog.open(url, **LAKE_OPTIONS) as lake:
        # This process judges expiry on a wall clock it can move on (TransactionManager.clock,
        # the seam tests inject a clock through); the other processes are done or dead by then.
        clock = lake.durable.manager.clock = SkewedClock()
        tx = lake.begin_durable(timeout=8, title="doomed load")
        stop_pinging = threading.Event()

        def keep_alive() -> None:  # the coordinator pings while the others start up
            while not stop_pinging.wait(1.0):
                tx.ping()

        pinger = threading.Thread(target=keep_alive)
        pinger.start()
        try:
            ctx = multiprocessing.get_context("spawn")
            writers = [ctx.Process(target=append_in_transaction, args=(url, tx.id, t, 5)) for t in TABLES]
            for proc in writers:
                proc.start()
            for proc in writers:
                proc.join(timeout=300)
                assert proc.exitcode == 0
            ready = ctx.Queue()
            committer = ctx.Process(target=attach_and_hang, args=(url, tx.id, ready))
            committer.start()
            assert ready.get(timeout=120) == "attached"
        finally:
            stop_pinging.set()
            pinger.join()
        staged = _staged_files(lake)
        assert len(staged) >= 3
        committer.kill()  # by its PID: the process that would have committed dies
        committer.join(timeout=60)
        assert tx.state == "active"  # the last ping was less than 8 s ago
        clock.later(8.1)  # nobody pings it any more: its timeout passes
        assert tx.state == "expired"
        assert _counts(lake) == [0, 0, 0]
        report = lake.gc()  # default grace: staged files of an expired transaction go at once
        assert staged <= set(report.orphan_files)
        assert _staged_files(lake) == set()
        assert lake.durable.manager.run(lambda work: list(work.txn.scan(prefix=b"sys/txn/op/"))) == []
        assert lake.locks("sales.t1") == []
