"""Request guards as ASGI middleware: bearer-token authentication and the
request body limit, plus the validators for names a client sends.

Both middlewares are plain ASGI (no ``BaseHTTPMiddleware``): they sit on
every request, and the plain form adds no task or queue per request.

Authentication: ``Authorization: Bearer <token>``; the token is compared
with :func:`hmac.compare_digest`, so the comparison time does not reveal how
many leading characters were right. No header → 401 with
``WWW-Authenticate: Bearer``; a wrong token → 403. ``/healthz`` is open so a
load balancer can probe without the secret; ``/metrics`` is not (its route
labels describe the traffic).
"""

from __future__ import annotations

import hmac
import re
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import ApiError, error_response

# Paths served without a token.
OPEN_PATHS: Final = frozenset({"/healthz"})

# Idempotency keys become part of a store key: a conservative alphabet and a
# bound keep them printable in logs and small in the store. UUIDs fit.
_IDEMPOTENCY_KEY = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# Transaction ids are minted by the server (secrets.token_hex(16)).
_TXN_ID = re.compile(r"[0-9a-f]{32}")


def check_idempotency_key(value: str | None) -> str | None:
    """Return a valid ``Idempotency-Key`` header value (or None), else raise ApiError 400."""
    if value is None:
        return None
    if not _IDEMPOTENCY_KEY.fullmatch(value):
        raise ApiError(400, "ValueError", "Idempotency-Key must be 1-128 characters of A-Z a-z 0-9 . _ : -")
    return value


def check_txn_id(value: str) -> str:
    """Return a syntactically valid transaction id, else raise ApiError 400."""
    if not _TXN_ID.fullmatch(value):
        raise ApiError(400, "ValueError", "transaction id must be 32 lowercase hex characters")
    return value


class BearerAuth:
    """Reject requests without the right bearer token (see the module docstring)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self._token = None if token is None else token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._token is None or scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        header = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                header = value
                break
        scheme, _, presented = header.partition(b" ")
        if not header or scheme.lower() != b"bearer":
            error = ApiError(
                401, "NotAuthorizedException", "missing bearer token",
                headers={"WWW-Authenticate": 'Bearer realm="lakekv"'},
            )
            await error_response(error)(scope, receive, send)
            return
        if not hmac.compare_digest(presented.strip(), self._token):
            await error_response(ApiError(403, "ForbiddenException", "invalid bearer token"))(scope, receive, send)
            return
        await self.app(scope, receive, send)


class BodyLimit:
    """413 for bodies over ``max_bytes``: by Content-Length up front, or while streaming."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = ApiError(413, "RequestTooLargeError", f"request body exceeds {self.max_bytes} bytes")
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await error_response(ApiError(400, "ValueError", "bad Content-Length"))(scope, receive, send)
                    return
                if declared > self.max_bytes:
                    await error_response(too_large)(scope, receive, send)
                    return
        received = 0
        limit = self.max_bytes

        async def limited_receive() -> Message:
            # Chunked bodies declare no length: count as they arrive.
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise too_large
            return message

        await self.app(scope, limited_receive, send)
