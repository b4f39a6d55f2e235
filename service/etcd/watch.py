"""etcd's ``Watch`` service: one bidirectional stream carrying many watchers.

Each watcher follows the store's version chain from its start revision
(``Store.watch(start_revision=...)``: a replay of retained history, then the
head), so it sees every server's and process's commits in revision order.
A caught-up watcher reads the versions its own server applied from memory
(``poll_applied``); it reads root files on a worker thread only to catch up
or for a version too large to hold. The server's watchers share one
:class:`_Hub`: one ``Store.subscribe`` that wakes them all per version, and
one probe of storage for other servers' commits (``Store.refresh`` every
:data:`POLL_INTERVAL_S`, which applies them and so wakes the watchers), not
one per watcher.

As in etcd (``server/etcdserver/api/v3rpc/watch.go``): a create is
answered with ``created`` at once (its header revision is the revision the
watch starts after, unless ``start_revision`` is given); a start below the
compaction floor (or below retention) is then answered with
``compact_revision`` and ``canceled``; ``prev_kv`` is the key's record at
``mod_revision - 1`` (none for a create event); ``filters`` drop puts or
deletes; ``progress_notify`` sends an empty response with the current
revision every ``--etcd-progress-interval`` (etcd's 10 minutes by default)
to a watcher that got no events meanwhile, and a ``progress_request`` gets one (``watch_id`` -1) at once;
``fragment`` splits a response larger than :data:`MAX_RESPONSE_BYTES`.

A key whose row expires (a lease hook may give rows its lease's expiry) is
not reported when it expires: an expiry is not a commit and has no revision,
and an event with an old revision would break the order clients rely on.
As in etcd, a lease's end reaches watchers as the DELETE events of the
commit that revokes it (the Lease service's).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Final

import grpc.aio

from kvstore.errors import SnapshotTooOldError, StoreError
from kvstore.watch import EXPIRE_EVENT, PUT_EVENT, Watch, WatchEvent
from service.etcd import errors
from service.etcd.api.etcdserverpb import rpc_pb2 as pb
from service.etcd.api.etcdserverpb import rpc_pb2_grpc
from service.etcd.api.mvccpb import kv_pb2
from service.etcd.keyspace import KEYS, NAMESPACE, ORDER_KEY, decode, decode_order, key_bounds
from service.etcd.context import EtcdContext, status_of

_log = logging.getLogger("lakekv.etcd.watch")

# etcd's default --max-request-bytes plus its gRPC overhead allowance: the fragment size.
MAX_RESPONSE_BYTES: Final = 1536 * 1024
# How often a caught-up watcher probes storage for other servers' commits.
POLL_INTERVAL_S: Final = 0.05
DUPLICATE_ID: Final = "mvcc: duplicate watch ID provided on the WatchStream"


class _Watcher:
    def __init__(self, watch_id: int, request: pb.WatchCreateRequest) -> None:
        self.id = watch_id
        key = request.key or b"\x00"
        self.lo, self.hi = key_bounds(key, request.range_end)
        self.start = request.start_revision
        self.no_put = pb.WatchCreateRequest.NOPUT in request.filters
        self.no_delete = pb.WatchCreateRequest.NODELETE in request.filters
        self.prev_kv = request.prev_kv
        self.progress_notify = request.progress_notify
        self.fragment = request.fragment
        self.sent_since_tick = False
        self.task: asyncio.Task[None] | None = None
        self.watch: Watch | None = None
        # The latest record of each key this watcher reported: the next event's prev_kv.
        self.latest: dict[bytes, kv_pb2.KeyValue | None] = {}


class _Hub:
    """What every watcher of a server shares: one subscription to the versions the store handle
    applies (one wake-up of the loop per version, which wakes every watcher) and one probe of
    storage for other servers' commits every :data:`POLL_INTERVAL_S` (a ``refresh`` on a worker
    thread, skipped while a local directory's head beacon says nothing moved), instead of one
    subscription and one storage probe per watcher."""

    def __init__(self, context: EtcdContext) -> None:
        self._context = context
        self._wakes: set[asyncio.Event] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._prober: asyncio.Task[None] | None = None

    def join(self, wake: asyncio.Event) -> None:
        """Set ``wake`` whenever the store handle applies a version (call on the loop)."""
        if self._unsubscribe is None:
            self._loop = asyncio.get_running_loop()
            self._unsubscribe = self._context.store.subscribe(self._on_version)
            self._prober = asyncio.create_task(self._probe_forever())
        self._wakes.add(wake)

    def leave(self, wake: asyncio.Event) -> None:
        self._wakes.discard(wake)

    def _on_version(self, version: int) -> None:  # on the thread that applied the version
        loop = self._loop
        # A commit applied while the server shuts down (its loop closed, stop() not run) has no watcher to wake.
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake_all)

    def _wake_all(self) -> None:
        for wake in self._wakes:
            wake.set()

    async def _probe_forever(self) -> None:
        store = self._context.store
        while True:
            await asyncio.sleep(POLL_INTERVAL_S)
            if not self._wakes or store.reads_without_waiting():
                continue
            try:
                await self._context.blocking(store.refresh)
            except StoreError as exc:  # the watchers' own polls meet it and cancel with its status
                _log.debug("watch probe failed (will retry): %s", exc)

    async def stop(self) -> None:
        if self._prober is not None:
            self._prober.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._prober
        if self._unsubscribe is not None:
            self._unsubscribe()


class _Stream:
    """One Watch call: the requests it reads, the watchers it runs, the responses it sends."""

    def __init__(self, context: EtcdContext, hub: _Hub) -> None:
        self._context = context
        self._hub = hub
        self._out: asyncio.Queue[pb.WatchResponse | BaseException | None] = asyncio.Queue()
        self._watchers: dict[int, _Watcher] = {}
        self._next_id = 0

    def end(self) -> None:
        """End the stream with etcd's "server stopped" (UNAVAILABLE: clients reconnect and resume)."""
        self._out.put_nowait(errors.STOPPED)

    def _header(self, revision: int | None = None) -> pb.ResponseHeader:
        return self._context.header(self._context.store.seq if revision is None else revision)

    async def serve(self, requests: AsyncIterator[pb.WatchRequest]) -> AsyncIterator[pb.WatchResponse]:
        reader = asyncio.create_task(self._read(requests))
        ticker = asyncio.create_task(self._tick())
        try:
            while True:
                item = await self._out.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            reader.cancel()
            ticker.cancel()
            for watcher in list(self._watchers.values()):
                self._stop(watcher)

    async def _read(self, requests: AsyncIterator[pb.WatchRequest]) -> None:
        try:
            async for request in requests:
                kind = request.WhichOneof("request_union")
                if kind == "create_request":
                    await self._create(request.create_request)
                elif kind == "cancel_request":
                    self._cancel(request.cancel_request.watch_id)
                elif kind == "progress_request":
                    self._out.put_nowait(pb.WatchResponse(header=self._header(), watch_id=-1))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - handed to the sending side, which answers with it
            self._out.put_nowait(exc)
            return
        self._out.put_nowait(None)  # the client closed its side: etcd ends the stream too

    async def _create(self, request: pb.WatchCreateRequest) -> None:
        watch_id = request.watch_id
        if watch_id == 0:  # etcd's AutoWatchID
            while self._next_id in self._watchers:
                self._next_id += 1
            watch_id = self._next_id
            self._next_id += 1
        elif watch_id in self._watchers:
            self._out.put_nowait(pb.WatchResponse(
                header=self._header(), watch_id=watch_id, created=True, canceled=True, cancel_reason=DUPLICATE_ID,
            ))
            return
        watcher = _Watcher(watch_id, request)
        current = self._context.store.seq
        if watcher.start <= 0:
            watcher.start = current + 1
        self._watchers[watch_id] = watcher
        self._out.put_nowait(pb.WatchResponse(header=self._header(current), watch_id=watch_id, created=True))
        watcher.task = asyncio.create_task(self._follow(watcher))

    def _cancel(self, watch_id: int) -> None:
        watcher = self._watchers.get(watch_id)
        if watcher is None:
            return  # etcd ignores a cancel of an unknown watch
        self._stop(watcher)
        self._out.put_nowait(pb.WatchResponse(header=self._header(), watch_id=watch_id, canceled=True))

    def _stop(self, watcher: _Watcher) -> None:
        self._watchers.pop(watcher.id, None)
        if watcher.task is not None:
            watcher.task.cancel()
        if watcher.watch is not None:
            watcher.watch.close()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self._context.config.etcd_progress_interval_s)
            for watcher in list(self._watchers.values()):
                if watcher.progress_notify and not watcher.sent_since_tick:
                    self._out.put_nowait(pb.WatchResponse(header=self._header(), watch_id=watcher.id))
                watcher.sent_since_tick = False

    async def _follow(self, watcher: _Watcher) -> None:
        store = self._context.store
        wake = asyncio.Event()
        self._hub.join(wake)
        try:
            try:
                watcher.watch = await self._context.blocking(
                    lambda: store.watch(NAMESPACE, poll_interval_s=POLL_INTERVAL_S, start_revision=watcher.start)
                )
                caught_up = False
                while True:
                    wake.clear()
                    events = watcher.watch.poll_applied()
                    # Storage is read here only to catch up, or for a version this handle applied but
                    # does not hold (a large commit); other servers' commits reach the handle through
                    # the hub's probe, which wakes every watcher once they are applied.
                    if events is None and (not caught_up or watcher.watch.next_version <= store.version):
                        events = await self._context.blocking(watcher.watch.poll)
                        caught_up = caught_up or not events
                    if events:
                        await self._send(watcher, events)
                        continue
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(wake.wait(), timeout=POLL_INTERVAL_S)
            except SnapshotTooOldError:
                floor = await self._context.blocking(self._compacted_floor, watcher.start)
                self._watchers.pop(watcher.id, None)
                self._out.put_nowait(pb.WatchResponse(
                    header=self._header(), watch_id=watcher.id, compact_revision=floor, canceled=True,
                ))
            except StoreError as exc:
                status = status_of(exc)
                assert status is not None
                self._watchers.pop(watcher.id, None)
                self._out.put_nowait(pb.WatchResponse(
                    header=self._header(), watch_id=watcher.id, canceled=True, cancel_reason=status[1],
                ))
        finally:
            self._hub.leave(wake)
            if watcher.watch is not None:
                watcher.watch.close()

    def _compacted_floor(self, start: int) -> int:
        """The revision a watch refused at ``start`` may resume from (etcd's compact_revision)."""
        floor = self._context.store.compacted_revision()
        if floor > start:
            return floor
        return max(self._context.store.retention_floor().seq, start + 1)

    async def _send(self, watcher: _Watcher, changes: list[WatchEvent]) -> None:
        events: list[kv_pb2.Event] = []
        for change in _in_request_order(changes):
            if not watcher.lo <= change.key < watcher.hi:
                continue
            if change.kind == PUT_EVENT:
                assert change.value is not None
                kv = decode(change.key, change.value, change.seq)
                event = kv_pb2.Event(type=kv_pb2.Event.PUT, kv=kv)
            else:
                kv = kv_pb2.KeyValue(key=change.key[len(KEYS):], mod_revision=change.seq)
                event = kv_pb2.Event(type=kv_pb2.Event.DELETE, kv=kv)
            if watcher.prev_kv and not (event.type == kv_pb2.Event.PUT and kv.create_revision == kv.mod_revision):
                prev = await self._previous(watcher, change.key, change.seq)
                if prev is not None:
                    event.prev_kv.CopyFrom(prev)
            watcher.latest[change.key] = kv if event.type == kv_pb2.Event.PUT else None
            if (event.type == kv_pb2.Event.PUT and watcher.no_put) or (
                event.type == kv_pb2.Event.DELETE and watcher.no_delete
            ):
                continue
            events.append(event)
        if not events or watcher.id not in self._watchers:
            return
        watcher.sent_since_tick = True
        response = pb.WatchResponse(header=self._header(), watch_id=watcher.id, events=events)
        if watcher.fragment and response.ByteSize() >= MAX_RESPONSE_BYTES and len(events) > 1:
            for part in _fragments(response):
                self._out.put_nowait(part)
        else:
            self._out.put_nowait(response)

    async def _previous(self, watcher: _Watcher, key: bytes, revision: int) -> kv_pb2.KeyValue | None:
        if key in watcher.latest:
            return watcher.latest[key]

        def read() -> kv_pb2.KeyValue | None:
            try:
                with self._context.store.at(revision=revision - 1) as snapshot:
                    for found, raw, mod in snapshot.scan_with_revision(key, key + b"\x00"):
                        return decode(found, raw, mod)
            except SnapshotTooOldError:
                pass  # etcd too sends no prev_kv when the previous revision is compacted
            return None

        return await self._context.blocking(read)


