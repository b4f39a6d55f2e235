"""Waiting on the keyspace for the server-side Lock and Election (etcd's ``concurrency`` recipes).

etcd's v3lock and v3election servers run clientv3's ``concurrency`` package
against themselves: a waiter puts its own key under the name's prefix and
waits until every key created before it is gone (``waitDeletes``). Here the
same loop runs on the keyspace directly: read the newest key created before
ours (``WithLastCreate``, ``max_create_revision``), and if there is one,
wait for the store to apply another version, then read again. A key whose
lease expired is invisible to the read at once; the sweep's delete commit
wakes the wait, and :data:`RECHECK_S` bounds the wait in case no commit
comes (another server's sweep, seen by polling).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Final, TypeVar

from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.context import EtcdContext

RECHECK_S: Final = 1.0
T = TypeVar("T")


def prefix_end(prefix: bytes) -> bytes:
    """etcd's ``GetPrefixRangeEnd``: the first key after every key starting with ``prefix``."""
    end = bytearray(prefix)
    for i in range(len(end) - 1, -1, -1):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\x00"  # all 0xff: to the end of the keyspace


def first_created(prefix: bytes) -> pb.RangeRequest:
    """clientv3's ``WithFirstCreate``: the oldest key under ``prefix``."""
    return pb.RangeRequest(
        key=prefix, range_end=prefix_end(prefix), sort_target=pb.RangeRequest.CREATE,
        sort_order=pb.RangeRequest.ASCEND, limit=1,
    )


def last_created_before(prefix: bytes, max_create_revision: int) -> pb.RangeRequest:
    """clientv3's ``WithLastCreate`` + ``WithMaxCreateRev``: the newest key under ``prefix`` created by then."""
    return pb.RangeRequest(
        key=prefix, range_end=prefix_end(prefix), sort_target=pb.RangeRequest.CREATE,
        sort_order=pb.RangeRequest.DESCEND, limit=1, max_create_revision=max_create_revision,
    )


class Changes:
    """Wakes a coroutine when the store applies a version (a context manager: it unsubscribes on exit)."""

    def __init__(self, context: EtcdContext) -> None:
        self._store = context.store
        self._wake = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_version(version: int) -> None:
            loop.call_soon_threadsafe(self._wake.set)

        self._unsubscribe = self._store.subscribe(on_version)

    def __enter__(self) -> Changes:
        return self

    def __exit__(self, *exc: object) -> None:
        self._unsubscribe()

    def arm(self) -> None:
        """Forget earlier wake-ups: call before reading, then :meth:`wait`."""
        self._wake.clear()

    async def wait(self) -> None:
        """Until a version is applied after :meth:`arm` (or :data:`RECHECK_S` passes)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=RECHECK_S)


async def wait_deletes(context: EtcdContext, prefix: bytes, max_create_revision: int) -> None:
    """etcd's ``waitDeletes``: until no key under ``prefix`` created at or before ``max_create_revision`` is left."""
    if max_create_revision <= 0:
        return  # nothing is created before revision 1 (and etcd reads a max of 0 as "no bound")
    request = last_created_before(prefix, max_create_revision)
    with Changes(context) as changes:
        while True:
            changes.arm()
            response = await context.blocking(context.keyspace.range, request)
            if not response.kvs:
                return
            await changes.wait()


class OpenStreams:
    """The open streams of one service (keepalives, observes), ended together when the server stops.

    Registered in ``EtcdContext.on_stop``: a graceful stop then waits only for
    unary calls, not for streams that would stay open for the whole grace period.
    """

    def __init__(self, context: EtcdContext) -> None:
        self._stops: set[asyncio.Event] = set()
        context.on_stop.append(self.end_all)

    def end_all(self) -> None:
        for stop in self._stops:
            stop.set()

    async def until_stopped(self, items: AsyncIterator[T]) -> AsyncIterator[T]:
        """``items`` until they end or the server stops."""
        stop = asyncio.Event()
        self._stops.add(stop)
        stopping = asyncio.ensure_future(stop.wait())
        iterator = items.__aiter__()
        try:
            while True:
                following = asyncio.ensure_future(iterator.__anext__())
                done, _ = await asyncio.wait({following, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if following not in done:
                    following.cancel()
                    return
                try:
                    item = following.result()
                except StopAsyncIteration:
                    return
                yield item
        finally:
            stopping.cancel()
            self._stops.discard(stop)
