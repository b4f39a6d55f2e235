"""A tiny JSON-over-HTTP helper for the service tests (raw requests, to check the wire)."""

from __future__ import annotations

import base64
import http.client
import json
from typing import Any

from service.testing import ServerProcess

# The session servers' settings (tests/service/conftest.py starts them). They
# live here, not in conftest.py: every test folder has a conftest.py, and
# `from conftest import` gets whichever of them was imported last.
TOKEN = "test-token-0123456789abcdef"
SMALL_BODY_LIMIT = 4096


def path_key(key: bytes) -> str:
    return base64.urlsafe_b64encode(key).rstrip(b"=").decode("ascii")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def call(
    server: ServerProcess, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], Any]:
    """``(status, headers with lower-case names, decoded JSON or None)``."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        payload = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=payload, headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        data = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, json.loads(data) if data else None
    finally:
        conn.close()


def call_json(server: ServerProcess, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    """``(status, decoded JSON body)``, ``{}`` for an empty body: for tests that look at the status and the error."""
    status, _, data = call(server, method, path, body)
    return status, data if data is not None else {}
