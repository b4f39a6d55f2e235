"""Durable transactions and locks over HTTP (service.durable_api), against the
session server and, for interoperation, an embedded handle on the same lakehouse."""

from __future__ import annotations

import json
import time
import uuid

from test_security import request

BASE = "/kv/v1/durable"


def call(server, method: str, path: str, payload: dict | None = None) -> tuple[int, dict]:  # type: ignore[no-untyped-def]
    body = None if payload is None else json.dumps(payload).encode()
    status, _, raw = request(server, method, path, body, {"Content-Type": "application/json"})
    return status, (json.loads(raw) if raw else {})


def begin(server, **payload: object) -> str:  # type: ignore[no-untyped-def]
    status, record = call(server, "POST", BASE + "/txns", dict(payload))
    assert status == 201 and record["state"] == "active", record
    return str(record["id"])


def test_begin_ping_commit_abort_lifecycle(server) -> None:
    txid = begin(server, timeout=60, title="nightly")
    status, record = call(server, "GET", f"{BASE}/txns/{txid}")
    assert status == 200 and record["title"] == "nightly" and record["parent"] is None
    status, listed = call(server, "GET", BASE + "/txns")
    assert txid in [r["id"] for r in listed["transactions"]]
    status, pinged = call(server, "POST", f"{BASE}/txns/{txid}/ping", {})
    assert status == 200 and pinged["last_ping_ms"] >= record["last_ping_ms"]
    child = begin(server, parent=txid)
    status, body = call(server, "POST", f"{BASE}/txns/{txid}/commit")
    assert status == 409 and body["error"]["type"] == "TransactionStateError"  # a child is open
    assert call(server, "POST", f"{BASE}/txns/{child}/commit")[1]["state"] == "committed"
    assert call(server, "POST", f"{BASE}/txns/{txid}/commit")[1]["state"] == "committed"
    status, body = call(server, "POST", f"{BASE}/txns/{txid}/abort")
    assert status == 409 and body["error"]["type"] == "TransactionStateError"  # already committed
    other = begin(server)
    assert call(server, "POST", f"{BASE}/txns/{other}/abort")[1]["state"] == "aborted"


def test_exclusive_locks_conflict_queue_and_hand_over(server) -> None:
    node = f"locks_{uuid.uuid4().hex[:8]}.t"
    holder, waiter = begin(server), begin(server)
    status, lock = call(server, "POST", f"{BASE}/txns/{holder}/locks", {"node": node, "mode": "exclusive"})
    assert status == 201 and lock["state"] == "acquired"
    status, body = call(server, "POST", f"{BASE}/txns/{waiter}/locks", {"node": node, "mode": "shared"})
    assert status == 409 and body["error"]["type"] == "LockConflictError" and holder in body["error"]["message"]
    status, pending = call(
        server, "POST", f"{BASE}/txns/{waiter}/locks", {"node": node, "mode": "shared", "waitable": True, "wait_s": 0.2}
    )
    assert status == 201 and pending["state"] == "pending"
    status, queue = call(server, "GET", f"{BASE}/locks?node={node}")
    assert [(lk["txn"], lk["state"]) for lk in queue["locks"]] == [(holder, "acquired"), (waiter, "pending")]
    assert call(server, "POST", f"{BASE}/txns/{holder}/commit")[0] == 200  # releases its locks
    status, queue = call(server, "GET", f"{BASE}/locks?node={node}")
    assert [(lk["txn"], lk["state"]) for lk in queue["locks"]] == [(waiter, "acquired")]
    assert call(server, "DELETE", f"{BASE}/txns/{waiter}/locks?node={node}")[0] == 200
    assert call(server, "GET", f"{BASE}/txns/{waiter}/locks")[1]["locks"] == []
    call(server, "POST", f"{BASE}/txns/{waiter}/abort")


def test_expired_transaction_is_410(server) -> None:
    status, record = call(server, "POST", BASE + "/txns", {"timeout": 0.05})
    assert status == 201 and record["state"] == "active", record
    txid = record["id"]
    # The server judges expiry by its wall clock, this machine's: wait out the
    # deadline it recorded (50 ms), not a fixed sleep with a margin.
    deadline_ms = record["last_ping_ms"] + record["timeout_ms"]
    while time.time() * 1000 <= deadline_ms:
        time.sleep(0.01)
    status, body = call(server, "POST", f"{BASE}/txns/{txid}/ping", {})
    assert status == 410 and body["error"]["type"] == "TransactionExpiredError"


def test_bad_and_unknown_ids(server) -> None:
    status, body = call(server, "GET", f"{BASE}/txns/not-an-id")
    assert status == 400 and "32 lowercase hex" in body["error"]["message"]
    status, body = call(server, "GET", f"{BASE}/txns/{'0' * 32}")
    assert status == 404 and body["error"]["type"] == "NoSuchTransactionError"
    txid = begin(server)
    status, body = call(server, "POST", f"{BASE}/txns/{txid}/locks", {"node": "a/b"})
    assert status == 400
    status, body = call(server, "POST", f"{BASE}/txns/{txid}/locks", {"node": "x", "wait_s": 3600})
    assert status == 400 and "wait_s" in body["error"]["message"]
    call(server, "POST", f"{BASE}/txns/{txid}/abort")