def _in_request_order(changes: list[WatchEvent]) -> list[WatchEvent]:
    """``changes`` (ordered by revision, then key) with each commit's keys in the order its request
    wrote them, as its ORDER_KEY row says (etcd's sub-revision order); that row itself dropped."""
    ordered: list[WatchEvent] = []
    start = 0
    while start < len(changes):
        end = start
        while end < len(changes) and changes[end].seq == changes[start].seq:
            end += 1
        commit = changes[start:end]
        order = [c for c in commit if c.key == ORDER_KEY and c.value is not None]
        commit = [c for c in commit if c.key.startswith(KEYS) and c.kind != EXPIRE_EVENT]
        if order:
            assert order[0].value is not None
            rank = {key: n for n, key in enumerate(decode_order(order[0].value))}
            commit.sort(key=lambda change: rank.get(change.key, len(rank)))
        ordered.extend(commit)
        start = end
    return ordered


def _fragments(response: pb.WatchResponse) -> list[pb.WatchResponse]:
    """etcd's sendFragments: events split over responses under the size limit, all but the last ``fragment``."""
    parts: list[pb.WatchResponse] = []
    current = pb.WatchResponse(header=response.header, watch_id=response.watch_id, fragment=True)
    for event in response.events:
        current.events.append(event)
        if len(current.events) > 1 and current.ByteSize() >= MAX_RESPONSE_BYTES:
            del current.events[-1]
            parts.append(current)
            current = pb.WatchResponse(header=response.header, watch_id=response.watch_id, fragment=True)
            current.events.append(event)
    current.fragment = False
    parts.append(current)
    return parts


class WatchServicer(rpc_pb2_grpc.WatchServicer):
    def __init__(self, context: EtcdContext) -> None:
        self._context = context
        self._streams: set[_Stream] = set()
        self._hub = _Hub(context)
        context.on_stop.append(self._end_streams)
        context.after_stop.append(self._hub.stop)

    def _end_streams(self) -> None:
        """The server is stopping: end every watch stream now (clients reconnect and resume)."""
        for stream in self._streams:
            stream.end()

    async def Watch(
        self, request_iterator: AsyncIterator[pb.WatchRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WatchResponse]:
        stream = _Stream(self._context, self._hub)
        self._streams.add(stream)
        try:
            async for response in stream.serve(request_iterator):
                yield response
        except (errors.EtcdError, ValueError, TypeError, StoreError) as exc:
            status = status_of(exc)
            assert status is not None
            await context.abort(*status)
        finally:
            self._streams.discard(stream)


def add_to_server(context: EtcdContext, server: grpc.aio.Server) -> None:
    rpc_pb2_grpc.add_WatchServicer_to_server(WatchServicer(context), server)  # type: ignore[no-untyped-call]  # generated, untyped



