"""The metadata-store HTTP API of one server: revisions and ETags, If-Match /
If-None-Match, ?version=, ?consistency=, POST /kv/v1/txn and the lease routes
(service.kv_api, service.kv_txn, service.kv_leases)."""

from __future__ import annotations

import time
import uuid

import pytest
from http_client import b64, call, path_key

import kvstore
from kvstore import LeaseNotFoundError, PreconditionFailedError, WriteBatch
from service.testing import ServerProcess


def _key() -> bytes:
    return b"meta-" + uuid.uuid4().hex.encode()


def test_every_key_answer_carries_its_revision_and_etag(server: ServerProcess) -> None:
    key = _key()
    status, headers, body = call(server, "PUT", f"/kv/v1/keys/{path_key(key)}", {"value": b64(b"v1")})
    assert status == 200 and body["revision"] == body["seq"] and headers["etag"] == f'"{body["seq"]}"'
    status, headers, got = call(server, "GET", f"/kv/v1/keys/{path_key(key)}")
    assert status == 200 and got["revision"] == body["seq"] and headers["etag"] == f'"{body["seq"]}"'
    with kvstore.open(server.url) as db:
        assert db.get_with_revision(key) == (b"v1", body["seq"])
        assert db.get_with_revision(_key()) == (None, None)


def test_if_match_and_if_none_match_are_compare_and_set_answered_412(server: ServerProcess) -> None:
    key = _key()
    path = f"/kv/v1/keys/{path_key(key)}"
    status, _, first = call(server, "PUT", path, {"value": b64(b"a")}, {"If-None-Match": "*"})
    assert status == 200
    status, _, error = call(server, "PUT", path, {"value": b64(b"b")}, {"If-None-Match": "*"})
    assert status == 412 and error["error"]["type"] == "PreconditionFailedError"
    assert "kv/" not in error["error"]["message"]  # the client's key, not the stored one
    status, _, second = call(server, "PUT", path, {"value": b64(b"c")}, {"If-Match": f'"{first["revision"]}"'})
    assert status == 200
    status, _, _ = call(server, "PUT", path, {"value": b64(b"d")}, {"If-Match": f'"{first["revision"]}"'})
    assert status == 412
    status, _, _ = call(server, "DELETE", path, headers={"If-Match": f'"{first["revision"]}"'})
    assert status == 412
    assert call(server, "GET", path)[2]["revision"] == second["revision"]
    status, _, _ = call(server, "DELETE", path, headers={"If-Match": str(second["revision"])})
    assert status == 200 and call(server, "GET", path)[0] == 404


@pytest.mark.parametrize("headers", [
    {"If-Match": "abc"}, {"If-Match": '"0"'}, {"If-Match": "*"}, {"If-None-Match": '"3"'},
    {"If-Match": '"3"', "If-None-Match": "*"},
])
def test_a_malformed_condition_is_a_400_and_writes_nothing(server: ServerProcess, headers: dict[str, str]) -> None:
    key = _key()
    status, _, error = call(server, "PUT", f"/kv/v1/keys/{path_key(key)}", {"value": b64(b"x")}, headers)
    assert status == 400 and error["error"]["type"] == "ValueError"
    assert call(server, "GET", f"/kv/v1/keys/{path_key(key)}")[0] == 404


def test_version_reads_a_retained_version_and_consistency_is_checked(server: ServerProcess) -> None:
    key = _key()
    path = f"/kv/v1/keys/{path_key(key)}"
    call(server, "PUT", path, {"value": b64(b"old")})
    old_version = call(server, "GET", "/kv/v1/info")[2]["version"]
    call(server, "PUT", path, {"value": b64(b"new")})
    status, _, got = call(server, "GET", f"{path}?version={old_version}")
    assert status == 200 and got["value"] == b64(b"old")
    assert call(server, "GET", f"{path}?version=999999999")[0] == 404
    assert call(server, "GET", f"{path}?consistency=serializable")[2]["value"] == b64(b"new")
    for bad in ("version=-1", "version=x", "consistency=strong", f"version={old_version}&consistency=serializable"):
        status, _, error = call(server, "GET", f"{path}?{bad}")
        assert status == 400, bad


def test_a_txn_runs_one_branch_atomically_and_answers_its_reads(server: ServerProcess) -> None:
    a, b = _key(), _key()
    txn = {
        "compare": [{"key": b64(a), "target": "revision", "op": "==", "revision": 0}],  # a has no value
        "success": [{"op": "put", "key": b64(a), "value": b64(b"1")}, {"op": "put", "key": b64(b), "value": b64(b"2")}],
        "failure": [{"op": "get", "key": b64(a)}],
    }
    status, headers, first = call(server, "POST", "/kv/v1/txn", txn)
    assert status == 200 and first["succeeded"] is True and first["responses"] == [{}, {}]
    with kvstore.open(server.url) as db:
        assert db.get_with_revision(a) == (b"1", first["revision"]) == (b"1", db.get_with_revision(b)[1])
    status, _, second = call(server, "POST", "/kv/v1/txn", txn)
    assert second["succeeded"] is False
    assert second["responses"] == [{"key": b64(a), "value": b64(b"1"), "revision": first["revision"]}]
    value_txn = {
        "compare": [{"key": b64(a), "target": "value", "op": ">", "value": b64(b"0")},
                    {"key": b64(_key()), "target": "value", "op": "!=", "value": b64(b"z")}],  # absent: false
        "success": [{"op": "delete", "key": b64(a)}],
        "failure": [{"op": "delete", "key": b64(b)}],
    }
    assert call(server, "POST", "/kv/v1/txn", value_txn)[2]["succeeded"] is False
    assert call(server, "GET", f"/kv/v1/keys/{path_key(b)}")[0] == 404
    assert call(server, "GET", f"/kv/v1/keys/{path_key(a)}")[0] == 200


