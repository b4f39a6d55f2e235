"""``GET /kv/v1/watch``: a store's changes as a stream of server-sent events.

``?prefix=`` (unpadded base64url; default every key), ``?start=N`` (replay
from retained version N, then follow; default: changes after the current
version), ``?end=N`` (stop after version N). A reconnecting client sends
``Last-Event-ID`` (or ``start=`` the last id + 1) and misses nothing: the
events come from the version chain itself (:mod:`kvstore.watch`), so a
server restart, or a different server on the same store, replays them from
the same versions. Each message carries one version's events, in commit
order::

    id: 42
    data: {"version": 42, "events": [{"seq": 57, "key": b64, "value": b64, "kind": "put"}]}

The stream opens with a comment ``: next <version>``: the version it starts
at, where a client resumes if the connection drops before any event; a
stream that reached ``end`` closes with ``: next <end + 1>``.
``kind`` is ``put``, ``delete`` (value null) or ``expire`` (a TTL or lease
ran out; its ``seq`` is the expired put's, its version the newest read when
the expiry was seen). A comment line (``: keepalive``) comes every
:data:`KEEPALIVE_S` when nothing else does. A start that is no longer
retained is 410 ``SnapshotTooOldError`` before the stream begins. A storage
error once the stream is under way (or a version retention deleted before
the stream sent it) ends the stream with ``: next <version>``, where the
client resumes; a version that is gone then gets its 410.

A watch wakes at once when this server applies a version (its own commits,
or its follower catching up) and reads it from memory on the event loop
(:meth:`kvstore.watch.Watch.poll_applied`); other processes' commits are
found by probing for the next root file every :data:`POLL_S`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from itertools import groupby
from typing import Final

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import StreamingResponse

from kvstore.errors import StoreError
from kvstore.watch import Watch, WatchEvent
from service.codec import KV_PREFIX, b64encode, client_key, query_key, query_number
from service.errors import ApiError
from service.kv_api import KvState
from service.routing import route

_log = logging.getLogger("lakekv.serve")

POLL_S: Final = 0.1
KEEPALIVE_S: Final = 15.0


def _start(request: Request) -> int | None:
    start: int | None = query_number(request, "start", int)
    last_id = request.headers.get("last-event-id")
    if last_id is not None:
        if start is not None:
            raise ApiError(400, "ValueError", "start and Last-Event-ID exclude each other")
        if not last_id.strip().isdigit():
            raise ApiError(400, "ValueError", f"Last-Event-ID must be a version, got {last_id!r}")
        start = int(last_id) + 1
    if start is not None and start < 0:
        raise ApiError(400, "ValueError", f"start must be a version >= 0, got {start}")
    return start


def _message(version: int, events: list[WatchEvent]) -> str:
    body = {
        "version": version,
        "events": [
            {"seq": e.seq, "key": b64encode(client_key(e.key)),
             "value": None if e.value is None else b64encode(e.value), "kind": e.kind}
            for e in events
        ],
    }
    return f"id: {version}\ndata: {json.dumps(body, separators=(',', ':'))}\n\n"


def _messages(events: list[WatchEvent]) -> str:
    return "".join(_message(version, list(group)) for version, group in groupby(events, key=lambda e: e.version))


async def watch(request: Request) -> StreamingResponse:
    state: KvState = request.app.state.kv
    prefix = query_key(request, "prefix") or b""
    start, end = _start(request), query_number(request, "end", int)
    if end is not None and (end < 0 or (start is not None and end < start)):
        raise ApiError(400, "ValueError", f"end must be a version >= start, got {end}")
    store = state.store
    watcher: Watch = await run_in_threadpool(store.watch, KV_PREFIX + prefix, start, end, POLL_S)
    start_version = watcher.next_version
    try:
        first = await run_in_threadpool(watcher.poll)  # a start no longer retained fails here, as a 410
    except BaseException:
        watcher.close()
        raise
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()
    def wake_up(version: int) -> None:
        loop.call_soon_threadsafe(wake.set)

    unsubscribe = store.subscribe(wake_up)

    async def stream() -> AsyncIterator[str]:
        try:
            # Where this stream starts, for a client that gave no start and must
            # resume from here if the connection drops before the first event.
            yield f": next {start_version}\n\n"
            if first:
                yield _messages(first)
            quiet_s = 0.0
            probe = True  # read storage on this pass: another process may have committed
            while not watcher.closed:
                wake.clear()
                # This server's own versions come from memory, on the loop: no
                # worker-thread hop between a commit and its event.
                events = watcher.poll_applied()
                if events is None and (probe or watcher.next_version <= store.version):
                    try:
                        events = await run_in_threadpool(watcher.poll)
                    except StoreError as exc:
                        # Not a bug: storage failed, or retention deleted a version this
                        # stream had yet to send. End the stream where it is: the client
                        # resumes from there, and gets a 410 if that version is gone.
                        _log.warning("watch stream ended at version %d: %s", watcher.next_version, exc)
                        break
                probe = False
                if events:
                    quiet_s = 0.0
                    yield _messages(events)
                    continue
                wait_s = min(watcher.wait_s, KEEPALIVE_S - quiet_s)
                try:
                    await asyncio.wait_for(wake.wait(), timeout=max(wait_s, 0.0))
                except TimeoutError:
                    probe = True
                    quiet_s += wait_s
                    if quiet_s >= KEEPALIVE_S:
                        quiet_s = 0.0
                        yield ": keepalive\n\n"
            # Past ``end`` (or stopped by a storage error): say where the stream
            # is, or a client whose last versions had no event under its prefix
            # would reconnect from where its last event left it.
            yield f": next {watcher.next_version}\n\n"
        finally:
            unsubscribe()
            watcher.close()

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )


ROUTES = [route("/kv/v1/watch", watch, "GET", params=("prefix", "start", "end"))]
