"""The waiting helpers of the server-side Lock and Election (:mod:`service.etcd.waiting`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace

from service.etcd.waiting import OpenStreams, prefix_end


def test_prefix_end_is_etcds() -> None:
    assert prefix_end(b"jobs/") == b"jobs0"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"\xff\xff") == b"\x00"


def test_a_stopping_server_ends_open_streams() -> None:
    """A keepalive or observe stream whose client sends nothing more must not hold a graceful stop."""

    async def scenario() -> list[int]:
        context = SimpleNamespace(on_stop=[])
        streams = OpenStreams(context)  # type: ignore[arg-type]
        received = asyncio.Queue[int]()
        never = asyncio.Event()

        async def requests() -> AsyncIterator[int]:
            yield 1
            await never.wait()  # the client keeps its stream open and silent
            yield 2

        async def serve() -> list[int]:
            seen = []
            async for item in streams.until_stopped(requests()):
                seen.append(item)
                received.put_nowait(item)
            return seen

        serving = asyncio.ensure_future(serve())
        assert await received.get() == 1
        for end in context.on_stop:  # what EtcdServer.stop does first
            end()
        return await serving

    assert asyncio.run(scenario()) == [1]
