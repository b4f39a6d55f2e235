"""service.http_protocol: what one event-loop pass writes leaves as one socket write."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

from service.http_protocol import CoalescingTransport
from service.testing import ServerProcess


class RecordingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:  # type: ignore[override]
        assert not self.closed, "write after close"
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: object = None) -> object:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


def test_writes_of_one_loop_pass_are_sent_as_one_write_when_it_ends() -> None:
    async def scenario() -> list[list[bytes]]:
        raw = RecordingTransport()
        transport = CoalescingTransport(raw, asyncio.get_running_loop())
        transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
        transport.write(b"")
        transport.writelines([b"body", b"!"])
        seen = [list(raw.writes)]  # nothing sent yet: the pass has not ended
        await asyncio.sleep(0)
        seen.append(list(raw.writes))
        transport.write(b"chunk")
        await asyncio.sleep(0)
        seen.append(list(raw.writes))
        return seen

    assert asyncio.run(scenario()) == [
        [], [b"HTTP/1.1 200 OK\r\n\r\nbody!"], [b"HTTP/1.1 200 OK\r\n\r\nbody!", b"chunk"],
    ]


def test_close_sends_what_is_kept_first_and_other_calls_go_through() -> None:
    async def scenario() -> tuple[list[bytes], bool, object]:
        raw = RecordingTransport()
        transport = CoalescingTransport(raw, asyncio.get_running_loop())
        transport.write(b"last words")
        assert transport.get_write_buffer_size() == len(b"last words")
        transport.close()
        await asyncio.sleep(0)  # the scheduled flush finds nothing left to send
        return raw.writes, raw.closed, transport.get_extra_info("peername")

    assert asyncio.run(scenario()) == ([b"last words"], True, ("127.0.0.1", 1))


def test_a_served_response_comes_in_one_read(tmp_path: Path) -> None:
    """Head and body are one write: the client's first read holds the whole response
    (two writes could be read apart, as they were before)."""
    server = ServerProcess(f"file://{tmp_path / 'store'}", tmp_path / "server.log").start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            for _ in range(20):  # keep-alive: every response on the connection, not just the first
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                data = sock.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                assert head.startswith(b"HTTP/1.1 200"), data
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
                assert len(body) == length and json.loads(body)["status"] == "ok", data
    finally:
        server.stop()
