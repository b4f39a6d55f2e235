"""Iceberg REST paths that name no object are REST errors, never redirects.

Starlette matches routes on the percent-decoded path and redirected what
matched only without a trailing slash: ``GET /v1/namespaces/%2f`` was a 307
to ``/v1/namespaces``, and ``DELETE /v1/namespaces/a%2F`` one to namespace
``a``, which a client that follows redirects then dropped. Namespace parts
travel joined by ``%1F`` (the REST spec's unit separator); an encoded ``/``,
an empty part or a dot segment is a 400 with the REST error body.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from test_security import request

from service.testing import ServerProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("iceberg-routes")
    process = ServerProcess(str(root / "lake"), root / "server.log").start()
    try:
        for namespace in (["a"], ["a", "b"]):
            body = json.dumps({"namespace": namespace}).encode()
            assert request(process, "POST", "/v1/namespaces", body, {"Content-Type": "application/json"})[0] == 200
        yield process
    finally:
        process.stop()


def _error(server: ServerProcess, method: str, path: str) -> tuple[int, dict]:
    status, headers, raw = request(server, method, path)
    assert "location" not in headers, (method, path, status, headers)
    body = json.loads(raw) if method != "HEAD" else {"error": {"type": "", "code": status}}
    assert body["error"]["code"] == status
    return status, body


MALFORMED = [
    "/v1/namespaces/%2f",
    "/v1/namespaces/%2F",
    "/v1/namespaces/a%2F",
    "/v1/namespaces/a%2Fb",
    "/v1/namespaces/%5C",
    "/v1/namespaces/",
    "/v1/namespaces//",
    "/v1/namespaces/%1F",
    "/v1/namespaces/a%1F",
    "/v1/namespaces/%1Fa",
    "/v1/namespaces/a%1F%1Fb",
    "/v1/namespaces/..",
    "/v1/namespaces/%2E%2E",
    "/v1/namespaces/a/../a",
    "/v1/namespaces/a/tables/",
    "/v1/namespaces/a/tables/%2f",
    "/v1/namespaces/a/tables/t%2F",
    "/v1/namespaces/a/views/%2F",
    "/v1/config/",
]


@pytest.mark.parametrize(
    ("method", "path"),
    [(method, path) for method in ("GET", "HEAD", "DELETE") for path in MALFORMED]
    + [("POST", path) for path in MALFORMED if "%2f" in path.lower() or path.endswith("/")],
)
def test_a_malformed_name_in_a_path_is_a_400_not_a_redirect(server: ServerProcess, method: str, path: str) -> None:
    status, body = _error(server, method, path)
    assert status == 400, (method, path, body)
    if method != "HEAD":
        assert body["error"]["type"] == "BadRequestException"


def test_a_trailing_encoded_slash_never_reaches_the_namespace_before_it(server: ServerProcess) -> None:
    assert _error(server, "DELETE", "/v1/namespaces/a%1Fb%2F")[0] == 400
    assert request(server, "GET", "/v1/namespaces/a%1Fb")[0] == 200  # the unit separator joins parts
    assert request(server, "GET", "/v1/namespaces/a")[0] == 200


def test_other_unmatched_paths_are_rest_errors(server: ServerProcess) -> None:
    status, body = _error(server, "GET", "/v1/nope")
    assert (status, body["error"]["type"]) == (404, "NotFoundException")
    status, body = _error(server, "GET", "/v1/namespaces/a/tables/t/extra")
    assert status == 404
    status, body = _error(server, "PUT", "/v1/namespaces/a")
    assert (status, body["error"]["type"]) == (405, "MethodNotAllowedException")


@pytest.mark.parametrize("path", ["/kv/v1/info/", "/kv/v1/keys/", "/metrics/"])
def test_no_path_of_the_server_is_answered_by_a_redirect(server: ServerProcess, path: str) -> None:
    """Outside the Iceberg routes too: a trailing slash is not silently another path."""
    status, headers, _ = request(server, "GET", path)
    assert status == 404, (path, status, headers)
    assert "location" not in headers


# -- namespace errors in the reference wording -----------------------------------
# Iceberg's Java client and its REST compatibility kit match on the reference
# catalog's text; the catalog's own ("namespace 'm' does not exist") failed
# five of the kit's namespace tests.


def _json(server: ServerProcess, method: str, path: str, payload: dict) -> tuple[int, dict]:
    status, _, raw = request(server, method, path, json.dumps(payload).encode(), {"Content-Type": "application/json"})
    return status, json.loads(raw)


@pytest.mark.parametrize(
    ("method", "path", "payload", "missing"),
    [
        ("GET", "/v1/namespaces/m", None, "m"),
        ("GET", "/v1/namespaces/a%1Fm", None, "a.m"),
        ("DELETE", "/v1/namespaces/a%1Fm", None, "a.m"),
        ("POST", "/v1/namespaces/a%1Fm/properties", {"updates": {"k": "v"}}, "a.m"),
        ("POST", "/v1/namespaces/a%1Fm/properties", {"removals": ["k"]}, "a.m"),
        ("GET", "/v1/namespaces?parent=a%1Fm", None, "a.m"),
    ],
)
def test_a_missing_namespace_is_named_in_the_reference_wording(
    server: ServerProcess, method: str, path: str, payload: dict | None, missing: str
) -> None:
    if payload is None:
        status, body = _error(server, method, path)
    else:
        status, body = _json(server, method, path, payload)
    assert (status, body["error"]["type"]) == (404, "NoSuchNamespaceException")
    assert body["error"]["message"] == f"Namespace does not exist: {missing}"


def test_an_existing_namespace_is_named_in_the_reference_wording(server: ServerProcess) -> None:
    status, body = _json(server, "POST", "/v1/namespaces", {"namespace": ["a", "b"]})
    assert (status, body["error"]["type"]) == (409, "AlreadyExistsException")
    assert body["error"]["message"] == "Namespace already exists: a.b"


def test_a_missing_parent_keeps_the_message_naming_the_parent(server: ServerProcess) -> None:
    status, body = _json(server, "POST", "/v1/namespaces", {"namespace": ["x", "y"]})
    assert (status, body["error"]["type"]) == (404, "NoSuchNamespaceException")
    assert "'x'" in body["error"]["message"], body
    assert request(server, "HEAD", "/v1/namespaces/x%1Fy")[0] == 404
