"""Following a ``lakekv serve`` server's changes: ``GET /kv/v1/watch`` as an iterator.

The server streams server-sent events, one ``data:`` message per version
with every event of that version and the revision it is complete through,
and ``: next <version>`` / ``: next-revision <revision>`` comments saying
where the stream is. A dropped stream is resumed from the next revision (the
next version if the server has not said), so no event is missed or repeated.
"""

from __future__ import annotations

import base64
import http.client
import json
import threading
import time
from typing import Iterator

from kvclient.transport import RETRY_FIRST_S, HttpTransport, raise_error
from kvstore.errors import ObjectStoreError
from kvstore.watch import WatchEvent


class RemoteWatch:
    """An iterator of :class:`~kvstore.watch.WatchEvent` from ``GET /kv/v1/watch``.

    Holds its own connection (a stream cannot share the thread's keep-alive
    one). ``close()`` may be called from another thread; it ends the
    iteration. ``next_version`` is where a later watch resumes.
    """

    def __init__(
        self, client: HttpTransport, prefix: bytes, start: int | None, end: int | None, start_revision: int | None = None
    ) -> None:
        self._http = client
        self._prefix = prefix
        self._next = start
        # The revision to resume from, once known: a reconnect takes it rather than the version.
        self._next_revision = start_revision
        self._end = end
        self._ready: list[WatchEvent] = []
        self._closed = threading.Event()
        self._conn: http.client.HTTPConnection | None = None
        self._response: http.client.HTTPResponse | None = None

    @property
    def next_version(self) -> int | None:
        """The version the watch reads next (None before the first event of a watch without ``start``)."""
        return self._next

    @property
    def next_revision(self) -> int | None:
        """The revision the watch reads next (None before the server has said, for a watch without a start)."""
        return self._next_revision

    def close(self) -> None:
        self._closed.set()
        conn = self._conn
        # shutdown, not close: it wakes a reader blocked in another thread,
        # which then closes the connection itself (closing it under the
        # reader's feet breaks http.client).
        sock = conn.sock if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(2)
            except OSError:
                pass  # already disconnected: nothing left to wake
        else:
            self._release()

    def _release(self) -> None:
        conn, self._conn, self._response = self._conn, None, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> RemoteWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[WatchEvent]:
        return self

    def _connect(self) -> http.client.HTTPResponse:
        query = {"prefix": base64.urlsafe_b64encode(self._prefix).rstrip(b"=").decode("ascii")}
        if self._next_revision is not None:
            query["start_revision"] = str(self._next_revision)
        elif self._next is not None:
            query["start"] = str(self._next)
        if self._end is not None:
            query["end"] = str(self._end)
        conn = self._http.stream_connection()
        self._conn = conn
        target = self._http.target("/kv/v1/watch", query)
        conn.request("GET", target, headers={**self._http.auth_headers, "Accept": "text/event-stream"})
        response = conn.getresponse()
        if response.status >= 400:
            raise_error(response.status, response.read())
        return response

    def __next__(self) -> WatchEvent:
        deadline: float | None = None
        while not self._ready:
            if self._closed.is_set() or (self._end is not None and self._next is not None and self._next > self._end):
                self._release()
                raise StopIteration
            try:
                if self._response is None:
                    self._response = self._connect()
                line = self._response.readline()
                if not line:
                    raise ConnectionResetError("the server ended the watch stream")
            except (OSError, http.client.HTTPException) as exc:
                self._release()
                if self._closed.is_set():
                    raise StopIteration from None
                now = time.monotonic()
                deadline = deadline if deadline is not None else now + self._http.retry_s
                if now >= deadline:
                    raise ObjectStoreError(f"watch on {self._http.url}: server unreachable: {exc!r}") from exc
                time.sleep(RETRY_FIRST_S)
                continue
            deadline = None
            if line.startswith(b": next "):
                # Where the stream is: its start (resume there if it drops before an
                # event), or past ``end`` when it is over.
                self._next = max(self._next or 0, int(line[7:]))
            elif line.startswith(b": next-revision "):
                revision = int(line[16:])
                if revision > 0:  # 0: the server does not know it yet (a version start retention cut)
                    self._next_revision = max(self._next_revision or 0, revision)
            elif line.startswith(b"data:"):
                message = json.loads(line[5:])
                version = int(message["version"])
                for event in message["events"]:
                    value = event["value"]
                    self._ready.append(WatchEvent(
                        version, int(event["seq"]), base64.b64decode(event["key"]),
                        None if value is None else base64.b64decode(value), str(event["kind"]),
                    ))
                # Every event of a version comes in one message: resume after it.
                self._next = max(self._next or 0, version + 1)
                if "revision" in message:  # complete through that revision
                    self._next_revision = max(self._next_revision or 0, int(message["revision"]) + 1)
        return self._ready.pop(0)
