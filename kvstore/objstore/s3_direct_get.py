"""Whole-object GETs on an S3 endpoint in one signed HTTP request, beside s3fs.

A linearizable read on S3 first asks for the next root file, which is
usually missing (:mod:`kvstore.freshness`), and a plan or a point get then
costs that probe's round trip on top of its own work. Through s3fs
(aiobotocore, its event-loop thread and request pipeline) a 404 GET on a
local SeaweedFS took 1.7 ms; the same request on a kept HTTP connection,
signed here (AWS Signature Version 4, path-style, unsigned payload), takes
about 0.3 ms. This module makes only that request; everything it does not
expect (another status, a 404 that is not a missing key, a transport error)
it hands back to the caller, which then asks s3fs, so errors keep s3fs's
classification (:mod:`kvstore.objstore.fsspec_store`).

Used only for a store opened with an explicit ``endpoint_url``, ``key`` and
``secret`` and no session token (S3-compatible servers, MinIO, SeaweedFS);
AWS's own endpoints, instance credentials and temporary credentials stay
with s3fs.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import logging
import os
import threading
import time
import urllib.parse
from typing import Final

from kvstore.errors import DirectGetUnavailableError

log = logging.getLogger(__name__)

_UNSIGNED: Final = "UNSIGNED-PAYLOAD"
_SIGNED_HEADERS: Final = "host;x-amz-content-sha256;x-amz-date"
# Statuses that will not change on a retry of the same signed request: the
# endpoint does not take this client's requests (wrong signature, region
# redirect, path-style refused), so every later GET goes to s3fs directly.
_GIVE_UP: Final = frozenset({301, 307, 400, 403, 405, 501})


class DirectGet:
    """Signed path-style GETs of whole objects of one bucket, one kept connection per thread.

    Args:
        endpoint_url: ``http://host[:port]`` or ``https://host[:port]``, no path.
        bucket: the bucket.
        key: access key id.
        secret: secret access key.
        region: the signing region.
        timeout_s: connect and read timeout of each request.

    Raises:
        ValueError: the endpoint is not an http(s) URL of a host alone.
    """

    def __init__(self, endpoint_url: str, bucket: str, key: str, secret: str, region: str, timeout_s: float = 30.0) -> None:
        parts = urllib.parse.urlsplit(endpoint_url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path.strip("/") or parts.query:
            raise ValueError(f"endpoint_url must be http(s)://host[:port], got {endpoint_url!r}")
        self._https = parts.scheme == "https"
        self._netloc = parts.netloc
        self._host_header = parts.netloc
        self._bucket = bucket
        self._key = key
        self._region = region
        self._timeout_s = timeout_s
        self._secret_start = ("AWS4" + secret).encode()
        self._signing_keys: dict[str, bytes] = {}  # per UTC date
        self._local = threading.local()
        self.usable = True

    def get(self, object_key: str) -> bytes | None:
        """The object's bytes, or None if the bucket has no such key.

        Raises:
            DirectGetUnavailableError: anything else; ask s3fs.
        """
        if not self.usable:
            raise DirectGetUnavailableError("direct GETs were turned off for this endpoint")
        path = "/" + urllib.parse.quote(f"{self._bucket}/{object_key}", safe="/-_.~")
        headers = self._signed_headers(path)
        for attempt in (0, 1):
            connection = self._connection(fresh=attempt == 1)
            try:
                connection.request("GET", path, headers=headers)
                response = connection.getresponse()
                body = response.read()
            except (OSError, http.client.HTTPException) as exc:
                # A kept connection the server closed meanwhile fails once; a
                # fresh one that fails too is the endpoint's problem, for s3fs.
                connection.close()
                self._local.connection = None
                if attempt == 1:
                    raise DirectGetUnavailableError(f"GET {path}: {type(exc).__name__}: {exc}") from exc
                continue
            if response.status == 200:
                return body
            if response.status == 404 and b"<Code>NoSuchKey</Code>" in body:
                return None
            if response.status in _GIVE_UP:
                self.usable = False
                log.info("direct S3 GETs off for %s: status %d on %s", self._netloc, response.status, path)
            raise DirectGetUnavailableError(f"GET {path}: status {response.status}")
        raise AssertionError("unreachable")  # the loop returns or raises

    def close(self) -> None:
        """Close this thread's connection (other threads' close with their threads)."""
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None

    def _connection(self, *, fresh: bool) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        if connection is not None and self._local.pid != os.getpid():
            # A forked child inherited the parent's socket: requests on it would
            # interleave with the parent's. Leave it to the parent; open our own.
            connection = None
        if connection is None or fresh:
            if connection is not None:
                connection.close()
            if self._https:
                connection = http.client.HTTPSConnection(self._netloc, timeout=self._timeout_s)
            else:
                connection = http.client.HTTPConnection(self._netloc, timeout=self._timeout_s)
            self._local.connection = connection
            self._local.pid = os.getpid()
        return connection

    def _signed_headers(self, path: str) -> dict[str, str]:
        now = time.gmtime()
        stamp = time.strftime("%Y%m%dT%H%M%SZ", now)
        day = stamp[:8]
        canonical = "\n".join((
            "GET", path, "",
            f"host:{self._host_header}", f"x-amz-content-sha256:{_UNSIGNED}", f"x-amz-date:{stamp}", "",
            _SIGNED_HEADERS, _UNSIGNED,
        ))
        scope = f"{day}/{self._region}/s3/aws4_request"
        to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        signature = hmac.new(self._signing_key(day), to_sign.encode(), hashlib.sha256).hexdigest()
        return {
            "Host": self._host_header,
            "x-amz-content-sha256": _UNSIGNED,
            "x-amz-date": stamp,
            "Authorization": (
                f"AWS4-HMAC-SHA256 Credential={self._key}/{scope}, SignedHeaders={_SIGNED_HEADERS}, Signature={signature}"
            ),
        }

    def _signing_key(self, day: str) -> bytes:
        signing = self._signing_keys.get(day)
        if signing is None:
            signing = self._secret_start
            for part in (day, self._region, "s3", "aws4_request"):
                signing = hmac.new(signing, part.encode(), hashlib.sha256).digest()
            self._signing_keys = {day: signing}  # one day at a time: the dict never grows
        return signing
