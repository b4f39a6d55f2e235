"""GET /kv/v1/watch (service.kv_watch) while the server commits under a probing watch.

A server's watch probes storage for the next root; a commit of the server's
landing between that probe and the watch's look at the head was reported as
``SnapshotTooOldError: version N is no longer retained``: the server logged
an internal error and cut the stream. The server runs in this process (uvicorn
in a thread) so the test can hold the probe's miss until the commit landed.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import socket
import threading
import uuid
from collections.abc import Iterator

import pytest
import uvicorn

from http_client import b64, path_key
from kvstore.errors import ObjectStoreError
from kvstore.format.root import root_path
from kvstore.objstore.memory import named_memory_store
from service.app import create_app
from service.config import ServerConfig

WAIT_S = 20.0  # liveness bound for events the test itself sets


class InProcessServer:
    """``create_app`` served by uvicorn on a thread of this process, on a socket bound before it starts."""

    def __init__(self, url: str) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        # No follower and no background maintenance: the watch is the only reader of new roots.
        config = ServerConfig(url=url, store_options=(("poll_interval_s", 0), ("background_maintenance", False)))
        # log_config=None: uvicorn's records reach the root logger, where caplog sees them.
        self.server = uvicorn.Server(uvicorn.Config(create_app(config), lifespan="on", log_config=None))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]})

    def __enter__(self) -> InProcessServer:
        self.sock.listen()  # connections queue until uvicorn serves them: nothing to wait for
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(WAIT_S)
        self.sock.close()

    def connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT_S)


@pytest.fixture
def gated() -> Iterator[tuple[str, dict]]:
    """A named memory store whose ``get`` of an armed missing path runs a hook before the miss is raised."""
    name = "watch-head-" + uuid.uuid4().hex
    storage = named_memory_store(name)
    armed: dict = {}
    inner_get = storage.get

    def get(path: str) -> bytes:
        try:
            return inner_get(path)
        except FileNotFoundError:
            hook = armed.pop(path, None)
            if hook is not None:
                hook()
            raise

    storage.get = get  # type: ignore[method-assign]
    yield f"memory://{name}", armed


def _put(server: InProcessServer, key: bytes, value: bytes) -> int:
    conn = server.connect()
    try:
        conn.request("PUT", f"/kv/v1/keys/{path_key(key)}", json.dumps({"value": b64(value)}),
                     {"Content-Type": "application/json"})
        response = conn.getresponse()
        body = json.loads(response.read())
        assert response.status == 200, body
        return int(body["seq"])
    finally:
        conn.close()


def _open_stream(server: InProcessServer) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse, int]:
    """A watch of ``cfg/`` that has caught up: ``(connection, response, the version it follows)``."""
    conn = server.connect()
    conn.request("GET", "/kv/v1/watch?prefix=" + path_key(b"cfg/"), headers={"Accept": "text/event-stream"})
    stream = conn.getresponse()
    assert stream.status == 200
    first = stream.readline()
    assert first.startswith(b": next ")  # the stream is open and caught up
    assert stream.readline().startswith(b": next-revision ")  # the same place, as a revision
    return conn, stream, int(first[7:])


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]


def test_a_commit_during_the_watch_probe_is_streamed_not_an_internal_error(
    gated: tuple[str, dict], caplog: pytest.LogCaptureFixture
) -> None:
    url, armed = gated
    with InProcessServer(url) as server:
        _put(server, b"seed", b"0")
        conn, stream, following = _open_stream(server)
        missed, committed = threading.Event(), threading.Event()

        def on_miss() -> None:  # the watch found no root: let the commit land before it goes on
            missed.set()
            assert committed.wait(WAIT_S), "the test never committed"

        armed[root_path(following)] = on_miss
        # The stream probes storage when its poll interval passes with nothing applied.
        assert missed.wait(WAIT_S), "the watch never probed for the next version"
        seq = _put(server, b"cfg/a", b"1")
        committed.set()
        lines: list[bytes] = []
        while not lines or not lines[-1].startswith(b"data:"):
            line = stream.readline()
            assert line, f"the server cut the stream after {lines}"
            if line.strip():
                lines.append(line)
        conn.close()
    assert _errors(caplog) == []
    message = json.loads(lines[-1][5:])
    assert message["version"] == following
    assert [(e["seq"], base64.b64decode(e["key"]), e["kind"]) for e in message["events"]] == [(seq, b"cfg/a", "put")]


def test_a_storage_error_mid_stream_ends_it_where_the_client_resumes(
    gated: tuple[str, dict], caplog: pytest.LogCaptureFixture
) -> None:
    url, armed = gated
    with InProcessServer(url) as server:
        seed = _put(server, b"seed", b"0")
        conn, stream, following = _open_stream(server)
        probed = threading.Event()

        def flaky() -> None:
            probed.set()
            raise ObjectStoreError("injected: storage unreachable")

        armed[root_path(following)] = flaky
        assert probed.wait(WAIT_S), "the watch never probed for the next version"
        rest = stream.read()  # the server ends the stream
        conn.close()
        # Where to resume, as a version (deprecated start=) and a revision (start_revision=): nothing skipped.
        assert rest.strip().splitlines() == [f": next {following}".encode(), f": next-revision {seed + 1}".encode()]
        # The client resumes there and misses nothing.
        seq = _put(server, b"cfg/a", b"1")
        conn = server.connect()
        conn.request("GET", f"/kv/v1/watch?prefix={path_key(b'cfg/')}&start={following}&end={following}")
        replay = conn.getresponse().read()
        conn.close()
    assert f'"seq":{seq}'.encode() in replay
    assert _errors(caplog) == []  # a warning, not an internal error
