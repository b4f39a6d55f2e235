"""uvicorn's httptools protocol, sending what one event-loop pass writes as one socket write.

uvicorn writes a response's status line and headers, then its body, as two
transport writes, and uvloop sends each at once: two ``send(2)`` calls and
two TCP segments per response. On loopback the kernel does the receiving
side's TCP work inside the sender's call, so for a small GET the two sends
were the largest item of the server's profile (28 % of its samples under
64 clients, more than routing, middleware and the store read together),
and the client then needs two reads as well.

:class:`CoalescingHttpToolsProtocol` hands uvicorn a transport that keeps
the writes of one loop pass and sends them, joined, when the pass ends
(``loop.call_soon``): a response's head and body leave in one write, and a
streamed body's chunks (a watch) leave one pass after they are written.
Everything else the transport does goes straight through; closing it sends
what is kept first.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class CoalescingTransport:
    """Wraps a transport: ``write`` keeps the data until the current loop pass ends, then sends it in one write."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self.flush)
        self._pending.append(data)

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def flush(self) -> None:
        """Send what is kept now (a closing transport drops it, as a direct write would)."""
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending = []
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(data) for data in self._pending)

    def __getattr__(self, name: str) -> Any:
        # Reading, flow control, extra info, abort: the wrapped transport's own.
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol over a :class:`CoalescingTransport` (``uvicorn.Config(http=...)``)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
