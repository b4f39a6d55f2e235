"""Leader election built only from leases and compare-and-set, with candidates killed at random (issue 23)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import kvstore
from maintenance_util import QUIET

WORKER = Path(__file__).with_name("election_worker.py")


def current_leader(db: kvstore.Store) -> bytes | None:
    db.refresh()
    return db.get(b"leader")


def wait_for_leader(db: kvstore.Store, not_in: set[bytes], deadline_s: float = 60) -> bytes:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        leader = current_leader(db)
        if leader is not None and leader not in not_in:
            return leader
        time.sleep(0.05)
    raise AssertionError(f"no new leader within {deadline_s} s")


def elect_and_kill(tmp_path: Path, candidate_urls: list[str], db: Any) -> None:
    """Four candidates (on ``candidate_urls`` in turn) campaign; the leader is
    SIGKILLed at a random moment, twice; ``db`` (embedded or remote) observes.
    Then checks the key's history: at most one leader at any revision."""
    stop = tmp_path / "stop"
    start = db.refresh() + 1
    names = [f"node{i}".encode() for i in range(4)]
    procs = {
        name: subprocess.Popen([
            sys.executable, str(WORKER), candidate_urls[i % len(candidate_urls)], name.decode(),
            str(tmp_path / f"{name.decode()}.log"), str(stop),
        ])
        for i, name in enumerate(names)
    }
    killed: set[bytes] = set()
    try:
        rng = random.Random(23)
        for _ in range(2):
            leader = wait_for_leader(db, killed)
            time.sleep(rng.uniform(0.1, 0.6))  # some renewals, then a crash at a random moment
            leader = current_leader(db) or leader
            if leader in killed:
                continue
            os.kill(procs[leader].pid, signal.SIGKILL)
            procs[leader].wait()
            killed.add(leader)
        wait_for_leader(db, killed)  # a survivor took over
    finally:
        stop.write_text("stop")
        for proc in procs.values():
            if proc.poll() is None:
                assert proc.wait(timeout=60) == 0
    end = db.refresh()
    with db.watch(b"leader", start=start, end=end) as watch:
        events = [e for e in watch if e.key == b"leader"]

    # The key's history: a new holder's put only ever follows the old holder's key vanishing.
    holder: bytes | None = None
    holders_seen = []
    for event in events:
        if event.kind == "put":
            assert holder in (None, event.value), f"{event.value!r} took over from live {holder!r} at {event.seq}"
            holder = event.value
            if not holders_seen or holders_seen[-1] != holder:
                holders_seen.append(holder)
        else:
            holder = None
    assert len(set(holders_seen)) >= 3 and len(killed) == 2  # two leaders killed, each replaced
    # Every revision a node acted as leader at was a put of its own name at that revision.
    puts = {e.seq: e.value for e in events if e.kind == "put"}
    terms = []
    for name in names:
        led = [int(line) for line in (tmp_path / f"{name.decode()}.log").read_text().split()]
        assert all(puts.get(revision) == name for revision in led), name
        terms.append(len(led))
    assert max(terms) >= 3  # leaders renewed their leadership, not just won it once


@pytest.mark.timeout(300)
def test_at_most_one_leader_at_any_revision_while_leaders_are_killed(tmp_path: Path) -> None:
    url = str(tmp_path / "store")
    with kvstore.open(url, **QUIET) as db:
        elect_and_kill(tmp_path, [url], db)
