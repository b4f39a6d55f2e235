"""How the client talks to a ``lakekv serve`` server: requests, retries, errors.

stdlib ``http.client``, one keep-alive connection per thread. Every request
may be retried on a transport failure (connection refused or reset, timeout)
until ``retry_s`` has passed, because every request the client sends is safe
to repeat: reads and transaction steps are idempotent, and each write or
commit carries an ``Idempotency-Key`` the server records in the same commit
(:mod:`kvclient.remote`), so a repeated one is answered from the record
instead of committing twice.

An error response carries the exception's class name (``service.errors``);
:func:`raise_error` raises the embedded store's own exception for it.

Thread-safety: an :class:`HttpTransport` may be shared by threads (each
thread has its own connection).
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
import time
import urllib.parse
from typing import Any, Final, Iterator

from kvstore.batch import check_key
from kvstore.errors import (
    CommitError,
    CommitNotLandedError,
    ConflictError,
    CorruptionError,
    LeaseNotFoundError,
    NotWrittenError,
    ObjectStoreError,
    PreconditionFailedError,
    SnapshotTooOldError,
    StoreClosedError,
    StoreError,
    TransactionClosedError,
    TransactionExpiredError,
)

# The exceptions an error response may name, by class name: the embedded
# store's own, so a caller catches the same classes embedded and remote.
ERROR_TYPES: Final[dict[str, type[Exception]]] = {
    cls.__name__: cls
    for cls in (
        ConflictError, TransactionExpiredError, TransactionClosedError, SnapshotTooOldError, StoreClosedError,
        CommitError, ObjectStoreError, CorruptionError, ValueError, TypeError,
        PreconditionFailedError, LeaseNotFoundError, CommitNotLandedError, NotWrittenError,
    )
}
# The server forgot the transaction (it expired long ago or the server
# restarted): for the caller it is as gone as an expired one.
ERROR_TYPES["NoSuchTransactionError"] = TransactionExpiredError

OCTET_STREAM: Final = "application/octet-stream"
# Keys travel in URL paths, and HTTP servers cap a request line far below the
# engine's 64 KiB key limit; 4 KiB keeps every key in one path segment that
# any proxy passes. The server enforces the same bound (service.codec).
MAX_REMOTE_KEY_BYTES: Final = 4096
# Backoff between transport retries: short first (a keep-alive connection the
# server just closed), growing to ride out a server restart.
RETRY_FIRST_S: Final = 0.02
RETRY_MAX_S: Final = 1.0


def path_key(key: bytes, name: str = "key") -> str:
    """Validate ``key`` as embedded does, plus the HTTP bound; return its URL form."""
    key = check_key(key, name)
    if len(key) > MAX_REMOTE_KEY_BYTES:
        raise ValueError(f"{name} is {len(key)} bytes; the limit over HTTP is {MAX_REMOTE_KEY_BYTES}")
    return base64.urlsafe_b64encode(key).rstrip(b"=").decode("ascii")


class HttpTransport:
    """One keep-alive connection per thread, retries, and error decoding."""

    def __init__(
        self, url: str, token: str | None, timeout: float, retry_s: float, ca_file: str | None = None
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"url must be http(s)://host[:port], got {url!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._base = parts.path.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._timeout = timeout
        self._retry_s = retry_s
        # https: verify the server against the system CAs, or ca_file (e.g. a self-signed certificate).
        self._ssl = ssl.create_default_context(cafile=ca_file) if self._https else None
        self._local = threading.local()
        self.url = url

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._https:
                conn = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout, context=self._ssl)
            else:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
            self._local.conn = conn
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None,
        query: dict[str, str] | None = None,
    ) -> tuple[int, str, bytes]:
        """Send one request, retrying transport failures; return ``(status, content type, body)``.

        Raises:
            ObjectStoreError: the server stayed unreachable for ``retry_s``.
        """
        target = self._base + path + ("?" + urllib.parse.urlencode(query) if query else "")
        all_headers = {**self._headers, **(headers or {})}
        deadline = time.monotonic() + self._retry_s
        delay = RETRY_FIRST_S
        while True:
            conn = self._connection()
            try:
                conn.request(method, target, body=body, headers=all_headers)
                response = conn.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException) as exc:
                self._drop()
                # A TLS failure (untrusted certificate, wrong host) will not heal by retrying.
                if isinstance(exc, ssl.SSLError) or time.monotonic() >= deadline:
                    raise ObjectStoreError(f"{method} {self.url}{path}: server unreachable: {exc!r}") from exc
                time.sleep(delay)
                delay = min(RETRY_MAX_S, delay * 2)
                continue
            if response.will_close:
                self._drop()
            return response.status, response.getheader("content-type", ""), data

    @property
    def auth_headers(self) -> dict[str, str]:
        return dict(self._headers)

    @property
    def retry_s(self) -> float:
        return self._retry_s

    def target(self, path: str, query: dict[str, str] | None = None) -> str:
        """The request target of ``path`` (and ``query``) on this server."""
        return self._base + path + ("?" + urllib.parse.urlencode(query) if query else "")

    def stream_connection(self) -> http.client.HTTPConnection:
        """A new connection of its own, with no read timeout (a watch stream may be quiet for long)."""
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=None, context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=None)

    def json(self, method: str, path: str, payload: Any = None, **kwargs: Any) -> Any:
        """A JSON request; the decoded JSON answer, or the server's error raised."""
        body = None if payload is None else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", **kwargs.pop("headers", {})}
        status, _, data = self.request(method, path, body=body, headers=headers, **kwargs)
        if status >= 400:
            raise_error(status, data)
        return json.loads(data) if data else None

    def close(self) -> None:
        self._drop()


def raise_error(status: int, data: bytes) -> None:
    """Raise the exception an error response stands for (the embedded store's own)."""
    try:
        error = json.loads(data)["error"]
        error_type, message = str(error["type"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        raise StoreError(f"HTTP {status}: {data[:200]!r}") from None
    if status in (401, 403):
        raise PermissionError(f"{message} (HTTP {status})")
    cls = ERROR_TYPES.get(error_type)
    if cls is not None:
        raise cls(message)
    raise StoreError(f"{error_type} (HTTP {status}): {message}")



def get_value(http: HttpTransport, path: str, query: dict[str, str] | None = None) -> bytes | None:
    status, _, data = http.request("GET", path, headers={"Accept": OCTET_STREAM}, query=query)
    if status == 404 and b"NoSuchKeyError" in data:
        return None
    if status >= 400:
        raise_error(status, data)
    return data



def scan_pages(http: HttpTransport, path: str, query: dict[str, str], limit: int | None, page_rows: int) -> Iterator[tuple[bytes, bytes]]:
    remaining = limit
    while remaining is None or remaining > 0:
        page_query = dict(query, page_size=str(page_rows if remaining is None else min(page_rows, remaining)))
        page = http.json("GET", path, query=page_query)
        for key_text, value_text in page["items"]:
            yield base64.b64decode(key_text), base64.b64decode(value_text)
        if remaining is not None:
            remaining -= len(page["items"])
        if page["cursor"] is None:
            return
        query = dict(query, cursor=page["cursor"])
