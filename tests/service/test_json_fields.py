"""A JSON body field the endpoint does not take is a 400 naming it, and nothing is written
(service.codec.read_json, used by kv_api, kv_leases and durable_api).

A typo used to be ignored where the body is read with ``.get``:
``PUT /kv/v1/keys/k {"value": "eA==", "tll": 1}`` answered 200 and wrote a
key that never expires, while ``/kv/v1/batch`` ops and ``/kv/v1/txn``
refused the same typo.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from http_client import b64, call, path_key
from service.testing import ServerProcess

DURABLE = "/kv/v1/durable"


def _refused(server: ServerProcess, method: str, path: str, body: dict, field: str) -> None:
    status, _, answer = call(server, method, path, body)
    assert status == 400, answer
    assert answer["error"]["type"] == "ValueError" and repr(field) in answer["error"]["message"], answer


def _key() -> bytes:
    return b"json-fields/" + uuid.uuid4().hex.encode()


def test_a_put_with_a_typo_in_its_json_body_writes_nothing(server: ServerProcess) -> None:
    key = path_key(_key())
    _refused(server, "PUT", f"/kv/v1/keys/{key}", {"value": b64(b"x"), "tll": 1}, "tll")
    assert call(server, "GET", f"/kv/v1/keys/{key}")[0] == 404
    # The same body spelled right is taken, ttl and all.
    status, _, answer = call(server, "PUT", f"/kv/v1/keys/{key}", {"value": b64(b"x"), "ttl": 3600})
    assert status == 200, answer


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.text(min_size=1, max_size=12).filter(lambda name: name not in {"value", "ttl", "lease"}))
def test_any_field_a_put_does_not_take_is_refused(server: ServerProcess, field: str) -> None:
    key = path_key(_key())
    _refused(server, "PUT", f"/kv/v1/keys/{key}", {"value": b64(b"x"), field: 1}, field)
    assert call(server, "GET", f"/kv/v1/keys/{key}")[0] == 404


def test_a_batch_with_an_unknown_top_level_field_writes_nothing(server: ServerProcess) -> None:
    key = _key()
    ops = [{"op": "put", "key": b64(key), "value": b64(b"x")}]
    _refused(server, "POST", "/kv/v1/batch", {"ops": ops, "ttl": 1}, "ttl")
    assert call(server, "GET", f"/kv/v1/keys/{path_key(key)}")[0] == 404


def test_interactive_transaction_bodies_refuse_unknown_fields(server: ServerProcess) -> None:
    _refused(server, "POST", "/kv/v1/txns", {"isolation": "snapshot", "tll": 60}, "tll")
    status, _, txn = call(server, "POST", "/kv/v1/txns", {"isolation": "snapshot"})
    assert status == 201, txn
    key = path_key(_key())
    _refused(server, "PUT", f"/kv/v1/txns/{txn['id']}/keys/{key}", {"value": b64(b"x"), "tll": 1}, "tll")
    assert call(server, "POST", f"/kv/v1/txns/{txn['id']}/commit")[0] == 200
    assert call(server, "GET", f"/kv/v1/keys/{key}")[0] == 404  # the refused put was not buffered


def test_a_lease_grant_refuses_unknown_fields(server: ServerProcess) -> None:
    _refused(server, "POST", "/kv/v1/leases", {"ttl": 5, "keys": []}, "keys")


def test_durable_transaction_bodies_refuse_unknown_fields(server: ServerProcess) -> None:
    title = uuid.uuid4().hex
    _refused(server, "POST", DURABLE + "/txns", {"title": title, "timout": 60}, "timout")
    listed = call(server, "GET", DURABLE + "/txns")[2]["transactions"]
    assert title not in [record["title"] for record in listed]  # nothing begun
    status, _, record = call(server, "POST", DURABLE + "/txns", {"title": title})
    assert status == 201, record
    txid = record["id"]
    _refused(server, "POST", f"{DURABLE}/txns/{txid}/ping", {"ancestor": True}, "ancestor")
    assert call(server, "GET", f"{DURABLE}/txns/{txid}")[2]["last_ping_ms"] == record["last_ping_ms"]
    node = f"fields_{uuid.uuid4().hex[:8]}.t"
    _refused(server, "POST", f"{DURABLE}/txns/{txid}/locks", {"node": node, "mode": "shared", "wiat_s": 1}, "wiat_s")
    assert call(server, "GET", f"{DURABLE}/locks?node={node}")[2]["locks"] == []  # nothing locked
    assert call(server, "POST", f"{DURABLE}/txns/{txid}/abort")[0] == 200


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/kv/v1/batch", {"ops": [{"op": "put", "key": "a2s=", "value": "eA==", "tll": 1}]}),
        ("/kv/v1/txn", {"compare": [], "success": [], "failure": [], "tll": 1}),
    ],
)
def test_the_endpoints_that_already_refused_typos_still_do(server: ServerProcess, path: str, body: dict) -> None:
    _refused(server, "POST", path, body, "tll")


def test_a_body_sent_to_an_endpoint_that_takes_none_is_refused_not_ignored(server: ServerProcess) -> None:
    status, _, lease = call(server, "POST", "/kv/v1/leases", {"ttl": 30})
    assert status == 201, lease
    _refused(server, "POST", f"/kv/v1/leases/{lease['id']}/keepalive", {"ttl": 3600}, "ttl")
    _refused(server, "POST", "/kv/v1/refresh", {"consistency": "linearizable"}, "consistency")
    status, _, txn = call(server, "POST", "/kv/v1/txns", {})
    key = path_key(_key())
    assert call(server, "PUT", f"/kv/v1/txns/{txn['id']}/keys/{key}", {"value": b64(b"x")})[0] == 200
    _refused(server, "POST", f"/kv/v1/txns/{txn['id']}/rollback", {"keep": True}, "keep")
    _refused(server, "POST", f"/kv/v1/txns/{txn['id']}/commit", {"if_seq": 1}, "if_seq")
    assert call(server, "GET", f"/kv/v1/keys/{key}")[0] == 404  # not committed by the refused request
    assert call(server, "POST", f"/kv/v1/txns/{txn['id']}/commit")[0] == 200  # still open, and an empty body is fine
    assert call(server, "GET", f"/kv/v1/keys/{key}")[0] == 200
    status, _, record = call(server, "POST", DURABLE + "/txns", {})
    for action in ("commit", "abort"):
        _refused(server, "POST", f"{DURABLE}/txns/{record['id']}/{action}", {"force": True}, "force")
    assert call(server, "GET", f"{DURABLE}/txns/{record['id']}")[2]["state"] == "active"
    assert call(server, "POST", f"{DURABLE}/txns/{record['id']}/abort")[0] == 200
