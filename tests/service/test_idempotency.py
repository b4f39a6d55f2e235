"""Idempotency-Key: a repeated request commits once (service.idempotency)."""

from __future__ import annotations

import http.client
import json
import threading
import uuid

import pytest
from test_security import request

from kvclient import RemoteStore


def batch_body(*pairs: tuple[str, str]) -> bytes:
    ops = [{"op": "put", "key": key, "value": value} for key, value in pairs]
    return json.dumps({"ops": ops}).encode()


def test_repeated_batch_commits_once(server, remote_db: RemoteStore) -> None:
    key = uuid.uuid4().hex
    headers = {"Content-Type": "application/json", "Idempotency-Key": key}
    body = batch_body(("YQ==", "MQ=="))
    status, first_headers, first = request(server, "POST", "/kv/v1/batch", body, headers)
    assert status == 200 and "idempotent-replayed" not in first_headers
    version = remote_db.version
    status, again_headers, again = request(server, "POST", "/kv/v1/batch", body, headers)
    assert status == 200 and again_headers["idempotent-replayed"] == "true"
    assert json.loads(again)["seq"] == json.loads(first)["seq"]
    assert remote_db.version == version  # nothing committed the second time
    assert remote_db.get(b"a") == b"1"


def test_key_reused_for_a_different_request_is_422(server, remote_db: RemoteStore) -> None:
    headers = {"Content-Type": "application/json", "Idempotency-Key": uuid.uuid4().hex}
    assert request(server, "POST", "/kv/v1/batch", batch_body(("YQ==", "MQ==")), headers)[0] == 200
    status, _, raw = request(server, "POST", "/kv/v1/batch", batch_body(("YQ==", "Mg==")), headers)
    assert status == 422 and json.loads(raw)["error"]["type"] == "IdempotencyKeyReusedError"
    assert remote_db.get(b"a") == b"1"


def test_racing_duplicates_commit_once(server, remote_db: RemoteStore) -> None:
    remote_db.put(b"n", b"0")
    key = uuid.uuid4().hex
    seqs: list[int] = []
    errors: list[BaseException] = []

    def increment_once() -> None:
        # Each racer runs the same logical transaction under the same key.
        try:
            txn = remote_db.begin()
            value = int(txn.get(b"n"))
            txn.put(b"n", b"%d" % (value + 1))
            seqs.append(txn.commit(idempotency_key=key))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=increment_once) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert remote_db.get(b"n") == b"1"
    # Every racer either got the one commit's seq, or a conflict raised
    # before the winner's record was visible to it.
    assert seqs and len(set(seqs)) == 1
    assert all(type(exc).__name__ == "ConflictError" for exc in errors), errors


def test_commit_retry_after_the_transaction_is_gone(server, remote_db: RemoteStore) -> None:
    key = uuid.uuid4().hex
    txn = remote_db.begin()
    txn.put(b"t", b"1")
    seq = txn.commit(idempotency_key=key)
    # The answer was "lost": the client retries the commit of the finished id.
    status, headers, raw = request(server, "POST", f"/kv/v1/txns/{txn.id}/commit", headers={"Idempotency-Key": key})
    assert status == 200 and headers["idempotent-replayed"] == "true" and json.loads(raw)["seq"] == seq
    # Without the key, the same retry is a plain "already committed".
    status, _, raw = request(server, "POST", f"/kv/v1/txns/{txn.id}/commit")
    assert status == 410 and json.loads(raw)["error"]["type"] == "TransactionClosedError"


def test_raw_octet_stream_values(server, remote_db: RemoteStore) -> None:
    value = bytes(range(256)) * 3
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request("PUT", "/kv/v1/keys/cmF3?ttl=3600", body=value, headers={"Content-Type": "application/octet-stream"})
        assert conn.getresponse().read() and remote_db.get(b"raw") == value
        conn.request("GET", "/kv/v1/keys/cmF3", headers={"Accept": "application/octet-stream"})
        response = conn.getresponse()
        assert response.getheader("content-type") == "application/octet-stream" and response.read() == value
        conn.request("GET", "/kv/v1/keys/cmF3")
        answer = json.loads(conn.getresponse().read())
        assert answer == {"key": "cmF3", "value": __import__("base64").b64encode(value).decode(), "revision": answer["revision"]}
        conn.request("GET", "/kv/v1/keys/bm9uZQ")
        response = conn.getresponse()
        assert response.status == 404 and json.loads(response.read())["error"]["type"] == "NoSuchKeyError"
    finally:
        conn.close()


@pytest.mark.parametrize("isolation", ["snapshot", "serializable"])
def test_begin_reports_isolation_and_rejects_long_ttl(server, remote_db: RemoteStore, isolation) -> None:
    txn = remote_db.begin(isolation)
    assert txn.isolation == isolation and txn.start_seq >= 0
    txn.rollback()
    with pytest.raises(ValueError, match="ttl must be at most"):
        remote_db.begin(ttl=10 * 24 * 3600)



def test_duplicates_queued_on_the_record_lock_replay_the_first(tmp_path) -> None:
    """Duplicates that passed the record check before any of them committed
    queue on the record's key lock; the one behind the first must see the
    first's record (its transaction moves to the head once it holds the
    lock) and replay it, not commit the ops again."""
    import time

    import kvstore
    from kvstore.objstore.memory import MemoryStore
    from service import idempotency

    with kvstore.open(MemoryStore(f"memory://{uuid.uuid4().hex}"), poll_interval_s=0) as store:
        gate = store.begin()
        gate.get_for_update(idempotency.RECORD_PREFIX + b"dup")  # hold the record's lock (its key: prefix + idempotency key)
        results: list[tuple[int, bool]] = []
        batch = kvstore.WriteBatch().put(b"a", b"1")
        racers = [
            threading.Thread(target=lambda: results.append(idempotency.commit_batch(store, batch, "dup", "fp")))
            for _ in range(4)
        ]
        for racer in racers:
            racer.start()
        for _ in range(30_000):  # every racer checked the record and queued for its lock
            if store.stats()["key_lock_waiters"] == len(racers):
                break
            time.sleep(0.001)
        version = store.version
        gate.rollback()
        for racer in racers:
            racer.join(60)
        assert len({seq for seq, _ in results}) == 1
        assert sorted(replayed for _, replayed in results) == [False, True, True, True]
        assert store.version == version + 1


def test_racing_duplicate_batches_commit_once(server, remote_db: RemoteStore) -> None:
    """Duplicates of one batch race: the record's key lock queues them in the
    server, and each one behind the winner must see its record and replay it
    (the queued transaction reads the latest commit once it holds the lock)."""
    key = uuid.uuid4().hex
    headers = {"Content-Type": "application/json", "Idempotency-Key": key}
    body = batch_body(("Yg==", "MQ=="))
    version = remote_db.version
    results: list[tuple[int, dict[str, str], bytes]] = []

    def post() -> None:
        results.append(request(server, "POST", "/kv/v1/batch", body, headers))

    threads = [threading.Thread(target=post) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [status for status, _, _ in results] == [200] * 8
    assert len({json.loads(raw)["seq"] for _, _, raw in results}) == 1
    assert sum("idempotent-replayed" not in headers for _, headers, _ in results) == 1
    assert remote_db.version == version + 1
