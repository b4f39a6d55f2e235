"""Requests that fail change nothing, and nothing a request says is ignored.

Each test is a defect found by sending the server what a careless or hostile
client would: wrong JSON types, a reused Idempotency-Key, absurd nesting, a
commit body naming another table, query parameters nobody reads.
"""

from __future__ import annotations

import base64
import json

import pytest

import catalog
from service.testing import ServerProcess
from test_security import request


def _json(server: ServerProcess, method: str, path: str, payload: object = None, headers: dict | None = None):
    body = None if payload is None else json.dumps(payload).encode()
    status, response_headers, raw = request(
        server, method, path, body, {"Content-Type": "application/json", **(headers or {})}
    )
    return status, response_headers, (json.loads(raw) if raw else {})


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _key(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")


SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def test_a_namespace_properties_update_with_wrong_types_is_400_and_stores_nothing(lake_server: ServerProcess) -> None:
    assert _json(lake_server, "POST", "/v1/namespaces", {"namespace": ["props"], "properties": {"a": "1"}})[0] == 200
    for payload in ({"updates": {"b": 1}}, {"removals": [1]}, {"updates": {"b": "2"}, "removals": "a"}):
        status, _, body = _json(lake_server, "POST", "/v1/namespaces/props/properties", payload)
        assert status == 400, (payload, body)
    status, _, body = _json(lake_server, "GET", "/v1/namespaces/props")
    assert status == 200 and body["properties"] == {"a": "1"}
    # A good update answers what it did (it used to answer 400 after storing the change).
    status, _, body = _json(lake_server, "POST", "/v1/namespaces/props/properties", {
        "updates": {"b": "2"}, "removals": ["a", "zz"],
    })
    assert status == 200 and body == {"updated": ["b"], "removed": ["a"], "missing": ["zz"]}
    assert _json(lake_server, "GET", "/v1/namespaces/props")[2]["properties"] == {"b": "2"}


def test_an_idempotency_key_is_not_shared_by_a_put_and_a_transaction(lake_server: ServerProcess) -> None:
    key_a, key_b = _key("idem-a"), _key("idem-b")
    status, _, _ = _json(lake_server, "PUT", f"/kv/v1/keys/{key_a}", {"value": _b64(b"1")}, {"Idempotency-Key": "shared-1"})
    assert status == 200
    status, _, body = _json(lake_server, "POST", "/kv/v1/txns", {})
    txn = body["id"]
    assert _json(lake_server, "PUT", f"/kv/v1/txns/{txn}/keys/{key_b}", {"value": _b64(b"2")})[0] == 200
    status, headers, body = _json(lake_server, "POST", f"/kv/v1/txns/{txn}/commit", {}, {"Idempotency-Key": "shared-1"})
    assert status == 422 and "idempotent-replayed" not in headers, body
    # Its writes were not dropped as a replay: the transaction is still open and commits under its own key.
    status, _, _ = _json(lake_server, "POST", f"/kv/v1/txns/{txn}/commit", {}, {"Idempotency-Key": "own-key-1"})
    assert status == 200
    assert _json(lake_server, "GET", f"/kv/v1/keys/{key_b}")[2]["value"] == _b64(b"2")
    # And the reverse: a PUT reusing a transaction's key is refused, not replayed.
    status, _, _ = _json(lake_server, "PUT", f"/kv/v1/keys/{key_a}", {"value": _b64(b"3")}, {"Idempotency-Key": "own-key-1"})
    assert status == 422
    assert _json(lake_server, "GET", f"/kv/v1/keys/{key_a}")[2]["value"] == _b64(b"1")


def test_a_retried_transaction_commit_is_a_replay(lake_server: ServerProcess) -> None:
    key = _key("idem-retry")
    seqs = []
    for value in (b"first", b"second"):  # the client re-runs its transaction after a lost answer
        txn = _json(lake_server, "POST", "/kv/v1/txns", {})[2]["id"]
        _json(lake_server, "PUT", f"/kv/v1/txns/{txn}/keys/{key}", {"value": _b64(value)})
        status, headers, body = _json(lake_server, "POST", f"/kv/v1/txns/{txn}/commit", {}, {"Idempotency-Key": "retry-1"})
        assert status == 200
        seqs.append((body["seq"], headers.get("idempotent-replayed")))
    assert seqs[1] == (seqs[0][0], "true")
    assert _json(lake_server, "GET", f"/kv/v1/keys/{key}")[2]["value"] == _b64(b"first")


def test_absurd_nesting_is_a_400(lake_server: ServerProcess) -> None:
    status, _, raw = request(lake_server, "POST", "/kv/v1/batch", b"[" * 100_000, {"Content-Type": "application/json"})
    assert status == 400 and b"nested too deeply" in raw


def test_a_table_commit_is_for_the_table_of_its_path(lake_server: ServerProcess) -> None:
    _json(lake_server, "POST", "/v1/namespaces", {"namespace": ["ident"]})
    for name in ("a", "b"):
        assert _json(lake_server, "POST", "/v1/namespaces/ident/tables", {"name": name, "schema": SCHEMA})[0] == 200
    set_prop = [{"action": "set-properties", "updates": {"touched": "yes"}}]
    status, _, body = _json(lake_server, "POST", "/v1/namespaces/ident/tables/a", {
        "identifier": {"namespace": ["ident"], "name": "b"}, "requirements": [], "updates": set_prop,
    })
    assert status == 400 and "not the table of the path" in body["error"]["message"]
    for name in ("a", "b"):
        assert "touched" not in _json(lake_server, "GET", f"/v1/namespaces/ident/tables/{name}")[2]["metadata"]["properties"]
    # The REST spec makes the identifier optional: the path names the table.
    status, _, body = _json(lake_server, "POST", "/v1/namespaces/ident/tables/a", {"requirements": [], "updates": set_prop})
    assert status == 200, body
    assert body["metadata"]["properties"]["touched"] == "yes"


@pytest.mark.parametrize(
    ("method", "path", "unknown"),
    [
        ("GET", "/kv/v1/keys/{key}?rev=1", "rev"),  # a typo of revision
        ("PUT", "/kv/v1/keys/{key}?cas=5", "cas"),
        ("DELETE", "/kv/v1/keys/{key}?if_seq=3", "if_seq"),
        ("GET", "/kv/v1/scan?prefix=&nope=1", "nope"),
        ("GET", "/v1/namespaces?parent=&recursive=true", "recursive"),
        ("DELETE", "/v1/namespaces/ns/tables/t?purge=true", "purge"),
        ("GET", "/kv/v1/durable/txns?all=1", "all"),
    ],
)
def test_an_unknown_query_parameter_is_a_400_naming_it(
    lake_server: ServerProcess, method: str, path: str, unknown: str
) -> None:
    key = _key("unknown-param")
    _json(lake_server, "PUT", f"/kv/v1/keys/{key}", {"value": _b64(b"before")})
    payload = {"value": _b64(b"after")} if method == "PUT" else None
    status, _, body = _json(lake_server, method, path.format(key=key), payload)
    assert status == 400 and f"unknown query parameter {unknown}" in body["error"]["message"], body
    assert _json(lake_server, "GET", f"/kv/v1/keys/{key}")[2]["value"] == _b64(b"before")  # nothing happened


def test_a_failed_request_changes_nothing_in_the_catalog(lake_server: ServerProcess) -> None:
    before = _catalog_version(lake_server)
    _json(lake_server, "POST", "/v1/namespaces", {"namespace": ["bad\x01"]})
    _json(lake_server, "POST", "/v1/namespaces/nope/tables", {"name": "t", "schema": SCHEMA})
    _json(lake_server, "POST", "/v1/namespaces", {"namespace": "notalist"})
    assert _catalog_version(lake_server) == before


def _catalog_version(server: ServerProcess) -> int:
    with catalog.open(server.store_url, poll_interval_s=0, background_maintenance=False) as lake:
        return lake.version


def test_an_internal_error_is_a_500_with_a_request_id_in_the_body_and_the_log(caplog: pytest.LogCaptureFixture) -> None:
    import asyncio

    from starlette.requests import Request

    from service.app import create_app
    from service.config import ServerConfig

    # The app's handler of last resort (creating the app opens nothing: the store opens at startup).
    internal_error = create_app(ServerConfig(url="memory://unused")).exception_handlers[Exception]
    scope = {"type": "http", "method": "POST", "path": "/v1/namespaces/x/properties", "headers": [], "query_string": b""}
    with caplog.at_level("ERROR", logger="lakekv.serve"):
        response = asyncio.run(internal_error(Request(scope), TypeError("'int' object is not subscriptable")))
    body = json.loads(bytes(response.body))
    request_id = body["error"]["request_id"]
    assert response.status_code == 500 and body["error"]["type"] == "InternalServerError"
    assert request_id in body["error"]["message"] and response.headers["x-request-id"] == request_id
    assert any(request_id in r.getMessage() and r.exc_info for r in caplog.records)


def test_only_argument_type_errors_are_client_errors() -> None:
    from catalog.errors import ArgumentTypeError
    from service.errors import to_api_error

    refused = to_api_error(ArgumentTypeError("drop_table(): purge must be a bool, not str 'no'"))
    assert refused is not None and refused.status == 400
    assert to_api_error(TypeError("'int' object is not subscriptable")) is None  # a bug: the 500 handler's


def test_a_renamed_exception_keeps_its_wire_type() -> None:
    # catalog.errors.TransactionExpiredError became DurableTransactionExpiredError
    # (issue 24); answers still say "TransactionExpiredError", which kvclient maps.
    from catalog.errors import DurableTransactionExpiredError
    from service.errors import to_api_error

    error = to_api_error(DurableTransactionExpiredError("transaction t1 is expired"))
    assert error is not None and (error.status, error.error_type) == (410, "TransactionExpiredError")
