"""Issue 23's consistency claims across two `lakekv serve` processes on one store
(and their client processes): linearizable reads, compare-and-set races, lease
expiry, watches across a server restart, and leader election."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from http_client import b64, call, path_key
from test_leader_election import elect_and_kill

import kvstore
from kvclient import RemoteStore
from service.testing import ServerProcess

CAS_CLIENT = Path(__file__).with_name("cas_client.py")


@contextlib.contextmanager
def two_servers(root: Path) -> Iterator[list[ServerProcess]]:
    """``[A, B]``, two servers on a new local-directory store under ``root``; whatever
    servers the list holds at the end (a test may replace one) are stopped."""
    store = str(root / "store")
    kvstore.open(store).close()
    running: list[ServerProcess] = []
    try:
        for name in ("a", "b"):
            running.append(ServerProcess(store, root / f"{name}.log").start())
        yield running
    finally:
        for server in reversed(running):
            server.stop()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Servers A and B on one local-directory store."""
    with two_servers(tmp_path_factory.mktemp("two-servers")) as (a, b):
        yield a, b


def test_a_thousand_writes_on_a_are_each_read_at_once_on_b(servers: tuple[ServerProcess, ServerProcess]) -> None:
    a, b = servers
    key = path_key(b"pair-" + uuid.uuid4().hex.encode())
    misses = 0
    for i in range(1000):
        assert call(a, "PUT", f"/kv/v1/keys/{key}", {"value": b64(b"%d" % i)})[0] == 200
        status, _, got = call(b, "GET", f"/kv/v1/keys/{key}")
        misses += status != 200 or got["value"] != b64(b"%d" % i)
    assert misses == 0


def test_remote_clients_read_on_b_the_revision_a_acknowledged(servers: tuple[ServerProcess, ServerProcess]) -> None:
    a, b = servers
    with kvstore.open(a.url) as on_a, kvstore.open(b.url) as on_b:
        key = b"rev-" + uuid.uuid4().hex.encode()
        for i in range(200):
            seq = on_a.put(key, b"%d" % i)
            assert on_b.get_with_revision(key) == (b"%d" % i, seq)
            assert [v for _, v in on_b.scan(prefix=key)] == [b"%d" % i]
        # A serializable read is B's own view: never newer than the linearizable answer.
        assert on_b.get(key, consistency="serializable") in [b"%d" % i for i in range(200)]


def test_an_iceberg_namespace_made_on_a_is_seen_on_b_at_once(servers: tuple[ServerProcess, ServerProcess]) -> None:
    a, b = servers
    for i in range(20):
        name = f"ns_{uuid.uuid4().hex[:8]}_{i}"
        assert call(a, "POST", "/v1/namespaces", {"namespace": [name], "properties": {}})[0] == 200
        assert call(b, "GET", f"/v1/namespaces/{name}")[0] == 200


def _run_cas_clients(servers: tuple[ServerProcess, ServerProcess], tmp_path: Path, rounds: int, increments: int) -> list[dict]:
    outs = [tmp_path / f"client{i}.json" for i in range(4)]
    procs = [
        subprocess.Popen([sys.executable, str(CAS_CLIENT), servers[i % 2].url, f"c{i}", str(rounds), str(increments),
                          str(out)])
        for i, out in enumerate(outs)
    ]
    for proc in procs:
        assert proc.wait(timeout=300) == 0
    return [json.loads(out.read_text()) for out in outs]


