"""Server crash and shutdown: kill -9 during 16 concurrent committing clients,
and SIGTERM finishing in-flight commits.

Each client runs N logical transactions, one after another: read its counter,
write counter + 1 and one item key, commit under an Idempotency-Key naming
(client, n). On any failure (connection refused/reset while the server is
down, a transaction the restarted server no longer knows) it reruns the same
logical transaction under the same key until one answer is 2xx.

Checked on the store left behind by the kill, before the restart:
* every commit that got a 2xx is there;
* nothing is half-applied: per client, counter == number of items.
Checked at the end: counter == N for every client (each logical transaction
committed exactly once although some were sent more than once).
"""

from __future__ import annotations

import threading
import time

import pytest

import kvstore
from kvstore.errors import ConflictError, ObjectStoreError, TransactionExpiredError
from service.testing import ServerProcess

CLIENTS = 16
TXNS_PER_CLIENT = 12
# Give up (and fail the test) if the clients have not finished by then.
DEADLINE_S = 240.0


def open_embedded(path: str) -> kvstore.Store:
    return kvstore.open(path, create=False, poll_interval_s=0, background_maintenance=False)


def client_state(db: kvstore.Store, client: int) -> tuple[int, set[int]]:
    counter = db.get(b"kv/ctr/%d" % client)
    items = {int(k.rsplit(b"/", 1)[1]) for k, _ in db.scan(prefix=b"kv/item/%d/" % client)}
    return int(counter or 0), items


@pytest.mark.slow
def test_kill_9_during_concurrent_commits_then_restart(tmp_path) -> None:
    store_path = str(tmp_path / "store")
    server = ServerProcess(store_path, tmp_path / "server.log").start()
    acked: list[set[int]] = [set() for _ in range(CLIENTS)]
    sends: list[int] = [0] * CLIENTS
    failures: list[BaseException] = []
    stop_at = time.monotonic() + DEADLINE_S

    def client(c: int) -> None:
        db = kvstore.open(server.url, retry_s=0.5, timeout=30)
        try:
            for n in range(TXNS_PER_CLIENT):
                while True:
                    if time.monotonic() > stop_at:
                        raise TimeoutError(f"client {c} stuck at transaction {n}")
                    sends[c] += 1
                    try:
                        txn = db.begin()
                        counter = int(txn.get(b"ctr/%d" % c) or b"0")
                        txn.put(b"ctr/%d" % c, b"%d" % (counter + 1))
                        txn.put(b"item/%d/%d" % (c, n), b"x")
                        txn.commit(idempotency_key=f"client{c}-txn{n}")
                    except (ObjectStoreError, TransactionExpiredError, ConflictError):
                        time.sleep(0.05)
                        continue
                    acked[c].add(n)
                    break
        except BaseException as exc:  # surfaced by the assertion below
            failures.append(exc)
        finally:
            db.close()

    threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for thread in threads:
        thread.start()
    while sum(len(a) for a in acked) < CLIENTS * 3 and time.monotonic() < stop_at:
        time.sleep(0.01)
    server.kill()  # SIGKILL mid-traffic: commits in flight
    acked_at_kill = [set(a) for a in acked]
    assert sum(len(a) for a in acked_at_kill) < CLIENTS * TXNS_PER_CLIENT, "killed too late to test anything"

    with open_embedded(store_path) as db:
        for c in range(CLIENTS):
            counter, items = client_state(db, c)
            assert acked_at_kill[c] <= items, f"client {c}: acknowledged commits lost"
            assert counter == len(items), f"client {c}: half-applied commit (counter {counter}, items {items})"

    server.start()  # same port: the clients' retries reach the new process
    try:
        for thread in threads:
            thread.join(DEADLINE_S)
        assert not failures, failures
        assert all(len(a) == TXNS_PER_CLIENT for a in acked)
    finally:
        assert server.stop() == 0
    assert sum(sends) > CLIENTS * TXNS_PER_CLIENT, "no request was retried: the kill hit nothing in flight"
    with open_embedded(store_path) as db:
        for c in range(CLIENTS):
            counter, items = client_state(db, c)
            assert items == set(range(TXNS_PER_CLIENT))
            assert counter == TXNS_PER_CLIENT, f"client {c}: counter {counter}: a retried commit applied twice"


@pytest.mark.slow
def test_sigterm_finishes_in_flight_commits(tmp_path) -> None:
    store_path = str(tmp_path / "store")
    server = ServerProcess(store_path, tmp_path / "server.log").start()
    acked: list[bytes] = []
    lock = threading.Lock()
    running = threading.Event()
    running.set()

    def writer(w: int) -> None:
        db = kvstore.open(server.url, retry_s=0)
        try:
            for i in range(100_000):
                key = b"w%d-%d" % (w, i)
                try:
                    db.put(key, b"v")
                except ObjectStoreError:
                    return  # the server is gone: stop
                with lock:
                    acked.append(key)
        finally:
            db.close()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    while len(acked) < 50:
        time.sleep(0.01)
    assert server.stop() == 0  # SIGTERM: graceful, store closed cleanly
    for thread in threads:
        thread.join(60)
    with open_embedded(store_path) as db:
        missing = [key for key in acked if db.get(b"kv/" + key) != b"v"]
    assert not missing, f"{len(missing)} acknowledged puts lost"
    assert "Finished server process" in server.log_tail(20_000)