def test_a_retried_txn_with_an_idempotency_key_is_answered_from_its_record(server: ServerProcess) -> None:
    counter = _key()
    txn = {"compare": [{"key": b64(counter), "target": "revision", "op": "==", "revision": 0}],
           "success": [{"op": "put", "key": b64(counter), "value": b64(b"1")}]}
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    _, _, first = call(server, "POST", "/kv/v1/txn", txn, headers)
    status, replay_headers, again = call(server, "POST", "/kv/v1/txn", txn, headers)
    assert status == 200 and again == first and first["succeeded"] is True
    assert replay_headers["idempotent-replayed"] == "true"


@pytest.mark.parametrize("body", [
    {"compare": [{"key": b64(b"k"), "target": "version", "revision": 1}]},
    {"compare": [{"key": b64(b"k"), "target": "revision", "revision": -1}]},
    {"compare": [{"key": b64(b"k"), "target": "revision", "op": "~", "revision": 1}]},
    {"compare": [], "success": [{"op": "put", "key": b64(b"k")}]},
    {"compare": [], "success": [{"op": "put", "key": b64(b"k"), "value": b64(b"v"), "ttl": 5, "lease": "0" * 32}]},
    {"compare": [], "success": [{"op": "get", "key": b64(b"k"), "value": b64(b"v")}]},
    {"compare": [], "success": [{"op": "range", "key": b64(b"k")}]},
    {"compare": [], "then": []},
    {"compare": {}},
])
def test_a_malformed_txn_is_a_400_naming_the_field_and_changes_nothing(server: ServerProcess, body: dict) -> None:
    before = call(server, "GET", "/kv/v1/info")[2]["seq"]
    status, _, error = call(server, "POST", "/kv/v1/txn", body)
    assert status == 400 and error["error"]["type"] in ("ValueError", "TypeError"), error
    assert call(server, "GET", "/kv/v1/info")[2]["seq"] == before


def test_leases_over_http_and_through_the_remote_client(server: ServerProcess) -> None:
    with kvstore.open(server.url) as db:
        lease = db.grant_lease(1.0)
        key, other = _key(), _key()
        db.put(key, b"held", lease=lease.id)
        db.write(WriteBatch().put(other, b"too", lease=lease.id, if_absent=True))
        assert sorted(lease.keys()) == sorted([key, other])
        assert db.lease(lease.id).ttl == 1.0
        assert type(lease.id) is int  # an int64, as etcd's, in JSON and in paths
        assert lease.id in [found.id for found in db.leases()]  # GET /kv/v1/leases
        assert 0 <= lease.remaining() <= 1.0  # read without extending it
        assert 0.5 < lease.keepalive() <= 1.0
        lease.revoke()
        assert db.get(key) is None and db.get(other) is None
        lease.revoke()  # already gone: a no-op, as embedded
        with pytest.raises(LeaseNotFoundError):
            lease.keepalive()
        with pytest.raises(LeaseNotFoundError):
            db.put(key, b"x", lease=lease.id)
        assert db.get(key) is None
        # The server judges expiry by its wall clock, this machine's: the lease
        # expires within ttl of its grant returning, whatever the request latency.
        granting = time.time()
        short = db.grant_lease(0.5)
        granted = time.time()
        db.put(key, b"short", lease=short.id)
        value = db.get(key)
        if time.time() < granting + 0.5:  # read before the earliest moment it can expire
            assert value == b"short"
        while time.time() <= granted + 0.5:  # wait out the lease (no keepalive)
            time.sleep(0.02)
        assert db.get(key) is None and db.get_with_revision(key) == (None, None)
    for bad in ({"ttl": 0}, {"ttl": "5"}, {"ttl": 5, "keys": []}, {}):
        assert call(server, "POST", "/kv/v1/leases", bad)[0] == 400, bad
    assert call(server, "GET", "/kv/v1/leases/not-a-lease")[0] == 400
    assert call(server, "POST", f"/kv/v1/leases/{'0' * 32}/keepalive")[0] == 404


def test_a_keepalive_over_http_rewrites_no_key(server: ServerProcess) -> None:
    with kvstore.open(server.url) as db:
        lease = db.grant_lease(30)
        key = _key()
        db.put(key, b"held", lease=lease.id)
        held = db.get_with_revision(key)
        start = db.seq + 1
        assert lease.keepalive() > 29  # POST /kv/v1/leases/{id}/keepalive
        assert db.get_with_revision(key) == held  # no new revision
        lease.revoke()
        watch = db.watch(key, start_revision=start)
        first = next(iter(watch))  # the revoke's delete, with no put before it
        watch.close()
        assert (first.key, first.kind) == (key, "delete")


def test_remote_compare_and_set_raises_the_embedded_error(server: ServerProcess) -> None:
    with kvstore.open(server.url) as db:
        key = _key()
        seq = db.put(key, b"1")
        with pytest.raises(PreconditionFailedError):
            db.write(WriteBatch().put(key, b"2", if_seq=seq + 1000))
        with pytest.raises(PreconditionFailedError):
            db.write(WriteBatch().delete(key, if_seq=seq + 1000))
        assert db.write(WriteBatch().put(key, b"3", if_seq=seq)) > seq
        assert db.get(key) == b"3"
        with pytest.raises(ValueError, match="consistency"):
            db.get(key, consistency="strong")