def test_compare_and_set_races_across_servers_have_exactly_one_winner(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Its own store: the clients' keys (round-N, counter) must start absent.
    with two_servers(tmp_path_factory.mktemp("cas-servers")) as (a, b):
        results = _run_cas_clients((a, b), tmp_path, rounds=30, increments=15)
        with kvstore.open(a.url) as db:
            for r in range(30):
                winners = [i for i, result in enumerate(results) if r in result["won"]]
                assert len(winners) == 1, (r, winners)
                assert db.get(b"round-%d" % r) == b"c%d" % winners[0]
            committed = [seq for result in results for seq in result["increments"]]
            value, revision = db.get_with_revision(b"counter")
        assert value == b"%d" % (4 * 15)  # no increment lost
        assert len(set(committed)) == len(committed) == 60 and max(committed) == revision


def test_lease_expiry_is_seen_by_readers_on_both_servers(servers: tuple[ServerProcess, ServerProcess]) -> None:
    a, b = servers
    key = b"leased-" + uuid.uuid4().hex.encode()
    with kvstore.open(a.url) as on_a, kvstore.open(b.url) as on_b:
        lease = on_a.grant_lease(1.0)
        on_a.put(key, b"v", lease=lease.id)
        start = on_b.refresh()
        assert on_b.get(key) == b"v" and on_b.lease(lease.id).keys() == [key]
        with on_b.watch(key, start=start) as watch:
            events = []
            for event in watch:
                events.append(event)
                if event.kind == "delete":  # a server's lease reaper revoked the expired lease
                    break
        assert [e.kind for e in events] == ["put", "delete"]
        assert on_a.get(key) is None and on_b.get(key) is None
        assert call(a, "GET", f"/kv/v1/keys/{path_key(key)}")[0] == 404
        assert call(b, "GET", f"/kv/v1/keys/{path_key(key)}")[0] == 404


def test_a_watch_on_b_misses_nothing_across_its_restart(tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.mktemp("watch-restart")
    with two_servers(root) as running:
        a, b = running
        prefix = b"w/"
        with kvstore.open(a.url) as writer, kvstore.open(b.url, retry_s=120.0) as reader:
            start = writer.refresh() + 1
            watch = reader.watch(prefix, start=start)
            live = reader.watch(prefix)  # no start: resumes from the version its stream began at
            seen: list = []
            seen_live: list = []

            def follow(source: Any, into: list) -> None:
                for event in source:
                    into.append(event)

            follower = threading.Thread(target=follow, args=(watch, seen))
            live_follower = threading.Thread(target=follow, args=(live, seen_live))
            follower.start()
            live_follower.start()
            while live.next_version is None:  # its stream is open (it said where it starts)
                time.sleep(0.01)
            written = []
            for i in range(150):
                written.append(writer.put(prefix + b"%03d" % i, b"%d" % i))
                if i == 50:
                    b.kill()  # the watch's server dies mid-stream...
                if i == 100:
                    b = running[1] = ServerProcess(b.store_url, root / "b2.log", port=b.port).start()  # ...comes back
            end = writer.refresh()
            deadline = time.monotonic() + 120
            while (len(seen) < len(written) or len(seen_live) < len(written)) and time.monotonic() < deadline:
                time.sleep(0.05)
            watch.close()
            live.close()
            follower.join(timeout=30)
            live_follower.join(timeout=30)
        assert [e.seq for e in seen] == written  # in order, none missed, none repeated
        assert [e.seq for e in seen_live] == written
        assert [e.key for e in seen] == [prefix + b"%03d" % i for i in range(150)]
        assert all(e.version <= end for e in seen)


@pytest.mark.timeout(300)
def test_leader_election_across_two_servers_while_leaders_are_killed(
    servers: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    a, b = servers
    with kvstore.open(a.url) as db:
        assert isinstance(db, RemoteStore)
        db.delete(b"leader")
        elect_and_kill(tmp_path, [a.url, b.url], db)


def test_an_iceberg_table_made_on_a_is_loaded_and_committed_on_b_at_once(
    servers: tuple[ServerProcess, ServerProcess],
) -> None:
    import pyarrow as pa
    from pyiceberg.catalog.rest import RestCatalog

    a, b = servers
    on_a, on_b = RestCatalog("a", uri=a.url), RestCatalog("b", uri=b.url)
    namespace = f"ice_{uuid.uuid4().hex[:8]}"
    on_a.create_namespace(namespace)
    for i in range(10):
        on_a.create_table(f"{namespace}.t{i}", schema=pa.schema([pa.field("id", pa.int64())]))
        table = on_b.load_table(f"{namespace}.t{i}")
        table.transaction().set_properties(seen_on="b").commit_transaction()  # asserts the table's uuid
        assert on_a.load_table(f"{namespace}.t{i}").properties["seen_on"] == "b"
