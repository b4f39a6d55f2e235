"""One test per rule of the security model (service.config, service.security)."""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys

import pytest
from http_client import SMALL_BODY_LIMIT, TOKEN

import kvstore
from kvclient import RemoteStore
from kvstore.errors import ObjectStoreError
from service.cli import add_serve_arguments, config_from_args
from service.config import ServerConfig, check_bind, is_loopback
from service.testing import ServerProcess


def request(
    server: ServerProcess, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def error_type(body: bytes) -> str:
    return str(json.loads(body)["error"]["type"])


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    return parser.parse_args(argv)


# -- binding -------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1", "example.com"])
def test_non_loopback_bind_needs_a_token(host, monkeypatch) -> None:
    monkeypatch.delenv("LAKEKV_TOKEN", raising=False)
    with pytest.raises(ValueError, match="refusing to bind"):
        config_from_args(parse("./store", "--host", host))
    assert config_from_args(parse("./store", "--host", host, "--token", TOKEN)).token == TOKEN
    monkeypatch.setenv("LAKEKV_TOKEN", TOKEN)
    assert config_from_args(parse("./store", "--host", host)).token == TOKEN


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_may_run_without_token(host) -> None:
    assert is_loopback(host)
    check_bind(ServerConfig(url="./store", host=host))


def test_cli_refuses_public_bind_without_token(tmp_path) -> None:
    env = {"PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-m", "kvstore.cli", "serve", str(tmp_path / "s"), "--host", "0.0.0.0", "--port", "1"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert result.returncode == 2
    assert "refusing to bind '0.0.0.0' without a token" in result.stderr
    assert not (tmp_path / "s").exists()  # refused before opening anything


def test_short_token_and_bad_options_rejected() -> None:
    with pytest.raises(ValueError, match="at least 16"):
        ServerConfig(url="./store", token="short")
    with pytest.raises(ValueError, match="together"):
        ServerConfig(url="./store", tls_cert="cert.pem")
    with pytest.raises(ValueError, match="port"):
        ServerConfig(url="./store", port=70000)


# -- bearer token --------------------------------------------------------------


def test_missing_token_is_401_with_challenge(secure_server) -> None:
    status, headers, body = request(secure_server, "GET", "/kv/v1/info")
    assert status == 401 and headers["www-authenticate"].startswith("Bearer")
    assert error_type(body) == "NotAuthorizedException"
    status, _, _ = request(secure_server, "GET", "/kv/v1/info", headers={"Authorization": f"Basic {TOKEN}"})
    assert status == 401


@pytest.mark.parametrize("presented", ["wrong-token-0123456789abcdef", TOKEN[:-1], TOKEN + "x", ""])
def test_wrong_token_is_403(secure_server, presented) -> None:
    status, _, body = request(secure_server, "GET", "/kv/v1/info", headers={"Authorization": f"Bearer {presented}"})
    assert status == 403 and error_type(body) == "ForbiddenException"


def test_right_token_passes_and_healthz_is_open(secure_server) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert request(secure_server, "GET", "/kv/v1/info", headers=auth)[0] == 200
    assert request(secure_server, "GET", "/healthz")[0] == 200
    assert request(secure_server, "GET", "/metrics")[0] == 401
    assert request(secure_server, "GET", "/metrics", headers=auth)[0] == 200


def test_remote_client_sends_the_token(secure_server) -> None:
    with kvstore.open(secure_server.url, token=TOKEN) as db:
        db.put(b"k", b"v")
        assert db.get(b"k") == b"v"
    with kvstore.open(secure_server.url) as db, pytest.raises(PermissionError, match="401"):
        db.get(b"k")
    with kvstore.open(secure_server.url, token="not-the-token-at-all") as db, pytest.raises(PermissionError, match="403"):
        db.get(b"k")


# -- request size ----------------------------------------------------------------


def test_body_over_the_limit_is_413(secure_server) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/octet-stream"}
    big = b"x" * (SMALL_BODY_LIMIT + 1)
    status, _, body = request(secure_server, "PUT", "/kv/v1/keys/aw", body=big, headers=auth)
    assert status == 413 and error_type(body) == "RequestTooLargeError"
    ok = b"x" * (SMALL_BODY_LIMIT - 100)
    assert request(secure_server, "PUT", "/kv/v1/keys/aw", body=ok, headers=auth)[0] == 200


def test_chunked_body_over_the_limit_is_413(secure_server) -> None:
    # No Content-Length: the limit is enforced while the body streams in.
    conn = http.client.HTTPConnection("127.0.0.1", secure_server.port, timeout=30)
    try:
        chunks = (b"y" * 1024 for _ in range(SMALL_BODY_LIMIT // 1024 + 2))
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/octet-stream"}
        conn.request("PUT", "/kv/v1/keys/aw", body=chunks, headers=headers, encode_chunked=True)
        response = conn.getresponse()
        assert response.status == 413 and error_type(response.read()) == "RequestTooLargeError"
    finally:
        conn.close()


def test_over_limit_rejected_before_auth_reads_body(secure_server) -> None:
    status, _, _ = request(secure_server, "PUT", "/kv/v1/keys/aw", body=b"x" * 10)
    assert status == 401


# -- names -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "headers", "match"),
    [
        ("GET", "/kv/v1/keys/not*base64", {}, "key is not valid unpadded base64url"),
        ("GET", "/kv/v1/keys/a", {}, "key is not valid"),  # 1 char: impossible length
        ("GET", "/kv/v1/txns/XYZ/keys/aw", {}, "transaction id must be 32 lowercase hex"),
        ("GET", "/kv/v1/txns/" + "0" * 32 + "/keys/aw", {}, None),  # well-formed but unknown: 404
        ("PUT", "/kv/v1/keys/aw", {"Idempotency-Key": "has space"}, "Idempotency-Key must be"),
        ("PUT", "/kv/v1/keys/aw", {"Idempotency-Key": "k" * 129}, "Idempotency-Key must be"),
        ("GET", "/kv/v1/scan?page_size=0", {}, "page_size must be in"),
        ("GET", "/kv/v1/scan?reverse=maybe", {}, "reverse must be true or false"),
        ("GET", "/kv/v1/scan?start=%%%", {}, "start is not valid"),
    ],
)
def test_bad_names_and_parameters_are_400(server, method, path, headers, match) -> None:
    body = json.dumps({"value": "dg=="}).encode() if method == "PUT" else None
    status, _, raw = request(server, method, path, body=body, headers=headers)
    message = json.loads(raw)["error"]["message"]
    if match is None:
        assert status == 404 and error_type(raw) == "NoSuchTransactionError"
    else:
        assert status == 400 and match in message


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        (b"not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"ops": []}', "non-empty list"),
        (b'{"ops": [{"op": "merge", "key": "aw=="}]}', "must be 'put' or 'delete'"),
        (b'{"ops": [{"op": "put", "key": "", "value": ""}]}', "ops[0].key must not be empty"),
        (b'{"ops": [{"op": "put", "key": "!!", "value": ""}]}', "ops[0].key is not valid base64"),
        (b'{"ops": [{"op": "put", "key": "aw==", "value": 5}]}', "ops[0].value must be a base64 string"),
        (b'{"ops": [{"op": "put", "key": "aw==", "value": "", "ttl": -1}]}', "ttl must be > 0"),
    ],
)
def test_bad_batch_bodies_are_400(server, payload, match) -> None:
    status, _, raw = request(server, "POST", "/kv/v1/batch", body=payload, headers={"Content-Type": "application/json"})
    assert status == 400 and match in json.loads(raw)["error"]["message"]


def test_client_keys_cannot_reach_server_records(server, remote_db: RemoteStore) -> None:
    # Idempotency records live outside the client key space: a scan of the
    # whole client space after an idempotent write shows only client keys.
    remote_db.put(b"sys/idem/forged", b"x")
    assert [k for k, _ in remote_db.scan()] == [b"sys/idem/forged"]
    status, _, raw = request(server, "GET", "/metrics")
    assert status == 200 and b"lakekv_http_requests_total" in raw


# -- TLS -------------------------------------------------------------------------


def test_tls_with_a_self_signed_certificate(tmp_path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=120,
    )
    server = ServerProcess(
        "memory://tls-test", tmp_path / "server.log", extra_args=("--tls-cert", str(cert), "--tls-key", str(key)),
        tls=True,
    ).start()
    try:
        assert server.url.startswith("https://")
        with kvstore.open(server.url, ca_file=str(cert)) as db:
            db.put(b"secret", b"over tls")
            assert db.get(b"secret") == b"over tls"
        with kvstore.open(server.url) as db, pytest.raises(ObjectStoreError, match="CERTIFICATE_VERIFY_FAILED"):
            db.get(b"secret")  # not trusted without the CA file
    finally:
        assert server.stop() == 0


def test_iceberg_api_needs_a_warehouse(server) -> None:
    # The session server runs on memory://: no location Iceberg clients could share.
    for path in ("/v1/config", "/v1/namespaces"):
        status, _, raw = request(server, "GET", path)
        assert status == 503 and "--warehouse" in json.loads(raw)["error"]["message"]
